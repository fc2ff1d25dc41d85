#include "src/comm/group.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "src/core/log.h"

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
    if (!ok(first = submit(it.comm.get(), it.comm->prepare(it.args)))) break;
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

Status lockedDrive(std::span<const Item> items, std::span<Communicator* const> comms) {
  for (Communicator* c : comms) c->driveMutex().lock();
  Status s = driveBatch(items);
  for (Communicator* c : comms) c->driveMutex().unlock();
  return s;
}

// A nonblocking batch, owning what the caller's arrays held at call time.
struct AsyncBatch {
  std::vector<Item> items;
  std::vector<Communicator*> comms;
  std::vector<std::unique_ptr<size_t[]>> arrays;  // AllToAllv counts and displacements
};

Status postBatch(std::span<const Item> items, std::span<Communicator* const> comms) {
  for (size_t i = 0; i < comms.size(); ++i) {
    if (!comms[i]->beginAsync()) {
      for (size_t j = 0; j < i; ++j) comms[j]->endAsync(Status::Success);
      return fail(Status::InvalidArgument,
                  "comm %p: attempt to use communicator before the previous operation returned ncclSuccess",
                  static_cast<void*>(comms[i]));
    }
  }
  auto batch = std::make_shared<AsyncBatch>();
  batch->comms.assign(comms.begin(), comms.end());
  batch->items.assign(items.begin(), items.end());
  for (Item& it : batch->items) {
    if (it.args.coll != engine::CollKind::AllToAllv) continue;
    const size_t n = size_t(it.comm->nranks());
    for (const size_t** field : {&it.args.sendCounts, &it.args.sendDispls, &it.args.recvCounts, &it.args.recvDispls}) {
      batch->arrays.emplace_back(new size_t[n]);
      std::copy(*field, *field + n, batch->arrays.back().get());
      *field = batch->arrays.back().get();
    }
  }
  // Items hold pins, so the job's communicators outlive it; destroy and abort wait for it.
  comms[0]->postAsync([batch] {
    Status s = lockedDrive(batch->items, batch->comms);
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

Status groupEnd() {
  GroupState& g = t_group;
  if (g.depth == 0) return fail(Status::InvalidUsage, "ncclGroupEnd called without a matching ncclGroupStart");
  if (--g.depth > 0) return Status::Success;
  std::vector<std::function<Status()>> inits;
  inits.swap(g.inits);
  Status err = g.error;
  g.error = Status::Success;
  if (!ok(err)) {
    g.colls.clear();
    return fail(err, "ncclGroupEnd: the group was abandoned because a call inside it failed");
  }
  const Status initStatus = inits.empty() ? Status::Success : runInits(inits);
  if (!ok(initStatus) && initStatus != Status::InProgress) {
    g.colls.clear();
    return initStatus;
  }
  if (g.colls.empty()) return initStatus;
  Status s = runBatch(g.colls);
  g.colls.clear();  // keeps the capacity for the next group
  return ok(s) ? initStatus : s;
}

Status submitCollective(const Pin& c, const CollArgs& a) {
  if (inGroup()) {
    t_group.colls.push_back({c, a});
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
