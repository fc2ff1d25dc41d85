// Memory windows (ncclCommWindowRegister, ncclCommWindowDeregister, ncclWinGetUserPtr) and
// the one-sided calls on them (ncclPutSignal, ncclSignal, ncclWaitSignal).
//
// Both window calls are collective (every rank, its own buffer, the same order; see
// Communicator::exchangeWindow). Inside a group they run at ncclGroupEnd, concurrently,
// as inits do, so one thread may register the windows of several ranks; on a nonblocking
// communicator they return ncclInProgress and run on its worker (the handle is written at
// once and becomes usable when ncclCommGetAsyncError says ncclSuccess). A window is a
// registered buffer: collectives on it name the registration as on ncclCommRegister's.
//
// One-sided calls are ordered with the communicator's other calls, as on a stream: a put
// returns once its data and signal have reached the target's inbox, which is served
// whether or not the target is in a call (engine::Inbox, Communicator::serveInbox); a
// wait returns once the signals it names have arrived, the data of the puts before them
// in place. As in NCCL, sigIdx, ctx and flags must be 0. Host memory only for now: a
// source or window in device memory is refused with ncclInvalidUsage.
#include "src/api/entry.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "src/api/checks.h"
#include "src/comm/group.h"
#include "src/core/dtype.h"
#include "src/mem/device_api.h"

using tempo::Status;
using tempo::api::guarded;
using Window = tempo::comm::Communicator::Window;

static_assert(sizeof(tempo::comm::SignalWait) == sizeof(ncclWaitSignalDesc_t) &&
                  offsetof(tempo::comm::SignalWait, count) == offsetof(ncclWaitSignalDesc_t, opCnt) &&
                  offsetof(tempo::comm::SignalWait, peer) == offsetof(ncclWaitSignalDesc_t, peer) &&
                  offsetof(tempo::comm::SignalWait, sigIdx) == offsetof(ncclWaitSignalDesc_t, sigIdx) &&
                  offsetof(tempo::comm::SignalWait, ctx) == offsetof(ncclWaitSignalDesc_t, ctx),
              "SignalWait must read ncclWaitSignalDesc_t as it is");

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
  c->postAsync([c, job = std::move(job)] { c->endAsync(job()); });
  return Status::InProgress;
}

