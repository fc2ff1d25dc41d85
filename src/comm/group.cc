#include "src/comm/group.h"

#include <algorithm>
#include <thread>
#include <vector>

#include "src/core/log.h"

namespace tempo::comm {
namespace {

struct Item {
  Communicator* comm;
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
};
thread_local GroupState t_group;

// Prepares, submits and drives a batch to completion. Returns the first failure.
//
// Collectives are submitted in call order. The point-to-point calls of the batch become
// one op per communicator, submitted after that communicator's collectives, so that
// every rank orders its ops alike whatever order its sends, receives and collectives
// were called in (NCCL lets a group's point-to-point calls progress together).
Status runBatch(std::span<const Item> items) {
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
    Status s = it.comm->asyncError();
    if (!ok(s)) {
      first = fail(s, "communicator %p rank %d is unusable after an earlier error: %s",
                   static_cast<void*>(it.comm), it.comm->rank(), it.comm->errorMessage().c_str());
      break;
    }
    if (it.args.p2p != P2p::None) continue;
    if (!ok(first = submit(it.comm, it.comm->prepare(it.args)))) break;
  }
  for (size_t i = 0; ok(first) && i < items.size(); ++i) {
    Communicator* c = items[i].comm;
    if (items[i].args.p2p == P2p::None) continue;
    bool seen = false;  // this communicator's calls were gathered at its first one
    for (size_t j = 0; j < i && !seen; ++j) seen = items[j].comm == c && items[j].args.p2p != P2p::None;
    if (seen) continue;
    p2p.clear();
    for (size_t j = i; j < items.size(); ++j)
      if (items[j].comm == c && items[j].args.p2p != P2p::None) p2p.push_back(items[j].args);
    first = submit(c, c->prepareP2p(p2p));
  }
  Status w = engine::waitAll(engines);
  if (ok(first)) first = w;
  for (size_t i = 0; i < ops.size(); ++i) {
    Communicator* c = opComms[i];
    if (!ok(ops[i]->status)) {
      const Status st = c->explainFailure(ops[i]->status, ops[i]->mismatch);
      c->recordError(st);
      if (ok(first) || first == ops[i]->status) first = st;
    }
    c->release(ops[i]);
  }
  return first;
}

Status runInits(std::vector<std::function<Status()>>& inits) {
  if (inits.size() == 1) return inits[0]();
  std::vector<Status> results(inits.size(), Status::Success);
  std::vector<std::thread> threads;
  threads.reserve(inits.size());
  for (size_t i = 0; i < inits.size(); ++i) threads.emplace_back([&, i] { results[i] = inits[i](); });
  for (auto& t : threads) t.join();
  for (Status s : results)
    if (!ok(s)) return s;
  return Status::Success;
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
  Status s = inits.empty() ? Status::Success : runInits(inits);
  if (!ok(s)) {
    g.colls.clear();
    return s;
  }
  if (g.colls.empty()) return Status::Success;
  s = runBatch(g.colls);
  g.colls.clear();  // keeps the capacity for the next group
  return s;
}

Status submitCollective(Communicator* c, const CollArgs& a) {
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
