// The implemented entry points: validate, convert, call comm/, map the Status.
#include "src/api/entry.h"

#include <algorithm>
#include <climits>
#include <functional>
#include <optional>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "src/api/checks.h"
#include "src/bootstrap/bootstrap.h"
#include "src/comm/group.h"
#include "src/comm/registry.h"
#include "src/core/log.h"
#include "src/mem/device_api.h"

using tempo::Status;
using tempo::fail;
using tempo::api::guarded;
using tempo::api::toNccl;
namespace comm = tempo::comm;

namespace tempo::api {

tempo::Result<comm::Pin> anyComm(const void* handle, const char* fn) {
  if (!handle) return fail(Status::InvalidArgument, "%s: comm is NULL", fn);
  comm::Pin c = comm::registry::find(handle);
  if (!c)
    return fail(Status::InvalidUsage, "%s: comm %p is not a live communicator (already destroyed, or never created)",
                fn, handle);
  return c;
}

tempo::Result<comm::Pin> liveComm(const void* handle, const char* fn) {
  TEMPO_ASSIGN(comm::Pin c, anyComm(handle, fn));
  if (c->asyncState() == Status::InProgress)
    return fail(Status::InvalidArgument,
                "%s: comm %p: attempt to use communicator before the previous operation returned ncclSuccess", fn,
                handle);
  return c;
}

}  // namespace tempo::api

namespace {

using tempo::api::anyComm;
using tempo::api::liveComm;

ncclComm_t handleOf(comm::Communicator* c) { return reinterpret_cast<ncclComm_t>(c); }

Status checkRanks(int nranks, int rank, const char* fn) {
  if (nranks <= 0) return fail(Status::InvalidArgument, "%s: nranks is %d; it must be at least 1", fn, nranks);
  if (rank < 0 || rank >= nranks)
    return fail(Status::InvalidArgument, "%s: rank %d is outside [0, %d)", fn, rank, nranks);
  return Status::Success;
}

// The device a communicator made on this thread uses: the thread's current one, as RCCL
// reads it with hipGetDevice at init (0 without a GPU runtime). Its worker and device
// work use it, and ncclCommCuDevice reports it.
int callerDevice() {
  tempo::mem::DeviceApi* gpu = tempo::mem::deviceApi();
  if (!gpu) return 0;
  auto d = gpu->currentDevice();
  return d.ok() ? *d : 0;
}

// Shared by ncclCommInitRank and ncclCommInitRankConfig.
Status initRank(ncclComm_t* out, int nranks, const ncclUniqueId& commId, int rank, const ncclConfig_t* config,
                const char* fn) {
  if (!out) return fail(Status::InvalidArgument, "%s: comm (the output pointer) is NULL", fn);
  TEMPO_TRY(checkRanks(nranks, rank, fn));
  TEMPO_ASSIGN(tempo::bootstrap::UniqueId id,
               tempo::bootstrap::decodeUniqueId(std::span<const uint8_t, tempo::bootstrap::kUniqueIdBytes>(
                   reinterpret_cast<const uint8_t*>(commId.internal), sizeof commId.internal)));
  TEMPO_ASSIGN(comm::Config cfg, comm::parseConfig(config));
  const int device = callerDevice();  // now: a group's inits run on threads of their own
  if (cfg.blocking) {
    return comm::submitInit([=]() -> Status {
      TEMPO_ASSIGN(std::unique_ptr<comm::Communicator> c, comm::Communicator::create(id, nranks, rank, cfg, device));
      *out = handleOf(comm::registry::add(std::move(c)));
      return Status::Success;
    });
  }
  // Nonblocking: the handle now, in progress; the join on the communicator's worker (at
  // ncclGroupEnd inside a group).
  comm::Communicator* c = comm::registry::add(comm::Communicator::pending(cfg, device));
  *out = handleOf(c);
  return comm::submitInit([=]() -> Status {
    c->runAsync([=] { return c->join(id, nranks, rank); });
    return Status::InProgress;
  });
}

// Keeps communicators whose abort timed out: their operation in flight still uses them.
void keepForever(comm::Pin c) {
  static auto* kept = new std::vector<comm::Pin>();  // never destroyed, like the registry
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  kept->push_back(std::move(c));
}


}  // namespace

