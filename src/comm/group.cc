#include "src/comm/group.h"

#include <algorithm>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "src/comm/device_staging.h"
#include "src/core/log.h"
#include "src/mem/device_api.h"

namespace tempo::comm {
namespace {

struct Item {
  Pin comm;
  CollArgs args;
};

struct GroupState {
  int depth = 0;
  Status error = Status::Success;
  std::vector<Item> colls;
  std::vector<std::function<Status()>> inits;
  // Reused across batches so that steady-state collectives do not allocate.
  std::vector<engine::Op*> ops;
  std::vector<Communicator*> opComms;
  std::vector<engine::Engine*> engines;
  std::vector<CollArgs> p2p;
  std::vector<Communicator*> unique;  // the batch's communicators, each once, by address
  // WaitSignal descriptors copied when the call is queued (NCCL reads them at the call;
  // the caller's array may be gone by ncclGroupEnd). A deque: copies never move.
  std::deque<std::vector<SignalWait>> waitCopies;
};
thread_local GroupState t_group;

// Prepares, submits and drives a batch to completion. Returns the first failure.
//
// Collectives are submitted in call order. The point-to-point calls of the batch become
// one op per communicator, submitted after that communicator's collectives, so that
// every rank orders its ops alike whatever order its sends, receives and collectives
// were called in (NCCL lets a group's point-to-point calls progress together).
Status driveBatch(std::span<const Item> items) {
  auto& ops = t_group.ops;
  auto& opComms = t_group.opComms;
  auto& engines = t_group.engines;
  auto& p2p = t_group.p2p;
  ops.clear();
  opComms.clear();
  engines.clear();
  Status first = Status::Success;
  auto submit = [&](Communicator* c, Result<engine::Op*> op) {
    if (!op.ok()) return op.status();
    ops.push_back(*op);
    opComms.push_back(c);
    TEMPO_TRY(c->engine().submit(**op));
    if (std::find(engines.begin(), engines.end(), &c->engine()) == engines.end()) engines.push_back(&c->engine());
    return Status::Success;
  };
  for (const Item& it : items) {
    if (!ok(first = it.comm->usable())) break;
    if (it.args.p2p != P2p::None) continue;
    const bool rma = it.args.coll == engine::CollKind::PutSignal || it.args.coll == engine::CollKind::WaitSignal;
    if (!ok(first = submit(it.comm.get(), rma ? it.comm->prepareRma(it.args) : it.comm->prepare(it.args)))) break;
  }
  for (size_t i = 0; ok(first) && i < items.size(); ++i) {
    Communicator* c = items[i].comm.get();
    if (items[i].args.p2p == P2p::None) continue;
    bool seen = false;  // this communicator's calls were gathered at its first one
    for (size_t j = 0; j < i && !seen; ++j) seen = items[j].comm.get() == c && items[j].args.p2p != P2p::None;
    if (seen) continue;
    p2p.clear();
    for (size_t j = i; j < items.size(); ++j)
      if (items[j].comm.get() == c && items[j].args.p2p != P2p::None) p2p.push_back(items[j].args);
    first = submit(c, c->prepareP2p(p2p));
  }
  Status w = engine::waitAll(engines);
  if (ok(first)) first = w;
  for (size_t i = 0; i < ops.size(); ++i) {
    Communicator* c = opComms[i];
    if (!ok(ops[i]->status)) {
      Status st;
      if (c->aborting() || c->revoked()) {
        // abort() and revoke() tell the peers once this thread has left.
        st = fail(Status::InvalidUsage, "comm %p rank %d was %s during a collective", static_cast<void*>(c), c->rank(),
                  c->aborting() ? "aborted (ncclCommAbort)" : "revoked (ncclCommRevoke)");
      } else {
        st = c->explainFailure(ops[i]->status, ops[i]->causeKnown);
        c->recordError(st);
      }
      if (ok(first) || first == ops[i]->status) first = st;
    }
    c->release(ops[i]);
  }
  return first;
}

// The batch's communicators, each once, in address order (the order their drive
// mutexes are taken in, so that batches sharing communicators cannot deadlock).
std::vector<Communicator*>& uniqueComms(std::span<const Item> items) {
  auto& u = t_group.unique;
  u.clear();
  for (const Item& it : items) u.push_back(it.comm.get());
  std::sort(u.begin(), u.end());
  u.erase(std::unique(u.begin(), u.end()), u.end());
  return u;
}

// Notes every item's device ranges (call time).
Status planAll(DeviceStaging& staging, std::span<const Item> items) {
  for (const Item& it : items) TEMPO_TRY(staging.plan(*it.comm, it.args));
  return Status::Success;
}

Status lockedDrive(std::span<const Item> items, std::span<Communicator* const> comms) {
  for (Communicator* c : comms) c->driveMutex().lock();
  Status s = driveBatch(items);
  for (Communicator* c : comms) c->driveMutex().unlock();
  return s;
}

// On the worker of comms[0], once the items' streams have reached them. Where the batch
// allows it, runs it on the device buffers themselves, each plan lowered for them
// (algo/device_lowering.h: chunks staged through pinned slots, reductions on the device);
// otherwise copies the device ranges into comms[0]'s staging arena, runs the batch on the
// copies and copies the results back (src/comm/device_staging.h).
Status runStaged(DeviceStaging& staging, std::vector<Item>& items, std::span<Communicator* const> comms) {
  if (staging.lowerable()) {
    for (size_t i = 0; i < items.size(); ++i) staging.lower(i, items[i].args);
    return lockedDrive(items, comms);
  }
  mem::StagingArena& arena = comms[0]->stagingArena(staging.gpu());
  TEMPO_TRY(staging.copyIn(arena));
  for (size_t i = 0; i < items.size(); ++i) staging.bind(i, items[i].args);
  TEMPO_TRY(lockedDrive(items, comms));
  return staging.copyOut(arena);
}

// A batch of nonblocking communicators, on the worker of comms[0]. In a process with a
// GPU runtime, device buffers are staged after the calls' streams are synchronised
// (blocking form).
Status driveOnWorker(std::span<const Item> items, std::span<Communicator* const> comms) {
  mem::DeviceApi* gpu = mem::deviceApi();
  if (!gpu) return lockedDrive(items, comms);
  DeviceStaging staging(*gpu);
  TEMPO_TRY(planAll(staging, items));
  if (staging.empty()) return lockedDrive(items, comms);
  TEMPO_TRY(staging.waitStreams());
  std::vector<Item> staged(items.begin(), items.end());  // bind() points these at the copies
  return runStaged(staging, staged, comms);
}

// A batch run later on a worker, owning what the caller's arrays held at call time.
struct AsyncBatch {
  std::vector<Item> items;
  std::vector<Communicator*> comms;
  std::vector<std::unique_ptr<size_t[]>> arrays;  // AllToAllv counts and displacements
  std::vector<std::unique_ptr<SignalWait[]>> waits;  // WaitSignal descriptors
};

std::shared_ptr<AsyncBatch> copyBatch(std::span<const Item> items, std::span<Communicator* const> comms) {
  auto batch = std::make_shared<AsyncBatch>();
  batch->comms.assign(comms.begin(), comms.end());
  batch->items.assign(items.begin(), items.end());
  for (Item& it : batch->items) {
    if (it.args.coll == engine::CollKind::WaitSignal && it.args.nWaits > 0) {
      auto* copy = new SignalWait[size_t(it.args.nWaits)];
      std::copy(it.args.waits, it.args.waits + it.args.nWaits, copy);
      batch->waits.emplace_back(copy);
      it.args.waits = copy;
    }
    if (it.args.coll != engine::CollKind::AllToAllv) continue;
    const size_t n = size_t(it.comm->nranks());
    for (const size_t** field : {&it.args.sendCounts, &it.args.sendDispls, &it.args.recvCounts, &it.args.recvDispls}) {
      batch->arrays.emplace_back(new size_t[n]);
      std::copy(*field, *field + n, batch->arrays.back().get());
      *field = batch->arrays.back().get();
    }
  }
  return batch;
}

// Stream-ordered batches posted and not yet run: the streams they hold (each behind a host
// function that waits for the batch) and the ranks they hold of which communicators.
struct PendingBatch {
  const void* id;
  std::vector<void*> streams;
  std::vector<std::pair<uint64_t, int>> ranks;  // (commHash, rank)
};
std::mutex g_pendingMu;
std::vector<PendingBatch> g_pending;

// A new batch behind a pending one on a stream deadlocks when the pending one needs a rank
// that only the new one brings: two ranks of one communicator queued on one stream from
// different calls (threads sharing a stream), which must be one group or use two streams.
Status checkNotBehindItsPeers(const PendingBatch& next) {
  std::lock_guard<std::mutex> lock(g_pendingMu);
  for (const PendingBatch& p : g_pending) {
    const bool shares = std::any_of(p.streams.begin(), p.streams.end(), [&](void* s) {
      return std::find(next.streams.begin(), next.streams.end(), s) != next.streams.end();
    });
    if (!shares) continue;
    for (auto [hash, rank] : next.ranks) {
      const bool sameComm = std::any_of(p.ranks.begin(), p.ranks.end(), [&](auto x) { return x.first == hash; });
      const bool sameRank = std::find(p.ranks.begin(), p.ranks.end(), std::pair(hash, rank)) != p.ranks.end();
      if (sameComm && !sameRank)
        return fail(Status::InvalidUsage,
                    "rank %d of communicator %016lx was called on a stream that holds another rank's earlier call of "
                    "the same communicator, which waits for it: ranks sharing a stream must be called in one group "
                    "(ncclGroupStart/ncclGroupEnd) or use different streams",
                    rank, (unsigned long)hash);
    }
  }
  return Status::Success;
}

// A batch of blocking communicators in a process with a GPU runtime. Calls on host buffers
// only run now, as without one (after any stream-ordered work still pending on their
// communicators). A batch with device buffers is stream-ordered: an event and a host
// function that waits for the batch are queued on the calls' streams now, the calls return
// at once, and the batch runs on the first communicator's worker when the streams reach
// it (src/comm/device_staging.h).
Status runStreamOrdered(mem::DeviceApi& gpu, std::span<const Item> items, std::span<Communicator* const> comms) {
  auto staging = std::make_shared<DeviceStaging>(gpu);
  Status s = planAll(*staging, items);
  if (ok(s) && staging->empty()) {
    for (Communicator* c : comms) c->waitStreamWork();
    return lockedDrive(items, comms);
  }
  auto batch = copyBatch(items, comms);
  PendingBatch pending{batch.get(), staging->streams(), {}};
  for (const Item& it : batch->items) pending.ranks.emplace_back(it.comm->commHash(), it.comm->rank());
  if (ok(s) && !ok(s = checkNotBehindItsPeers(pending))) {
    // The earlier call waits for these ranks: fail the communicators, so that it ends too.
    for (Communicator* c : comms) c->recordError(s);
  }
  if (ok(s)) s = staging->recordInputs();
  if (ok(s)) s = DeviceStaging::queueCompletion(staging);
  if (!ok(s)) {
    DeviceStaging::abandon(staging);  // nothing runs
    return s;
  }
  // The worker of comms[0] runs its jobs in order; the other communicators' earlier
  // stream-ordered work must be done first, or this batch could overtake it there.
  for (size_t i = 1; i < comms.size(); ++i) comms[i]->waitStreamWork();
  for (Communicator* c : comms) c->beginStreamWork();
  {
    std::lock_guard<std::mutex> lock(g_pendingMu);
    g_pending.push_back(std::move(pending));
  }
  comms[0]->postAsync([batch, staging] {
    auto cancelled = [&] {
      for (Communicator* c : batch->comms)
        if (c->aborting() || c->revoked()) return true;
      return false;
    };
    Status st = staging->pollInputs(cancelled);
    staging->releaseEvents();
    if (ok(st)) st = runStaged(*staging, batch->items, batch->comms);
    // The call has returned long ago: its failure is the communicators' async error.
    if (!ok(st))
      for (Communicator* c : batch->comms) c->recordError(st);
    {
      std::lock_guard<std::mutex> lock(g_pendingMu);
      std::erase_if(g_pending, [&](const PendingBatch& p) { return p.id == batch.get(); });
    }
    staging->complete();
    std::vector<Communicator*> done = std::move(batch->comms);
    batch->items.clear();  // drop the pins before announcing completion
    for (Communicator* c : done) c->endStreamWork();
  });
  return Status::Success;
}

Status postBatch(std::span<const Item> items, std::span<Communicator* const> comms) {
  for (size_t i = 0; i < comms.size(); ++i) {
    if (!comms[i]->beginAsync()) {
      for (size_t j = 0; j < i; ++j) comms[j]->endAsync(Status::Success);
      return fail(Status::InvalidArgument,
                  "comm %p: attempt to use communicator before the previous operation returned ncclSuccess",
                  static_cast<void*>(comms[i]));
    }
  }
  auto batch = copyBatch(items, comms);
  // Items hold pins, so the job's communicators outlive it; destroy and abort wait for it.
  comms[0]->postAsync([batch] {
    Status s = driveOnWorker(batch->items, batch->comms);
    std::vector<Communicator*> comms = std::move(batch->comms);
    batch->items.clear();  // drop the pins before announcing completion
    for (Communicator* c : comms) c->endAsync(s);
  });
  return Status::InProgress;
}

// Runs a batch: now, on this thread, for blocking communicators; on the worker of the
// first communicator, for nonblocking ones.
Status runBatch(std::span<const Item> items) {
  auto& comms = uniqueComms(items);
  for (Communicator* c : comms)
    if (c->blocking() != comms[0]->blocking())
      return fail(Status::InvalidArgument, "Blocking and nonblocking communicators are not allowed in the same group");
  if (!comms[0]->blocking()) return postBatch(items, comms);
  if (mem::DeviceApi* gpu = mem::deviceApi()) return runStreamOrdered(*gpu, items, comms);
  return lockedDrive(items, comms);
}

Status runInits(std::vector<std::function<Status()>>& inits) {
  if (inits.size() == 1) return inits[0]();
  std::vector<Status> results(inits.size(), Status::Success);
  std::vector<std::thread> threads;
  threads.reserve(inits.size());
  for (size_t i = 0; i < inits.size(); ++i) threads.emplace_back([&, i] { results[i] = inits[i](); });
  for (auto& t : threads) t.join();
  // A nonblocking init posted to its worker answers InProgress; a real failure wins.
  Status worst = Status::Success;
  for (Status s : results) {
    if (s == Status::InProgress) worst = ok(worst) ? s : worst;
    else if (!ok(s)) return s;
  }
  return worst;
}

}  // namespace

bool inGroup() { return t_group.depth > 0; }

Status groupStart() {
  ++t_group.depth;
  return Status::Success;
}

void groupRecordError(Status s) {
  if (inGroup() && ok(t_group.error)) t_group.error = s;
}

namespace {

// The model's time for a batch (see Simulation).
double predictBatchUs(std::span<const Item> items) {
  double longest = 0;
  for (Communicator* c : uniqueComms(items)) {
    double us = 0;
    auto& p2p = t_group.p2p;
    p2p.clear();
    for (const Item& it : items) {
      if (it.comm.get() != c) continue;
      if (it.args.p2p == P2p::None) us += c->predictUs(it.args);
      else p2p.push_back(it.args);
    }
    us += c->predictP2pUs(p2p);
    longest = std::max(longest, us);
  }
  return longest;
}

// Forgets the group's calls (keeping the capacity for the next group).
void dropCalls(GroupState& g) {
  g.colls.clear();
  g.waitCopies.clear();
}

// The outermost ncclGroupEnd (sim null) or ncclGroupSimulateEnd.
Status endGroup(Simulation* sim) {
  GroupState& g = t_group;
  if (g.depth == 0)
    return fail(Status::InvalidUsage, "%s called without a matching ncclGroupStart",
                sim ? "ncclGroupSimulateEnd" : "ncclGroupEnd");
  if (--g.depth > 0) return Status::Success;
  std::vector<std::function<Status()>> inits;
  inits.swap(g.inits);
  Status err = g.error;
  g.error = Status::Success;
  if (!ok(err)) {
    dropCalls(g);
    return fail(err, "ncclGroupEnd: the group was abandoned because a call inside it failed");
  }
  if (sim && !sim->valid) {
    dropCalls(g);
    return fail(Status::InvalidArgument,
                "ncclGroupSimulateEnd: simInfo was not initialised with NCCL_SIM_INFO_INITIALIZER (wrong magic or "
                "size); the group was abandoned");
  }
  const Status initStatus = inits.empty() ? Status::Success : runInits(inits);
  if (!ok(initStatus) && initStatus != Status::InProgress) {
    dropCalls(g);
    return initStatus;
  }
  if (g.colls.empty()) return initStatus;
  Status s = Status::Success;
  if (!sim) s = runBatch(g.colls);
  else if (initStatus != Status::InProgress) sim->us = predictBatchUs(g.colls);
  dropCalls(g);
  return ok(s) ? initStatus : s;
}

}  // namespace

Status groupEnd() { return endGroup(nullptr); }

Status groupSimulateEnd(Simulation& sim) { return endGroup(&sim); }

Status submitCollective(const Pin& c, const CollArgs& a) {
  if (inGroup()) {
    t_group.colls.push_back({c, a});
    if (a.coll == engine::CollKind::WaitSignal && a.nWaits > 0) {
      t_group.waitCopies.emplace_back(a.waits, a.waits + a.nWaits);
      t_group.colls.back().args.waits = t_group.waitCopies.back().data();
    }
    return Status::Success;
  }
  Item one{c, a};
  return runBatch(std::span(&one, 1));
}

Status submitInit(std::function<Status()> init) {
  if (inGroup()) {
    t_group.inits.push_back(std::move(init));
    return Status::Success;
  }
  return init();
}

}  // namespace tempo::comm
