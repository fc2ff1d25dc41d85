#include "src/api/entry.h"

namespace tempo::api {

ncclResult_t notImplemented(const char* func) {
  return toNccl(fail(Status::InvalidUsage, "%s: not implemented yet", func));
}

}  // namespace tempo::api