NCCL_API(ncclResult_t, ncclGetVersion, int* version) {
  return guarded([&] {
    if (!version) return fail(Status::InvalidArgument, "ncclGetVersion: version is NULL");
    *version = NCCL_VERSION_CODE;
    return Status::Success;
  });
}

NCCL_API(ncclResult_t, ncclGetUniqueId, ncclUniqueId* uniqueId) {
  return guarded([&] {
    if (!uniqueId) return fail(Status::InvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
    ncclUniqueId id;
    TEMPO_TRY(tempo::bootstrap::createUniqueId(std::span<uint8_t, tempo::bootstrap::kUniqueIdBytes>(
        reinterpret_cast<uint8_t*>(id.internal), sizeof id.internal)));
    *uniqueId = id;
    return Status::Success;
  });
}

NCCL_API(ncclResult_t, ncclCommInitRank, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return guarded([&] { return initRank(comm, nranks, commId, rank, nullptr, "ncclCommInitRank"); });
}

NCCL_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
         ncclConfig_t* config) {
  return guarded([&] { return initRank(comm, nranks, commId, rank, config, "ncclCommInitRankConfig"); });
}

// NCCL spreads the rendezvous over nId roots (ids made by ranks k * nranks / nId) to
// bound the load on each. Every rank holds all nId ids, so rendezvousing through the first
// is equivalent; Tempo's root serves all ranks of a job from one event loop.
NCCL_API(ncclResult_t, ncclCommInitRankScalable, ncclComm_t* newcomm, int nranks, int myrank, int nId,
         ncclUniqueId* commIds, ncclConfig_t* config) {
  return guarded([&]() -> Status {
    if (nId < 1) return fail(Status::InvalidArgument, "ncclCommInitRankScalable: nId is %d; it must be at least 1", nId);
    if (!commIds) return fail(Status::InvalidArgument, "ncclCommInitRankScalable: commIds is NULL");
    return initRank(newcomm, nranks, commIds[0], myrank, config, "ncclCommInitRankScalable");
  });
}

NCCL_API(ncclResult_t, ncclMemAlloc, void** ptr, size_t size) {
  return guarded([&]() -> Status {
    if (!ptr) return fail(Status::InvalidArgument, "ncclMemAlloc: ptr is NULL");
    TEMPO_ASSIGN(*ptr, tempo::mem::allocUserMemory(size));
    return Status::Success;
  });
}

NCCL_API(ncclResult_t, ncclMemFree, void* ptr) {
  return guarded([&] { return tempo::mem::freeUserMemory(ptr); });
}

NCCL_API(ncclResult_t, ncclCommRegister, const ncclComm_t comm, void* buff, size_t size, void** handle) {
  return guarded([&]() -> Status {
    TEMPO_ASSIGN(comm::Pin c, liveComm(comm, "ncclCommRegister"));
    if (!handle) return fail(Status::InvalidArgument, "ncclCommRegister: handle is NULL");
    if (!buff || size == 0)
      return fail(Status::InvalidArgument, "ncclCommRegister: buffer %p of %zu bytes is empty", buff, size);
    TEMPO_ASSIGN(*handle, c->registerBuffer(buff, size));
    return Status::Success;
  });
}

NCCL_API(ncclResult_t, ncclCommDeregister, const ncclComm_t comm, void* handle) {
  return guarded([&]() -> Status {
    TEMPO_ASSIGN(comm::Pin c, liveComm(comm, "ncclCommDeregister"));
    return c->deregisterBuffer(handle);
  });
}

