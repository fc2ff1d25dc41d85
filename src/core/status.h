// Status and Result: Tempo's one way to propagate errors.
//
// Status is value-for-value equal to ncclResult_t, so src/api converts it with a cast.
// An error is described once, where it is detected: fail() formats the exact cause, logs
// it at WARN and stores it as the calling thread's last error (ncclGetLastError). Every
// hop above that only forwards the Status with TEMPO_TRY / TEMPO_ASSIGN.
#pragma once

#include <optional>
#include <utility>

namespace tempo {

enum class Status : int {
  Success = 0,
  UnhandledDeviceError = 1,  // ncclUnhandledCudaError
  SystemError = 2,
  InternalError = 3,
  InvalidArgument = 4,
  InvalidUsage = 5,
  RemoteError = 6,
  InProgress = 7,
  Timeout = 8,
};

inline bool ok(Status s) { return s == Status::Success; }
const char* statusName(Status s);  // "ncclSystemError", ...

// Formats the cause, logs it (WARN) and records it as this thread's last error.
// Returns `s`, so a detection site reads `return fail(Status::X, "...", ...);`.
[[nodiscard]] Status fail(Status s, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// The calling thread's last error message ("" when none). Never null.
const char* lastErrorMessage();
void clearLastError();
// Records a message as the last error without logging (used to forward an error
// observed on another thread to the caller's thread).
void setLastErrorMessage(const char* msg);

// A value or the Status that prevented computing it. Output is set only on success.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status s) : status_(s) {}               // NOLINT: implicit by design
  bool ok() const { return status_ == Status::Success; }
  Status status() const { return status_; }
  T& value() & { return *value_; }
  T&& value() && { return std::move(*value_); }
  const T& value() const& { return *value_; }
  T* operator->() { return &*value_; }
  T& operator*() { return *value_; }

 private:
  std::optional<T> value_;
  Status status_ = Status::Success;
};

}  // namespace tempo

#define TEMPO_CONCAT_INNER(a, b) a##b
#define TEMPO_CONCAT(a, b) TEMPO_CONCAT_INNER(a, b)

// Returns the Status of `expr` from the enclosing function unless it is Success.
#define TEMPO_TRY(expr)                                        \
  do {                                                         \
    ::tempo::Status tempo_try_status_ = (expr);                \
    if (tempo_try_status_ != ::tempo::Status::Success)         \
      return tempo_try_status_;                                \
  } while (0)

// `TEMPO_ASSIGN(auto x, resultExpr);` unwraps a Result or returns its Status.
#define TEMPO_ASSIGN(lhs, expr) TEMPO_ASSIGN_IMPL(TEMPO_CONCAT(tempo_res_, __LINE__), lhs, expr)
#define TEMPO_ASSIGN_IMPL(tmp, lhs, expr)        \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()
