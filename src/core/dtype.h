// Internal data types and reduction operators, value-for-value equal to ncclDataType_t
// and ncclRedOp_t (src/api checks the ranges and casts).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tempo {

enum class DataType : int {
  Int8 = 0, Uint8 = 1, Int32 = 2, Uint32 = 3, Int64 = 4, Uint64 = 5,
  Float16 = 6, Float32 = 7, Float64 = 8, Bfloat16 = 9, Float8e4m3 = 10, Float8e5m2 = 11,
};
inline constexpr int kNumDataTypes = 12;

enum class RedOp : int { Sum = 0, Prod = 1, Max = 2, Min = 3, Avg = 4 };
inline constexpr int kNumRedOps = 5;

constexpr size_t dataTypeSize(DataType t) {
  switch (t) {
    case DataType::Int8: case DataType::Uint8:
    case DataType::Float8e4m3: case DataType::Float8e5m2: return 1;
    case DataType::Float16: case DataType::Bfloat16: return 2;
    case DataType::Int32: case DataType::Uint32: case DataType::Float32: return 4;
    case DataType::Int64: case DataType::Uint64: case DataType::Float64: return 8;
  }
  return 0;
}

constexpr bool isFloating(DataType t) {
  return t == DataType::Float16 || t == DataType::Float32 || t == DataType::Float64 ||
         t == DataType::Bfloat16 || t == DataType::Float8e4m3 || t == DataType::Float8e5m2;
}

const char* dataTypeName(DataType t);  // "ncclFloat32", ...
const char* redOpName(RedOp op);       // "ncclSum", ...

}  // namespace tempo