namespace {

// The child's configuration: a NULL config inherits the parent's, as in NCCL.
tempo::Result<comm::Config> childConfig(const comm::Communicator& parent, const ncclConfig_t* config) {
  if (!config) return parent.config();
  return comm::parseConfig(config);
}

// The second half of ncclCommSplit, ncclCommShrink and ncclCommGrow on a parent's rank:
// `exchange` (run on the parent: on the calling thread when both are blocking, else on
// the parent's worker holding its drive mutex) says which communicator to join
// (nranks 0: none, *newcomm NULL), and the child joins it. `hasChild` says before the
// exchange whether there will be one (a nonblocking call hands out its handle at once).
Status spawnChild(comm::Communicator* parent, const comm::Config& cfg, ncclComm_t* newcomm, bool hasChild,
                  const char* fn, std::function<tempo::Result<comm::Communicator::SplitTarget>()> exchange) {
  *newcomm = nullptr;
  if (cfg.blocking && parent->blocking()) {
    // Inside a group these run at ncclGroupEnd, concurrently, like inits (one thread may
    // split several ranks' communicators).
    return comm::submitInit([=]() -> Status {
      TEMPO_ASSIGN(comm::Communicator::SplitTarget t, exchange());
      if (t.nranks == 0) return Status::Success;
      TEMPO_ASSIGN(std::unique_ptr<comm::Communicator> made,
                   comm::Communicator::create(t.id, t.nranks, t.rank, cfg, parent->device()));
      *newcomm = handleOf(comm::registry::add(std::move(made)));
      return Status::Success;
    });
  }
  // Nonblocking (the parent, the child, or both): the child's handle now, in progress;
  // the exchange on the parent's worker (holding its drive mutex, so a blocking parent's
  // own calls wait for it), then the child's join on the child's worker.
  if (!parent->blocking() && !parent->beginAsync())
    return fail(Status::InvalidArgument,
                "%s: comm %p: attempt to use communicator before the previous operation returned ncclSuccess", fn,
                static_cast<void*>(parent));
  comm::Communicator* child = nullptr;
  if (hasChild) {
    child = comm::registry::add(comm::Communicator::pending(cfg, parent->device()));
    *newcomm = handleOf(child);
  }
  parent->postAsync([parent, child, exchange = std::move(exchange)] {
    tempo::Result<comm::Communicator::SplitTarget> t = [&] {
      std::lock_guard<std::timed_mutex> drive(parent->driveMutex());
      return exchange();
    }();
    // A failed exchange is the child's failure, not the parent's: it stays usable.
    if (!parent->blocking()) parent->endAsync(Status::Success);
    if (!child) return;
    if (!t.ok()) return child->endAsync(t.status());
    child->runAsync([child, t = *t] { return child->join(t.id, t.nranks, t.rank); });
  });
  return Status::InProgress;
}

tempo::Result<tempo::bootstrap::UniqueId> decodeId(const ncclUniqueId& id) {
  return tempo::bootstrap::decodeUniqueId(std::span<const uint8_t, tempo::bootstrap::kUniqueIdBytes>(
      reinterpret_cast<const uint8_t*>(id.internal), sizeof id.internal));
}

}  // namespace

NCCL_API(ncclResult_t, ncclCommSplit, ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
         ncclConfig_t* config) {
  return guarded([&]() -> Status {
    TEMPO_ASSIGN(comm::Pin c, liveComm(comm, "ncclCommSplit"));
    if (!newcomm) return fail(Status::InvalidArgument, "ncclCommSplit: newcomm is NULL");
    if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
      return fail(Status::InvalidArgument, "ncclCommSplit: color %d is negative and not NCCL_SPLIT_NOCOLOR", color);
    TEMPO_ASSIGN(comm::Config cfg, childConfig(*c, config));
    comm::Communicator* parent = c.get();
    return spawnChild(parent, cfg, newcomm, color != NCCL_SPLIT_NOCOLOR, "ncclCommSplit",
                      [parent, color, key] { return parent->splitExchange(color, key); });
  });
}

