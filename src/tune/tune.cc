#include "src/tune/tune.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <string>

#include "src/core/param.h"

namespace tempo::tune {
namespace {

// Largest payload for which recursive doubling beats the ring, from side-by-side runs of
// both on this project's machines (libfabric shm, 2-core VMs): with every rank on its own
// core the ring's extra latencies cost little, so only tiny messages take the shortcut;
// oversubscribed, every message latency includes a context switch, and fewer of them win
// up to far larger sizes. Measured (all_reduce_perf -c 0, TEMPO_ALGO=ring|rd): 2 ranks on
// 2 cores tie from 16 KiB to 256 KiB and the ring wins at 1 MiB; 4 ranks on 2 cores, rd
// takes 180 us at 64 KiB against the ring's 340 and ties at 512 KiB, the ring wins from
// 1 MiB.
// Over Tempo's shm (2026-12-03, all_reduce_perf, TEMPO_ALGO=rd|ring, two runs each) the
// ring wins much earlier: with a core per rank, messages above the eager limit (16 KiB)
// are pulled by cross-memory attach, and recursive doubling's simultaneous pulls ran
// slower than the ring at 32-64 KiB (2 processes: 32 KiB rd 11.6-12.6 us, ring 8.6-8.8;
// 64 KiB 24-40 against 14-30), ahead at 4-16 KiB; 4 processes on 2 cores tie at 32 KiB
// (23-27 against 25-40 us) and the ring wins from 128 KiB (78 against 86-105 us) to 1 MiB.
uint64_t rdLimit(const Context& c) {
  if (c.nranks <= 1) return 0;
  if (c.slowest == transport::Kind::Shm) return (c.oversubscribed ? uint64_t(32) : uint64_t(16)) << 10;
  return c.oversubscribed ? (uint64_t(512) << 10) : (uint64_t(64) << 10);
}

}  // namespace

const char* algoName(AllReduceAlgo a) {
  switch (a) {
    case AllReduceAlgo::Ring: return "ring";
    case AllReduceAlgo::RecursiveDoubling: return "rd";
    case AllReduceAlgo::Direct: return "direct";
    case AllReduceAlgo::Hierarchical: return "hier";
    case AllReduceAlgo::Tree: return "tree";
  }
  return "?";
}

const char* algoName(LeaderAlgo a) {
  switch (a) {
    case LeaderAlgo::RecursiveDoubling: return "rd";
    case LeaderAlgo::Tree: return "tree";
    case LeaderAlgo::Ring: return "ring";
  }
  return "?";
}

const char* candidateName(const Candidate& c) {
  if (c.algo != AllReduceAlgo::Hierarchical) return algoName(c.algo);
  switch (c.leaders) {
    case LeaderAlgo::RecursiveDoubling: return "hier/rd";
    case LeaderAlgo::Tree: return "hier/tree";
    case LeaderAlgo::Ring: return "hier/ring";
  }
  return "hier";
}

LinkCost netCost(transport::Kind slowest) {
  LinkCost c;
  c.alphaUs = param::NetAlphaUs() > 0 ? double(param::NetAlphaUs()) : slowest == transport::Kind::UcxNet ? 20 : 30;
  c.gbps = (param::NetMbits() > 0 ? double(param::NetMbits()) : 10000.0) / 8e3;
  return c;
}

const char* algoName(BroadcastAlgo a) { return a == BroadcastAlgo::Tree ? "tree" : "chain"; }

namespace {
// NCCL_ALGO as TEMPO_ALGO would say it: "ring", "nccl-tree" (Tree: the hierarchical
// all-reduce with a tree-shaped phase among leaders), or "auto" for a list of both, unset,
// or a list that excludes with ^ (NCCL's syntax).
Result<const char*> ncclAlgo() {
  std::string v = param::NcclAlgo();
  for (char& c : v) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (v.empty()) return "auto";
  if (v[0] == '^') {
    if (v == "^tree") return "ring";
    if (v == "^ring") return "nccl-tree";
    return "auto";
  }
  bool ring = false, tree = false;
  size_t start = 0;
  while (start <= v.size()) {
    size_t end = v.find(',', start);
    if (end == std::string::npos) end = v.size();
    const std::string item = v.substr(start, end - start);
    if (item == "ring") ring = true;
    else if (item == "tree") tree = true;
    else if (item != "collnetdirect" && item != "collnetchain" && item != "nvls" && item != "nvlstree" && item != "pat")
      return fail(Status::InvalidArgument, "NCCL_ALGO=%s: expected Ring and/or Tree (or NCCL's other names)",
                  param::NcclAlgo());
    start = end + 1;
  }
  return ring && !tree ? "ring" : tree && !ring ? "nccl-tree" : "auto";
}

// The effective all-reduce override.
const char* forcedAlgo() {
  const char* a = param::Algo();
  if (strcmp(a, "auto")) return a;
  auto n = ncclAlgo();
  return n.ok() ? n.value() : "auto";
}
}  // namespace

Status checkOverrides() {
  const char* a = param::Algo();
  if (strcmp(a, "auto") && strcmp(a, "ring") && strcmp(a, "rd") && strcmp(a, "direct") && strcmp(a, "tree") &&
      strcmp(a, "hier") && strcmp(a, "hier/rd") && strcmp(a, "hier/tree") && strcmp(a, "hier/ring"))
    return fail(Status::InvalidArgument,
                "TEMPO_ALGO=%s: expected auto, ring, rd, direct, tree, hier, hier/rd, hier/tree or hier/ring", a);
  if (param::NetAlphaUs() < 0) return fail(Status::InvalidArgument, "TEMPO_NET_ALPHA_US=%ld: expected >= 0", long(param::NetAlphaUs()));
  if (param::NetMbits() < 0) return fail(Status::InvalidArgument, "TEMPO_NET_MBITS=%ld: expected >= 0", long(param::NetMbits()));
  if (param::MinNChannels() < 1 || param::MaxNChannels() < 1)
    return fail(Status::InvalidArgument, "NCCL_MIN_NCHANNELS=%ld, NCCL_MAX_NCHANNELS=%ld: expected at least 1",
                long(param::MinNChannels()), long(param::MaxNChannels()));
  TEMPO_TRY(ncclAlgo().status());
  const char* b = param::BcastAlgo();
  if (strcmp(b, "auto") && strcmp(b, "chain") && strcmp(b, "tree"))
    return fail(Status::InvalidArgument, "TEMPO_BCAST_ALGO=%s: expected auto, chain or tree", b);
  return Status::Success;
}

BroadcastAlgo broadcast(uint64_t bytes, const Context& ctx) {
  const char* forced = param::BcastAlgo();
  if (!strcmp(forced, "tree")) return BroadcastAlgo::Tree;
  if (!strcmp(forced, "chain")) return BroadcastAlgo::Chain;
  // With a core per rank the pipelined chain moves every byte at the transport's rate, and
  // auto keeps it. With more ranks than cores every hop costs a context switch, and the
  // binomial tree's log2(n) hops beat the chain's n - 1 from 128 KiB up; below, the chain's
  // single whole message wins. Measured at 4 processes on 2 cores (broadcast_perf,
  // TEMPO_BCAST_ALGO=chain|tree, three alternating runs): 64 KiB chain 12-14 us, tree
  // 14-18; 256 KiB chain 52-58, tree 37-42 (and 56 against 42 in an earlier session);
  // 1 MiB 159-253 against 185-227; 4 MiB 784-914 against 626-861.
  if (ctx.oversubscribed && ctx.nranks > 2 && bytes >= (uint64_t(128) << 10)) return BroadcastAlgo::Tree;
  return BroadcastAlgo::Chain;
}

namespace {
// Over Tempo's shm a large message is one process_vm_readv by the receiver, and each call
// costs ~7 us before it copies a byte (measured: 4 MiB in one call 157 us, in 256 KiB
// pieces 277 us; 64 MiB 5.2 ms in 4 MiB pieces, 6.7 ms in 256 KiB ones), so its messages
// go up to 4 MiB. Other transports: 512 KiB (1 MiB over libfabric's tcp, which also carries
// the large messages of the routed endpoint TEMPO_NET_DEFAULT=auto opens; 256 KiB over UCX's
// network transports, measured between two emulated hosts: all_reduce_perf 16 MiB in
// 8.2 ms with 256 KiB messages, 8.9 with 128 KiB, 14.1 with 512 KiB, 16.6 with 1 MiB).
uint64_t chunkCap(const Context& ctx) {
  switch (ctx.slowest) {
    case transport::Kind::Shm: return uint64_t(4) << 20;
    case transport::Kind::OfiTcp: return uint64_t(1) << 20;
    case transport::Kind::UcxNet: return uint64_t(256) << 10;
    default: return uint64_t(512) << 10;
  }
}
}  // namespace

namespace {

int ceilLog2(int n) {
  int d = 0;
  while ((1 << d) < n) ++d;
  return d;
}

// The phases of the cost model over m ranks exchanging S bytes each on level l.
double rdUs(double S, int m, const LinkCost& l) {
  if (m <= 1) return 0;
  int p = 1, rounds = 0;
  while (p * 2 <= m) p *= 2, ++rounds;
  if (p != m) rounds += 2;  // the extra ranks' fold and unfold
  return rounds * l.us(S);
}
// Recursive doubling over the topology ring: with `perHost` ranks of each host adjacent on
// it, the first floor(log2(perHost)) exchanges stay on the host; in each later one all of
// a host's ranks send a whole vector over its link at once.
double rdTwoLevelUs(double S, int n, int perHost, const LinkCost& local, const LinkCost& net) {
  int onHost = 0;
  while ((2 << onHost) <= perHost) ++onHost;
  const double rounds = rdUs(S, n, net) / net.us(S);
  return onHost * local.us(S) + (rounds - onHost) * net.us(S * perHost);
}
double ringUs(double S, int m, const LinkCost& l) { return m <= 1 ? 0 : 2.0 * (m - 1) * l.us(S / m); }
// A chunk climbs the tree's depth and comes back (2d hops); behind it each further column
// costs a rank's link the 4 chunks it sends per column of both trees, or a message's
// alpha, whichever is more.
double treeUs(double S, int m, double chunk, const LinkCost& l) {
  if (m <= 1) return 0;
  const double c = std::min(chunk, S / 2), columns = std::ceil(S / 2 / std::max(1.0, c));
  return 2.0 * (ceilLog2(m) + 1) * l.us(c) + (columns - 1) * std::max(4 * c / (l.gbps * 1e3), l.alphaUs);
}
// A pipelined chain of m ranks: m - 2 + columns chunk times.
double chainUs(double S, int m, double chunk, const LinkCost& l) {
  if (m <= 1) return 0;
  const double c = std::min(chunk, S), columns = std::ceil(S / std::max(1.0, c));
  return (m - 2 + columns) * l.us(c);
}

// The double binary tree's column: at least one alpha-beta product (a chunk that costs as
// much to move as to announce), at most 32 columns per tree, within the transport's cap.
uint64_t treeChunk(uint64_t bytes, const Context& ctx) {
  if (param::ChunkSize() > 0) return uint64_t(param::ChunkSize());
  const uint64_t ab = uint64_t(ctx.net.alphaUs * ctx.net.gbps * 1e3);
  return std::clamp<uint64_t>(std::max(ab, bytes / 64), 16 << 10, std::max<uint64_t>(16 << 10, chunkCap(ctx)));
}

// The chains on one host run over shared memory whatever carries the network.
uint64_t localChunk(uint64_t bytes, const Context& ctx) {
  Context local = ctx;
  local.slowest = transport::Kind::Shm;
  local.nranks = ctx.maxRanksPerHost;
  return chainChunk(bytes, local);
}

}  // namespace

int predictAllReduce(uint64_t bytes, const Context& ctx, bool average, Candidate* out) {
  const double S = double(bytes);
  const int n = ctx.nranks, hosts = std::max(1, ctx.hosts), perHost = std::max(1, ctx.maxRanksPerHost);
  const bool rdFits = bytes <= ctx.scratchBytes;
  const double tree = double(treeChunk(bytes, ctx)), chain = double(localChunk(bytes, ctx));
  int k = 0;
  out[k++] = {AllReduceAlgo::Ring, LeaderAlgo::Ring, ringUs(S, n, ctx.net)};
  if (rdFits)
    out[k++] = {AllReduceAlgo::RecursiveDoubling, LeaderAlgo::RecursiveDoubling,
                rdTwoLevelUs(S, n, perHost, ctx.local, ctx.net)};
  out[k++] = {AllReduceAlgo::Tree, LeaderAlgo::Tree, treeUs(S, n, tree, ctx.net)};
  if (!average && perHost > 1) {
    const double onHost = 2 * chainUs(S, perHost, chain, ctx.local);  // reduce, then broadcast
    if (rdFits)
      out[k++] = {AllReduceAlgo::Hierarchical, LeaderAlgo::RecursiveDoubling, onHost + rdUs(S, hosts, ctx.net)};
    out[k++] = {AllReduceAlgo::Hierarchical, LeaderAlgo::Tree, onHost + treeUs(S, hosts, tree, ctx.net)};
    out[k++] = {AllReduceAlgo::Hierarchical, LeaderAlgo::Ring, onHost + ringUs(S, hosts, ctx.net)};
  }
  return k;
}

double predictUs(Shape shape, uint64_t bytes, const Context& ctx, bool average) {
  const int n = ctx.nranks;
  if (n <= 1) return 0;
  // On one host the model's network level is the host's own memory.
  Context m = ctx;
  if (ctx.hosts <= 1) m.net = ctx.local;
  const LinkCost& l = m.net;
  const double S = double(bytes);
  switch (shape) {
    case Shape::AllReduce: {
      const AllReduceChoice choice = allReduce(bytes, ctx, average);
      Candidate cands[kMaxCandidates];
      const int k = predictAllReduce(bytes, m, average, cands);
      for (int i = 0; i < k; ++i)
        if (cands[i].algo == choice.algo &&
            (choice.algo != AllReduceAlgo::Hierarchical || cands[i].leaders == choice.leaders))
          return cands[i].us;
      return ringUs(S, n, l);  // the direct all-reduce, which the model does not cost: as the ring
    }
    case Shape::Broadcast:
      if (broadcast(bytes, ctx) == BroadcastAlgo::Tree) return ceilLog2(n) * l.us(S);
      return chainUs(S, n, double(chainChunk(bytes, ctx)), l);
    case Shape::Reduce: return chainUs(S, n, double(chainChunk(bytes, ctx)), l);
    case Shape::AllGather:
    case Shape::ReduceScatter:
    case Shape::Gather:
    case Shape::Scatter:
    case Shape::AllToAll: return (n - 1) * l.us(S);
  }
  return 0;
}

double predictP2pUs(uint64_t bytes, bool acrossHosts, const Context& ctx) {
  return (acrossHosts ? ctx.net : ctx.local).us(double(bytes));
}

AllReduceChoice allReduce(uint64_t bytes, const Context& ctx, bool average) {
  AllReduceChoice c;
  const char* forced = forcedAlgo();
  c.chunkBytes = ringChunk(bytes / uint64_t(std::max(1, ctx.nranks)), ctx);
  // The latency-optimised algorithms stage whole vectors in scratch; the others fit always.
  const bool rdFits = bytes <= ctx.scratchBytes;
  const bool directFits = bytes * uint64_t(ctx.nranks) <= ctx.scratchBytes;
  Candidate cands[kMaxCandidates];
  const int ncands = predictAllReduce(bytes, ctx, average, cands);
  // The fastest candidate the model predicts among those `allowed` accepts (none: ring).
  auto best = [&](auto allowed) {
    const Candidate* b = nullptr;
    for (int i = 0; i < ncands; ++i)
      if (allowed(cands[i]) && (!b || cands[i].us < b->us)) b = &cands[i];
    if (b) c.algo = b->algo, c.leaders = b->leaders;
  };
  auto hierOnly = [](const Candidate& x) { return x.algo == AllReduceAlgo::Hierarchical; };
  auto treeShaped = [](const Candidate& x) {
    return x.algo == AllReduceAlgo::Hierarchical ? x.leaders != LeaderAlgo::Ring : x.algo == AllReduceAlgo::Tree;
  };

  if (!strcmp(forced, "auto")) {
    if (ctx.hosts > 1) {
      // Across hosts: the cost model's choice. Auto never picks direct (below).
      best([](const Candidate&) { return true; });
    } else if (rdFits && bytes <= rdLimit(ctx)) {
      // On one host, measured thresholds (rdLimit). Auto never picks direct: one round of
      // n-1 messages measured slower than rd at every size on these machines (4 ranks on
      // 2 cores, 64 KiB: 245-268 us vs rd's 180-185 us). It stays selectable for fabrics
      // where a single round wins.
      c.algo = AllReduceAlgo::RecursiveDoubling;
    }
  } else if (!strcmp(forced, "hier")) {
    if (!average) best(hierOnly);
  } else if (!strncmp(forced, "hier/", 5)) {
    // One leader algorithm named (recursive doubling only where it fits).
    if (!average)
      best([&](const Candidate& x) { return hierOnly(x) && !strcmp(candidateName(x), forced); });
  } else if (!strcmp(forced, "nccl-tree")) {
    // NCCL's Tree: a tree among the hosts (the flat double binary tree for ncclAvg, which
    // the hierarchical all-reduce does not do).
    best(treeShaped);
  } else if (!strcmp(forced, "tree")) {
    c.algo = AllReduceAlgo::Tree;
  } else if (!strcmp(forced, "rd") && rdFits) {
    c.algo = AllReduceAlgo::RecursiveDoubling;
  } else if (!strcmp(forced, "direct") && directFits) {
    c.algo = AllReduceAlgo::Direct;
  }
  if (c.algo == AllReduceAlgo::Hierarchical) {
    c.localChunkBytes = localChunk(bytes, ctx);
    if (c.leaders == LeaderAlgo::Tree) c.chunkBytes = treeChunk(bytes, ctx);
    if (c.leaders == LeaderAlgo::Ring) c.chunkBytes = ringChunk(bytes / uint64_t(std::max(1, ctx.hosts)), ctx);
  }
  if (c.algo == AllReduceAlgo::Tree) c.chunkBytes = treeChunk(bytes, ctx);
  return c;
}


int channelCount(int rails) {
  const int64_t lo = std::max<int64_t>(1, param::MinNChannels()), hi = std::max<int64_t>(lo, param::MaxNChannels());
  return int(std::clamp<int64_t>(rails, lo, std::min<int64_t>(hi, kMaxChannels)));
}

int ringChannels(uint64_t bytes, const Context& ctx) {
  // Measured on the testbed (8 hosts, 2 rails of 400 Mbit/s, 4:1 uplinks, ring all-reduce):
  // two channels halve the time from 1 MiB (16 MiB: 0.35 s against 0.68 s), and at 256 KiB
  // they cost 1.5x, as every wait for a message of the smaller parts ends later once a
  // rank sleeps (with several endpoints there is no single descriptor to wake on).
  constexpr uint64_t kMinPart = 256 << 10;
  return int(std::clamp<uint64_t>(bytes / kMinPart, 1, uint64_t(std::max(1, ctx.channels))));
}

uint64_t ringChunk(uint64_t segmentBytes, const Context& ctx) {
  if (param::ChunkSize() > 0) return uint64_t(param::ChunkSize());
  // Per-message costs dominate on every transport measured here (libfabric shm costs
  // several microseconds per message whatever its size), so a segment travels in as few
  // columns as possible: whole up to the cap, then in columns of the cap, which still
  // pipelines large messages.
  return std::clamp<uint64_t>(segmentBytes, 4096, chunkCap(ctx));
}

uint64_t chainChunk(uint64_t bytes, const Context& ctx) {
  if (param::ChunkSize() > 0) return uint64_t(param::ChunkSize());
  const uint64_t cap = chunkCap(ctx);
  if (ctx.slowest == transport::Kind::Shm) {
    // A chain of n ranks moves B bytes in c-byte chunks in (n - 2 + B/c) chunk times of
    // (alpha + c/beta) each, least at c = sqrt(B * alpha * beta / (n - 2)); alpha * beta
    // is ~96 KB over Tempo's shm (7-8 us per message, 12-13 GB/s). Two ranks have nothing
    // to pipeline: the message goes whole, up to the cap. The floor of 256 KiB was measured
    // at 2 processes (256 KiB whole in 28-30 us, in four 64 KiB chunks 40-47 us).
    if (ctx.nranks <= 2) return std::clamp<uint64_t>(bytes, 4096, cap);
    const double best = std::sqrt(double(bytes) * 96e3 / double(ctx.nranks - 2));
    return std::clamp<uint64_t>(uint64_t(best), uint64_t(256) << 10, cap);
  }
  // Elsewhere at least four chunks keep the chain busy, and the floor keeps per-message
  // costs small against the payload.
  return std::clamp<uint64_t>(bytes / 4, uint64_t(64) << 10, cap);
}

}  // namespace tempo::tune
