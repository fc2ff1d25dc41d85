#include "src/core/status.h"

#include <cstdarg>
#include <cstdio>

#include "src/core/log.h"

namespace tempo {
namespace {
thread_local char t_lastError[1024];
}

const char* statusName(Status s) {
  switch (s) {
    case Status::Success: return "ncclSuccess";
    case Status::UnhandledDeviceError: return "ncclUnhandledCudaError";
    case Status::SystemError: return "ncclSystemError";
    case Status::InternalError: return "ncclInternalError";
    case Status::InvalidArgument: return "ncclInvalidArgument";
    case Status::InvalidUsage: return "ncclInvalidUsage";
    case Status::RemoteError: return "ncclRemoteError";
    case Status::InProgress: return "ncclInProgress";
    case Status::Timeout: return "ncclTimeout";
  }
  return "unknown status";
}

Status fail(Status s, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(t_lastError, sizeof t_lastError, fmt, ap);
  va_end(ap);
  // Logged without a source location: the message itself names the exact cause.
  if (log::enabled(log::Level::Warn, log::All)) log::message(log::Level::Warn, log::All, nullptr, 0, "%s", t_lastError);
  return s;
}

const char* lastErrorMessage() { return t_lastError; }
void clearLastError() { t_lastError[0] = '\0'; }
void setLastErrorMessage(const char* msg) { snprintf(t_lastError, sizeof t_lastError, "%s", msg); }

}  // namespace tempo