NCCL_API(ncclResult_t, ncclCommShrink, ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
         ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  return guarded([&]() -> Status {
    // With NCCL_SHRINK_ABORT the parent may still be inside a nonblocking operation that
    // will never finish: the abort ends it, so only the default mode requires it done.
    TEMPO_ASSIGN(comm::Pin c, shrinkFlags == NCCL_SHRINK_ABORT ? anyComm(comm, "ncclCommShrink")
                                                                : liveComm(comm, "ncclCommShrink"));
    if (!newcomm) return fail(Status::InvalidArgument, "ncclCommShrink: newcomm is NULL");
    if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT)
      return fail(Status::InvalidArgument, "ncclCommShrink: shrinkFlags %d is neither NCCL_SHRINK_DEFAULT nor NCCL_SHRINK_ABORT",
                  shrinkFlags);
    if (excludeRanksCount < 0 || (excludeRanksCount > 0 && !excludeRanksList))
      return fail(Status::InvalidArgument, "ncclCommShrink: %d excluded ranks in list %p", excludeRanksCount,
                  static_cast<void*>(excludeRanksList));
    std::vector<int> excluded(excludeRanksList, excludeRanksList + excludeRanksCount);
    std::sort(excluded.begin(), excluded.end());
    for (size_t i = 0; i < excluded.size(); ++i) {
      if (excluded[i] < 0 || excluded[i] >= c->nranks())
        return fail(Status::InvalidArgument, "ncclCommShrink: excluded rank %d is outside [0, %d)", excluded[i],
                    c->nranks());
      if (i && excluded[i] == excluded[i - 1])
        return fail(Status::InvalidArgument, "ncclCommShrink: rank %d is excluded twice", excluded[i]);
      if (excluded[i] == c->rank())
        return fail(Status::InvalidArgument,
                    "ncclCommShrink: rank %d excludes itself (excluded ranks do not call ncclCommShrink)", c->rank());
    }
    TEMPO_ASSIGN(comm::Config cfg, childConfig(*c, config));
    // NCCL_SHRINK_ABORT first stops what the parent has in flight (stuck, perhaps, on the
    // ranks being excluded); a revoked parent (NCCL's other recovery sequence) is already
    // stopped. Either way the exchange needs only the survivors.
    if (shrinkFlags == NCCL_SHRINK_ABORT && !c->revoked()) TEMPO_TRY(c->revoke());
    comm::Communicator* parent = c.get();
    return spawnChild(parent, cfg, newcomm, true, "ncclCommShrink",
                      [parent, excluded = std::move(excluded)] { return parent->shrinkExchange(excluded); });
  });
}

NCCL_API(ncclResult_t, ncclCommRevoke, ncclComm_t comm, int revokeFlags) {
  return guarded([&]() -> Status {
    TEMPO_ASSIGN(comm::Pin c, anyComm(comm, "ncclCommRevoke"));
    if (revokeFlags != NCCL_REVOKE_DEFAULT)
      return fail(Status::InvalidArgument, "ncclCommRevoke: revokeFlags %d is not NCCL_REVOKE_DEFAULT", revokeFlags);
    return c->revoke();
  });
}

NCCL_API(ncclResult_t, ncclCommGetUniqueId, ncclComm_t comm, ncclUniqueId* uniqueId) {
  return guarded([&]() -> Status {
    TEMPO_ASSIGN(comm::Pin c, liveComm(comm, "ncclCommGetUniqueId"));
    if (!uniqueId) return fail(Status::InvalidArgument, "ncclCommGetUniqueId: uniqueId is NULL");
    TEMPO_TRY(c->usable());
    return tempo::bootstrap::createUniqueId(std::span<uint8_t, tempo::bootstrap::kUniqueIdBytes>(
        reinterpret_cast<uint8_t*>(uniqueId->internal), sizeof uniqueId->internal));
  });
}

