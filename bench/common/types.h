// Datatype and reduction-op tables of the perf tools, and the bench's own scalar codecs for
// the narrow floating types.
//
// Names and order are nccl-tests' (test_typenames / test_opnames), so `-d all` and `-o all`
// iterate exactly as nccl-tests does; rccl-tests' fp8_e4m3 / fp8_e5m2 are accepted as
// aliases. The codecs are written here on purpose: the validation oracle must not share code
// with the library it checks (kernels/float_convert.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "rccl/rccl.h"

namespace tempo::bench {

constexpr int kAll = -1;     // "-d all" / "-o all" / "-r all"
constexpr int kMulSum = 5;   // stand-in op index for PreMulSum ("mulsum"), as nccl-tests
constexpr int kNumTypes = 12;
constexpr int kNumOps = 6;   // sum prod max min avg mulsum

const char* typeName(int type);  // nccl-tests' name ("f8e4m3"), "?" when out of range
size_t typeSize(int type);
const char* opName(int op);      // "sum" .. "mulsum"

// nccl-tests' parsing: a name, "all" -> kAll, anything else prints
// "invalid type X, defaulting to float .." (resp. sum) and returns the default.
int parseType(const char* s);
int parseOp(const char* s);

// Binary layout of a narrow IEEE-like format (sign, expBits, manBits).
struct NarrowFormat {
  int expBits;
  int manBits;
  bool hasInf;         // E5M2 and half/bf16 have infinities; E4M3 (fn) does not
  uint32_t maxFinite;  // bit pattern of the largest finite positive value
  bool satFinite;      // fp8: finite overflow saturates to +-max (NCCL's __NV_SATFINITE)
};
const NarrowFormat& narrowFormat(int type);  // for half, bfloat16, f8e4m3, f8e5m2
bool isNarrowFloat(int type);
bool isFloating(int type);  // any of the floating types
bool isSigned(int type);    // signed integers and every floating type

// Exact value of a narrow-format bit pattern (NaN -> quiet NaN).
double narrowDecode(const NarrowFormat& f, uint32_t bits);
// x rounded once to the nearest representable value, ties to even. Finite overflow: half and
// bfloat16 round to +-infinity, the fp8 formats saturate to +-max finite; an infinite x stays
// infinite where the format has infinities (E5M2), else (E4M3) becomes +-max. NaN becomes the
// positive canonical NaN.
uint32_t narrowEncode(const NarrowFormat& f, double x);

// Per-rank element count for the all-gather-like tools: count / nranks, rounded down so
// each rank's block is a multiple of 16 bytes (nccl-tests 2.19).
size_t perRankCount16(size_t count, size_t eltSize, int nranks);

}  // namespace tempo::bench
