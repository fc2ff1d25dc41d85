// Host reducers: the elementwise combine step of every reducing collective, run on the CPU.
//
// reduce() and divide() are the fast implementations (vectorised; AVX2 + F16C where the
// CPU has them, chosen once per process, plain x86-64 / portable code otherwise).
// ref::reduce() and ref::divide() are the scalar reference: one element at a time, written
// to be obviously correct, and the oracle the tests compare the fast path with. Both
// implement exactly the semantics below and agree bit for bit on every input.
//
// Threading and memory: the functions keep no state besides an immutable table chosen on
// first use, so any number of threads may call them concurrently on disjoint outputs. They
// never allocate. count == 0 is a no-op and the pointers may then be null. Pointers need only
// the element type's natural alignment; the fast path also accepts unaligned ones.
//
// Aliasing: dst may be the same pointer as a, as b, or both (exact aliasing, the in-place
// case); a may equal b. Any other overlap between dst and an input is not allowed.
//
// Semantics (the specification both implementations follow):
//  - Integers (Int8..Uint64): Sum and Prod wrap modulo 2^bits (two's complement; computed in
//    unsigned arithmetic, so there is no undefined behaviour). Max/Min compare as signed or
//    unsigned per the type. Division truncates toward zero, as C's `/` does:
//    (-7) / 2 == -3. The divisor is a uint64_t, so e.g. int8 values divided by 300 give 0.
//  - Float32, Float64: native IEEE-754 arithmetic in that type, round to nearest even.
//  - Float16, Bfloat16, Float8e4m3, Float8e5m2: both operands are converted to float
//    (exactly), the operation is done once in float, and the float result is rounded once
//    back to the type, to nearest even (kernels/float_convert.h). Overflow: Float16 and
//    Bfloat16 round to +-infinity; the fp8 types saturate finite results to +-max finite
//    (E4M3 448, E5M2 57344), as NCCL's fp8 reductions do (__NV_SATFINITE). E4M3 has no
//    infinity, so an infinite float result also becomes +-448; E5M2 keeps infinities.
//  - Max/Min on floating types follow C's fmaxf/fminf (IEEE 754-2008 maxNum/minNum), which
//    is what NCCL's device reduction uses (FuncMinMax: fmaxf/fminf, __hmax/__hmin): a NaN
//    operand is ignored and the other operand is returned; the result is NaN only when both
//    operands are NaN. Signed zeros are ordered -0 < +0 (Max(+0,-0) = +0, Min(+0,-0) = -0),
//    so both operations are commutative bit for bit, whatever order ranks combine in.
//  - NaN results are canonical: every NaN an operation produces, whatever the inputs' sign
//    and payload, is the positive quiet NaN with zero payload (float 0x7FC00000, double
//    0x7FF8000000000000, half 0x7E00, bf16 0x7FC0, E4M3 0x7F, E5M2 0x7E). NaN payloads
//    carry no meaning across ranks, and x86 picks the payload of a two-NaN operation by
//    operand order, which the compiler may swap; canonical NaNs keep results reproducible.
//  - Avg reduces as Sum: an average is summed across ranks and divided once, at the end,
//    either fused into the last combine (postDivisor) or by divide().
//  - postDivisor > 1 (Sum or Avg only): dst[i] = (a[i] + b[i]) / postDivisor in one pass.
//    Integers: the wrapped sum is divided (truncating). Floating types: the sum is computed
//    in the compute type (double for Float64, else float), divided by the divisor converted
//    to that type, and rounded to the element type once. postDivisor 0 or 1 means no
//    division; it is ignored for Prod, Max and Min.
//  - The floating-point environment is assumed to be the default one (round to nearest,
//    no flush-to-zero / denormals-are-zero); subnormals are handled in full.
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/core/dtype.h"

namespace tempo::kernels {

// dst[i] = a[i] op b[i] for i in [0, count). See the file comment for the exact semantics.
void reduce(void* dst, const void* a, const void* b, size_t count, DataType type, RedOp op,
            uint64_t postDivisor = 1);

// dst[i] = src[i] / divisor: Avg finalisation when no combine step is left. dst may equal
// src. Integers truncate toward zero; floating types divide in the compute type and round
// once. divisor 0 is treated as 1.
void divide(void* dst, const void* src, size_t count, DataType type, uint64_t divisor);

// dst[i] = src[i] * scalar, with Prod's semantics (the scalar is one element of `type`):
// ncclRedOpCreatePreMulSum's premultiplication. dst may equal src.
void scale(void* dst, const void* src, size_t count, DataType type, const void* scalar);

namespace ref {
// The scalar reference implementations of the two functions above; same contract.
void reduce(void* dst, const void* a, const void* b, size_t count, DataType type, RedOp op,
            uint64_t postDivisor = 1);
void divide(void* dst, const void* src, size_t count, DataType type, uint64_t divisor);
}  // namespace ref

}  // namespace tempo::kernels