// Existing ranks pass their communicator and rank -1 (they keep their ranks; at least one
// of them passes the id ncclCommGetUniqueId made); new ranks pass NULL, the id and a rank.
NCCL_API(ncclResult_t, ncclCommGrow, ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank,
         ncclComm_t* newcomm, ncclConfig_t* config) {
  return guarded([&]() -> Status {
    if (!newcomm) return fail(Status::InvalidArgument, "ncclCommGrow: newcomm is NULL");
    if (!comm) {
      if (!uniqueId) return fail(Status::InvalidArgument, "ncclCommGrow: a new rank (comm NULL) needs the uniqueId");
      return initRank(newcomm, nRanks, *uniqueId, rank, config, "ncclCommGrow");
    }
    TEMPO_ASSIGN(comm::Pin c, liveComm(comm, "ncclCommGrow"));
    if (rank != -1)
      return fail(Status::InvalidArgument, "ncclCommGrow: rank is %d; a rank of an existing communicator passes -1",
                  rank);
    if (nRanks <= c->nranks())
      return fail(Status::InvalidArgument, "ncclCommGrow: nRanks %d does not exceed the communicator's %d ranks", nRanks,
                  c->nranks());
    TEMPO_TRY(c->usable());
    std::optional<tempo::bootstrap::UniqueId> id;
    if (uniqueId) {
      TEMPO_ASSIGN(id, decodeId(*uniqueId));
    }
    TEMPO_ASSIGN(comm::Config cfg, childConfig(*c, config));
    comm::Communicator* parent = c.get();
    return spawnChild(parent, cfg, newcomm, true, "ncclCommGrow",
                      [parent, nRanks, id] { return parent->growExchange(nRanks, id ? &*id : nullptr); });
  });
}

NCCL_API(ncclResult_t, ncclCommSuspend, ncclComm_t comm, int flags) {
  return guarded([&]() -> Status {
    TEMPO_ASSIGN(comm::Pin c, liveComm(comm, "ncclCommSuspend"));
    if (flags & ~NCCL_SUSPEND_MEM)
      return fail(Status::InvalidArgument, "ncclCommSuspend: unknown flags 0x%x", unsigned(flags));
    std::lock_guard<std::timed_mutex> drive(c->driveMutex());  // after the operation in flight
    return c->suspend();
  });
}

NCCL_API(ncclResult_t, ncclCommResume, ncclComm_t comm) {
  return guarded([&]() -> Status {
    TEMPO_ASSIGN(comm::Pin c, liveComm(comm, "ncclCommResume"));
    return c->resume();
  });
}

// Tempo allocates no device memory yet (host buffers only), so every device-memory figure
// is zero; ncclStatGpuMemSuspended says whether the communicator is suspended.
NCCL_API(ncclResult_t, ncclCommMemStats, ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value) {
  return guarded([&]() -> Status {
    TEMPO_ASSIGN(comm::Pin c, liveComm(comm, "ncclCommMemStats"));
    if (!value) return fail(Status::InvalidArgument, "ncclCommMemStats: value is NULL");
    switch (stat) {
      case ncclStatGpuMemSuspend:
      case ncclStatGpuMemPersist:
      case ncclStatGpuMemTotal: *value = 0; return Status::Success;
      case ncclStatGpuMemSuspended: *value = c->suspended() ? 1 : 0; return Status::Success;
    }
    return fail(Status::InvalidArgument, "ncclCommMemStats: unknown stat %d", int(stat));
  });
}

