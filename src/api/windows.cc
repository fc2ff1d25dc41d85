// Memory windows: ncclCommWindowRegister, ncclCommWindowDeregister, ncclWinGetUserPtr.
//
// Both window calls are collective (every rank, its own buffer, the same order; see
// Communicator::exchangeWindow). Inside a group they run at ncclGroupEnd, concurrently,
// as inits do, so one thread may register the windows of several ranks; on a nonblocking
// communicator they return ncclInProgress and run on its worker (the handle is written at
// once and becomes usable when ncclCommGetAsyncError says ncclSuccess). A window is a
// registered buffer: collectives on it name the registration as on ncclCommRegister's.
// The one-sided calls that target windows (ncclPutSignal, ncclSignal, ncclWaitSignal) are
// not implemented yet.
#include "src/api/entry.h"

#include <mutex>

#include "src/api/checks.h"
#include "src/comm/group.h"

using tempo::Status;
using tempo::api::guarded;
using Window = tempo::comm::Communicator::Window;

namespace {

ncclWindow_t handleOf(Window* w) { return reinterpret_cast<ncclWindow_t>(w); }

// Runs a window call's collective part `job` on `c`: at once or at the end of the group
// for a blocking communicator, on its worker for a nonblocking one.
Status runWindowCall(tempo::comm::Communicator* c, const char* fn, std::function<Status()> job) {
  if (c->blocking()) return tempo::comm::submitInit(std::move(job));
  if (!c->beginAsync())
    return tempo::fail(Status::InvalidArgument,
                       "%s: comm %p: attempt to use communicator before the previous operation returned ncclSuccess",
                       fn, static_cast<void*>(c));
  c->postAsync([c, job = std::move(job)] {
    Status s;
    {
      std::lock_guard<std::timed_mutex> drive(c->driveMutex());
      s = job();
    }
    c->endAsync(s);
  });
  return Status::InProgress;
}

// The window behind `win` on `c`, registered and not yet deregistered.
tempo::Result<Window*> windowOf(tempo::comm::Communicator& c, ncclWindow_t win, const char* fn) {
  Window* w = c.window(win);
  if (!w || !w->ready.load(std::memory_order_acquire))
    return tempo::fail(Status::InvalidArgument, "%s: %p is not a registered window of comm %p", fn,
                       static_cast<void*>(win), static_cast<void*>(&c));
  return w;
}

}  // namespace

NCCL_API(ncclResult_t, ncclCommWindowRegister, ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
         int winFlags) {
  return guarded([&]() -> Status {
    TEMPO_ASSIGN(tempo::comm::Pin c, tempo::api::liveComm(comm, "ncclCommWindowRegister"));
    if (!win) return tempo::fail(Status::InvalidArgument, "ncclCommWindowRegister: win is NULL");
    if (!buff || size == 0)
      return tempo::fail(Status::InvalidArgument, "ncclCommWindowRegister: buffer %p of %zu bytes is empty", buff,
                         size);
    constexpr int kKnownFlags = NCCL_WIN_COLL_SYMMETRIC | NCCL_WIN_STRICT_ORDERING;
    if (winFlags & ~kKnownFlags)
      return tempo::fail(Status::InvalidArgument,
                         "ncclCommWindowRegister: winFlags 0x%x: only NCCL_WIN_DEFAULT, NCCL_WIN_COLL_SYMMETRIC and "
                         "NCCL_WIN_STRICT_ORDERING are defined",
                         unsigned(winFlags));
    *win = nullptr;
    tempo::comm::Communicator* cc = c.get();
    TEMPO_ASSIGN(Window * w, cc->newWindow(buff, size, winFlags));
    if (!cc->blocking()) *win = handleOf(w);
    return runWindowCall(cc, "ncclCommWindowRegister", [cc, w, win]() -> Status {
      TEMPO_TRY(cc->exchangeWindow(w));
      *win = handleOf(w);
      return Status::Success;
    });
  });
}

NCCL_API(ncclResult_t, ncclCommWindowDeregister, ncclComm_t comm, ncclWindow_t win) {
  return guarded([&]() -> Status {
    TEMPO_ASSIGN(tempo::comm::Pin c, tempo::api::liveComm(comm, "ncclCommWindowDeregister"));
    TEMPO_ASSIGN(Window * w, windowOf(*c, win, "ncclCommWindowDeregister"));
    tempo::comm::Communicator* cc = c.get();
    return runWindowCall(cc, "ncclCommWindowDeregister", [cc, w] { return cc->deregisterWindow(w); });
  });
}

NCCL_API(ncclResult_t, ncclWinGetUserPtr, ncclComm_t comm, ncclWindow_t win, void** outUserPtr) {
  return guarded([&]() -> Status {
    TEMPO_ASSIGN(tempo::comm::Pin c, tempo::api::anyComm(comm, "ncclWinGetUserPtr"));
    if (!outUserPtr) return tempo::fail(Status::InvalidArgument, "ncclWinGetUserPtr: outUserPtr is NULL");
    TEMPO_ASSIGN(Window * w, windowOf(*c, win, "ncclWinGetUserPtr"));
    *outUserPtr = w->buff;
    return Status::Success;
  });
}