bool onDevice(const void* p) {
  tempo::mem::DeviceApi* gpu = tempo::mem::deviceApi();
  if (!gpu || !p) return false;
  auto r = gpu->isDevicePointer(p);
  return r.ok() && *r;
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
    TEMPO_ASSIGN(Window * w, cc->newWindow(buff, size, winFlags, onDevice(buff)));
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

namespace {

// ncclPutSignal, and ncclSignal as a put of nothing (no window).
// The datatype travels as an int: an out-of-range enum value is the caller's to pass, not
// ours to load.
Status putSignal(const void* localbuff, size_t count, int datatype, int peer, ncclWindow_t peerWin,
                 size_t peerWinOffset, int sigIdx, int ctx, unsigned flags, ncclComm_t comm, hipStream_t stream,
                 const char* fn) {
  Status s = [&]() -> Status {
    TEMPO_ASSIGN(tempo::comm::Pin c, tempo::api::liveComm(comm, fn));
    if (sigIdx != 0 || ctx != 0 || flags != 0)
      return tempo::fail(Status::InvalidArgument, "%s: sigIdx %d, ctx %d and flags %u must all be 0 (as in NCCL)", fn,
                         sigIdx, ctx, flags);
    if (peer < 0 || peer >= c->nranks())
      return tempo::fail(Status::InvalidArgument, "%s: peer %d is outside [0, %d)", fn, peer, c->nranks());
    tempo::comm::CollArgs a;
    a.coll = tempo::engine::CollKind::PutSignal;
    a.peer = peer;
    a.stream = stream;
    a.type = tempo::DataType::Int8;
    if (peerWin || count) {  // a put (ncclSignal passes neither)
      if (datatype < 0 || datatype >= int(ncclNumTypes))
        return tempo::fail(Status::InvalidArgument, "%s: invalid datatype %d", fn, datatype);
      const uint64_t size = tempo::dataTypeSize(tempo::DataType(datatype));
      if (count > SIZE_MAX / size)
        return tempo::fail(Status::InvalidArgument, "%s: count %zu of %lu-byte elements overflows the address space",
                           fn, count, (unsigned long)size);
      if (count && !localbuff) return tempo::fail(Status::InvalidArgument, "%s: localbuff is NULL with count %zu", fn, count);
      TEMPO_ASSIGN(Window * w, windowOf(*c, peerWin, fn));
      const uint64_t bytes = count * size, room = w->sizes[size_t(peer)];
      if (peerWinOffset > room || bytes > room - peerWinOffset)
        return tempo::fail(Status::InvalidArgument,
                           "%s: %lu bytes at offset %zu run past the end of rank %d's window #%lu (%lu bytes)", fn,
                           (unsigned long)bytes, peerWinOffset, peer, (unsigned long)w->id, (unsigned long)room);
      if (w->devices[size_t(peer)] || (count && onDevice(localbuff)))
        return tempo::fail(Status::InvalidUsage, "%s: one-sided calls on device memory are not implemented yet", fn);
      a.send = localbuff;
      a.count = count;
      a.type = tempo::DataType(datatype);
      a.window = w;
      a.windowOffset = peerWinOffset;
    }
    return tempo::comm::submitCollective(c, a);
  }();
  if (!ok(s)) tempo::comm::groupRecordError(s);
  return s;
}

}  // namespace

NCCL_API(ncclResult_t, ncclPutSignal, const void* localbuff, size_t count, ncclDataType_t datatype, int peer,
         ncclWindow_t peerWin, size_t peerWinOffset, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
         hipStream_t stream) {
  int type;  // its bytes, not its value as the enum: an out-of-range one must be refused, not loaded
  static_assert(sizeof type == sizeof datatype);
  std::memcpy(&type, &datatype, sizeof type);
  return guarded([&] {
    if (!peerWin)  // a put names its window; only ncclSignal goes without one
      return tempo::fail(Status::InvalidArgument, "ncclPutSignal: peerWin is NULL");
    return putSignal(localbuff, count, type, peer, peerWin, peerWinOffset, sigIdx, ctx, flags, comm, stream,
                     "ncclPutSignal");
  });
}

NCCL_API(ncclResult_t, ncclSignal, int peer, int sigIdx, int ctx, unsigned int flags, ncclComm_t comm,
         hipStream_t stream) {
  return guarded([&] {
    return putSignal(nullptr, 0, int(ncclInt8), peer, nullptr, 0, sigIdx, ctx, flags, comm, stream, "ncclSignal");
  });
}

NCCL_API(ncclResult_t, ncclWaitSignal, int nDesc, ncclWaitSignalDesc_t* signalDescs, ncclComm_t comm,
         hipStream_t stream) {
  return guarded([&]() -> Status {
    Status s = [&]() -> Status {
      TEMPO_ASSIGN(tempo::comm::Pin c, tempo::api::liveComm(comm, "ncclWaitSignal"));
      if (nDesc < 0) return tempo::fail(Status::InvalidArgument, "ncclWaitSignal: nDesc %d is negative", nDesc);
      if (nDesc > 0 && !signalDescs)
        return tempo::fail(Status::InvalidArgument, "ncclWaitSignal: signalDescs is NULL with nDesc %d", nDesc);
      for (int i = 0; i < nDesc; ++i) {
        const ncclWaitSignalDesc_t& d = signalDescs[i];
        if (d.peer < 0 || d.peer >= c->nranks())
          return tempo::fail(Status::InvalidArgument, "ncclWaitSignal: signalDescs[%d].peer %d is outside [0, %d)", i,
                             d.peer, c->nranks());
        if (d.opCnt < 0)
          return tempo::fail(Status::InvalidArgument, "ncclWaitSignal: signalDescs[%d].opCnt %d is negative", i,
                             d.opCnt);
        if (d.sigIdx != 0 || d.ctx != 0)
          return tempo::fail(Status::InvalidArgument,
                             "ncclWaitSignal: signalDescs[%d]: sigIdx %d and ctx %d must be 0 (as in NCCL)", i,
                             d.sigIdx, d.ctx);
      }
      tempo::comm::CollArgs a;
      a.coll = tempo::engine::CollKind::WaitSignal;
      a.type = tempo::DataType::Int8;
      a.stream = stream;
      a.waits = reinterpret_cast<const tempo::comm::SignalWait*>(signalDescs);
      a.nWaits = nDesc;
      return tempo::comm::submitCollective(c, a);
    }();
    if (!ok(s)) tempo::comm::groupRecordError(s);
    return s;
  });
}