NCCL_API(ncclResult_t, ncclCommInitAll, ncclComm_t* comms, int ndev, const int* devlist) {
  return guarded([&]() -> Status {
    if (!comms) return fail(Status::InvalidArgument, "ncclCommInitAll: comms is NULL");
    if (ndev < 1) return fail(Status::InvalidArgument, "ncclCommInitAll: ndev is %d; it must be at least 1", ndev);
    // Rank i on devlist[i], or without a list on device i; Tempo lets ranks share a GPU, so
    // ranks beyond the devices the runtime has share them round robin (NCCL would fail).
    int devices = INT_MAX;
    if (tempo::mem::DeviceApi* gpu = tempo::mem::deviceApi()) {
      TEMPO_ASSIGN(devices, tempo::mem::deviceCall(*gpu, gpu->deviceCount()));
    }
    for (int i = 0; devlist && i < ndev; ++i)
      if (devlist[i] < 0 || devlist[i] >= devices)
        return fail(Status::InvalidArgument, "ncclCommInitAll: devlist[%d] is %d, not a device (there are %d)", i,
                    devlist[i], devices);
    uint8_t raw[tempo::bootstrap::kUniqueIdBytes];
    TEMPO_TRY(tempo::bootstrap::createUniqueId(raw));
    TEMPO_ASSIGN(tempo::bootstrap::UniqueId id, tempo::bootstrap::decodeUniqueId(raw));
    TEMPO_ASSIGN(comm::Config cfg, comm::parseConfig(nullptr));
    // One thread per rank, as the ranks rendezvous with each other.
    std::vector<std::unique_ptr<comm::Communicator>> made(static_cast<size_t>(ndev));
    std::vector<Status> status(size_t(ndev), Status::Success);
    std::vector<std::string> why(static_cast<size_t>(ndev));
    std::vector<std::thread> threads;
    for (int i = 0; i < ndev; ++i) {
      threads.emplace_back([&, i] {
        auto r = comm::Communicator::create(id, ndev, i, cfg, devlist ? devlist[i] : i % devices);
        status[size_t(i)] = r.status();
        if (r.ok()) made[size_t(i)] = std::move(r).value();
        else why[size_t(i)] = tempo::lastErrorMessage();
      });
    }
    for (auto& t : threads) t.join();
    for (int i = 0; i < ndev; ++i) {
      if (!ok(status[size_t(i)])) {
        tempo::setLastErrorMessage(why[size_t(i)].c_str());
        return status[size_t(i)];  // `made` frees the ranks that did initialise
      }
    }
    for (int i = 0; i < ndev; ++i) comms[i] = handleOf(comm::registry::add(std::move(made[size_t(i)])));
    return Status::Success;
  });
}

NCCL_API(ncclResult_t, ncclCommFinalize, ncclComm_t comm) {
  return guarded([&]() -> Status {
    TEMPO_ASSIGN(comm::Pin c, liveComm(comm, "ncclCommFinalize"));
    if (c->finalized()) return fail(Status::InvalidUsage, "ncclCommFinalize: comm %p is already finalized", comm);
    if (c->revoked())
      return fail(Status::InvalidUsage, "ncclCommFinalize: comm %p was revoked; destroy or abort it instead", comm);
    comm::Communicator* raw = c.get();
    auto finalize = [raw] {
      std::lock_guard<std::timed_mutex> drive(raw->driveMutex());
      return raw->finalize();
    };
    if (raw->blocking()) {
      raw->waitStreamWork();  // the stream-ordered calls before it are part of what it completes
      return finalize();
    }
    if (!raw->beginAsync())
      return fail(Status::InvalidArgument, "ncclCommFinalize: comm %p: a previous operation is still in progress", comm);
    raw->runAsync(finalize);
    return Status::InProgress;
  });
}

NCCL_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm) {
  return guarded([&]() -> Status {
    if (!comm) return Status::Success;  // as NCCL
    TEMPO_ASSIGN(comm::Pin c, anyComm(comm, "ncclCommDestroy"));
    // Destroy completes what was started: a nonblocking operation in flight, then
    // finalize if the application did not call it. Resources are released whatever state
    // the communicator was in.
    c->waitAsync();
    c->waitStreamWork();
    {
      std::lock_guard<std::timed_mutex> drive(c->driveMutex());
      if (!c->finalized()) (void)c->finalize();
    }
    comm::registry::remove(comm);
    TEMPO_INFO(tempo::log::Init | tempo::log::Destroy, "comm %p rank %d nranks %d - Destroy COMPLETE",
               static_cast<void*>(comm), c->rank(), c->nranks());
    return Status::Success;
  });
}

NCCL_API(ncclResult_t, ncclCommAbort, ncclComm_t comm) {
  return guarded([&]() -> Status {
    if (!comm) return Status::Success;  // as NCCL
    comm::Pin owned = comm::registry::remove(comm);
    if (!owned)
      return fail(Status::InvalidUsage, "ncclCommAbort: comm %p is not a live communicator", static_cast<void*>(comm));
    if (!owned->abort()) keepForever(std::move(owned));
    TEMPO_INFO(tempo::log::Init | tempo::log::Destroy, "comm %p - Abort COMPLETE", static_cast<void*>(comm));
    return Status::Success;
  });
}

