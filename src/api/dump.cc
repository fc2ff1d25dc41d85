// ncclCommDump, RCCL's C++-only entry point (what PyTorch's flight recorder reads when a
// job hangs): a communicator's identity and state as strings, safe from any thread while
// collectives run.
//
// RCCL's own keys, with RCCL's meaning: commHash (quoted hex), rank, localRank (its index
// among the ranks of its host), node (its host's index), nRanks, localRanks, nNodes.
// Tempo adds what says where a job stands: opCount (operations this rank has issued:
// collectives, and each group's point-to-point calls as one), asyncError
// (ncclCommGetAsyncError's answer, by name), ring (the ring the ring algorithms run on),
// and from the skew telemetry when it is on (the default; figures as of its last window):
// pacing (mode and controller state), skewP50Us, skewP99Us, topLastArriver and
// topLastArriverShare. A NULL communicator dumps nothing, as RCCL's does; before a
// nonblocking init completes only commHash, rank, nRanks, opCount and asyncError are known.
#include "src/api/entry.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <string>
#include <unordered_map>

#include "src/api/checks.h"
#include "src/pacing/monitor.h"

namespace {

using tempo::Status;

std::string fixed(double v, int digits) {
  char b[64];
  snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

void dumpInto(const tempo::comm::Communicator& c, std::unordered_map<std::string, std::string>& map) {
  char hash[32];
  snprintf(hash, sizeof hash, "\"%016" PRIx64 "\"", c.commHash());
  map["commHash"] = hash;
  map["rank"] = std::to_string(c.rank());
  map["nRanks"] = std::to_string(c.nranks());
  map["asyncError"] = ncclGetErrorString(tempo::api::toNccl(c.asyncState()));
  map["opCount"] = std::to_string(c.opsIssued());
  if (!c.initComplete()) return;

  const std::vector<int>& host = c.hostOf();
  int localRank = 0, localRanks = 0, nNodes = 0;
  for (int r = 0; r < c.nranks(); ++r) {
    nNodes = std::max(nNodes, host[size_t(r)] + 1);
    if (host[size_t(r)] != host[size_t(c.rank())]) continue;
    localRanks += 1;
    localRank += r < c.rank();
  }
  map["localRank"] = std::to_string(localRank);
  map["localRanks"] = std::to_string(localRanks);
  map["node"] = std::to_string(host[size_t(c.rank())]);
  map["nNodes"] = std::to_string(nNodes);
  std::string ring;
  for (int r : c.ring()) ring += (ring.empty() ? "" : " ") + std::to_string(r);
  map["ring"] = ring;

  if (const tempo::pacing::SkewMonitor* m = c.skewMonitor()) {
    const tempo::pacing::SkewSnapshot s = m->snapshot();
    map["pacing"] = std::string(tempo::pacing::modeName(s.mode)) + ", " +
                    tempo::pacing::pacingStateName(s.decision.state);
    map["skewP50Us"] = fixed(double(s.skewP50) / 1e3, 1);
    map["skewP99Us"] = fixed(double(s.skewP99) / 1e3, 1);
    map["topLastArriver"] = std::to_string(s.topLast);
    map["topLastArriverShare"] = fixed(s.topLastShare, 3);
  }
}

}  // namespace

// C++ linkage and a strong symbol, as in RCCL (no pncclCommDump exists); cmake/librccl.map
// exports it by its demangled name.
__attribute__((visibility("default"))) ncclResult_t ncclCommDump(
    ncclComm_t comm, std::unordered_map<std::string, std::string>& map) {
  return tempo::api::guarded([&]() -> Status {
    if (!comm) return Status::Success;
    TEMPO_ASSIGN(tempo::comm::Pin c, tempo::api::anyComm(comm, "ncclCommDump"));
    dumpInto(*c, map);
    return Status::Success;
  });
}
