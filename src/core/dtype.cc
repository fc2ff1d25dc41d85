#include "src/core/dtype.h"

namespace tempo {

const char* dataTypeName(DataType t) {
  static const char* const kNames[kNumDataTypes] = {
      "ncclInt8",    "ncclUint8",   "ncclInt32",   "ncclUint32",     "ncclInt64",      "ncclUint64",
      "ncclFloat16", "ncclFloat32", "ncclFloat64", "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
  int i = static_cast<int>(t);
  return i >= 0 && i < kNumDataTypes ? kNames[i] : "invalid datatype";
}

const char* redOpName(RedOp op) {
  static const char* const kNames[kNumRedOps] = {"ncclSum", "ncclProd", "ncclMax", "ncclMin", "ncclAvg"};
  int i = static_cast<int>(op);
  return i >= 0 && i < kNumRedOps ? kNames[i] : "invalid op";
}

}  // namespace tempo