NCCL_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int* count) {
  return guarded([&]() -> Status {
    TEMPO_ASSIGN(comm::Pin c, liveComm(comm, "ncclCommCount"));
    if (!count) return fail(Status::InvalidArgument, "ncclCommCount: count is NULL");
    *count = c->nranks();
    return Status::Success;
  });
}

NCCL_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int* rank) {
  return guarded([&]() -> Status {
    TEMPO_ASSIGN(comm::Pin c, liveComm(comm, "ncclCommUserRank"));
    if (!rank) return fail(Status::InvalidArgument, "ncclCommUserRank: rank is NULL");
    *rank = c->rank();
    return Status::Success;
  });
}

NCCL_API(ncclResult_t, ncclCommCuDevice, const ncclComm_t comm, int* device) {
  return guarded([&]() -> Status {
    TEMPO_ASSIGN(comm::Pin c, liveComm(comm, "ncclCommCuDevice"));
    if (!device) return fail(Status::InvalidArgument, "ncclCommCuDevice: device is NULL");
    *device = c->device();
    return Status::Success;
  });
}

NCCL_API(const char*, ncclGetErrorString, ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the Tempo developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    case ncclTimeout: return "operation timed out";
    default: return "unknown result code";
  }
}

NCCL_API(const char*, ncclGetLastError, ncclComm_t comm) {
  // A communicator's own failure (possibly seen by another thread) takes precedence.
  thread_local std::string msg;
  if (comm) {
    if (comm::Pin c = comm::registry::find(comm); c && !ok(c->asyncError())) {
      msg = c->errorMessage();
      return msg.c_str();
    }
  }
  return tempo::lastErrorMessage();
}

NCCL_API(void, ncclResetDebugInit) { tempo::log::reinit(); }

NCCL_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t* asyncError) {
  return guarded([&]() -> Status {
    TEMPO_ASSIGN(comm::Pin c, anyComm(comm, "ncclCommGetAsyncError"));
    if (!asyncError) return fail(Status::InvalidArgument, "ncclCommGetAsyncError: asyncError is NULL");
    // A failure elsewhere in the job (a peer gone, a mismatch a neighbour reported) becomes
    // this communicator's error too, without waiting for its next call. (Not while a
    // nonblocking init may still be building what check() reads.)
    if (c->asyncState() == Status::Success) c->recordError(c->check(/*closedIsFatal=*/false));
    *asyncError = toNccl(c->asyncState());
    return Status::Success;
  });
}

NCCL_API(ncclResult_t, ncclGroupStart) {
  return guarded([] { return comm::groupStart(); });
}

NCCL_API(ncclResult_t, ncclGroupEnd) {
  return guarded([] { return comm::groupEnd(); });
}

// NCCL's reading of simInfo: its first `size` bytes (at most ncclSimInfo_t's), the magic
// checked, and estimatedTime written back only within those bytes and only when the group
// held a call. A NULL simInfo ends the group as ncclGroupEnd does (as in NCCL).
NCCL_API(ncclResult_t, ncclGroupSimulateEnd, ncclSimInfo_t* simInfo) {
  return guarded([&]() -> Status {
    if (!simInfo) return comm::groupEnd();
    static const ncclSimInfo_t kInitialised = NCCL_SIM_INFO_INITIALIZER;
    ncclSimInfo_t info = kInitialised;
    info.magic = 0;  // a size too small to hold the magic is no initialised struct
    size_t size = 0;
    std::memcpy(&size, simInfo, sizeof size);
    size = std::min(size, sizeof info);
    std::memcpy(&info, simInfo, size);
    comm::Simulation sim;
    sim.valid = info.magic == kInitialised.magic;
    TEMPO_TRY(comm::groupSimulateEnd(sim));
    if (sim.us) {
      info.estimatedTime = float(*sim.us);
      std::memcpy(simInfo, &info, size);
    }
    return Status::Success;
  });
}

