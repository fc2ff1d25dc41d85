// Ring all-reduce plans, executed symbolically for every rank at once.
//
// Each element carries the set of ranks whose input it contains and how many reductions
// produced it. A random scheduler runs the plans of all ranks in any order the
// dependencies and the window allow, with transfers completing at random times, and
// checks what the engine relies on: a buffer range is never read or written while a
// posted receive may still write it, never written while a posted send may still read
// it, message sizes match on both sides, nothing deadlocks even on a transport that
// delivers each pair's messages strictly one after another (head-of-line blocking, as
// libfabric shm's SAR protocol does) with sends posted in plan order per peer (as the
// engine posts them), every rank ends with every
// element reduced over all ranks exactly once each (n-1 reductions), out-of-place
// inputs stay untouched, and every access stays inside its buffer. With the mismatch
// detector's fingerprint exchange put in front (prependFingerprints), the same holds, and
// a data message carried inside round 0's fingerprint message reaches its receive.
#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <tuple>
#include <vector>

#include "src/algo/channels.h"
#include "src/algo/collectives.h"
#include "src/algo/device_lowering.h"
#include "src/algo/direct_allreduce.h"
#include "src/algo/fingerprint.h"
#include "src/algo/hier_allreduce.h"
#include "src/algo/p2p.h"
#include "src/algo/rd_allreduce.h"
#include "src/algo/ring_allreduce.h"
#include "src/algo/steps.h"
#include "src/algo/tree_allreduce.h"

namespace tempo::algo {
namespace {

// One element as the simulation sees it: which ranks' inputs it holds, how many
// reductions made it, and which input element it stands for (a reduction of two different
// elements is a bug).
struct Cell {
  uint64_t mask = 0;
  uint32_t reductions = 0;
  uint64_t index = 0;
  bool operator==(const Cell&) const = default;
};

struct Range {
  BufId buf;
  uint64_t begin, end;  // elements
  bool overlaps(const Range& o) const { return buf == o.buf && begin < o.end && o.begin < end; }
};

struct RankState {
  Plan plan;
  std::vector<Cell> input, output, scratch;
  std::vector<Cell> staging;  // a lowered plan's (device_lowering.h)
  std::deque<uint32_t> device;  // posted device steps, completed in order (one stream)
  std::vector<Cell> fingerprints;  // the Absolute locations: kFp below, or a p2p plan's host memory
  std::vector<Cell> deviceMemory;  // the Device locations (a p2p plan's device buffers)
  std::vector<int> state;  // 0 waiting, 1 posted, 2 done
  uint32_t first = 0;
  int64_t leadBytes = -1;  // length of the round-0 fingerprint message received
  int64_t carried = -1;    // data bytes it carried, once round 0's Check has run
  // In place, Input and Output are one buffer (`input`), at these element offsets.
  uint64_t inBase = 0, outBase = 0;
};

// What the generic simulator needs of one rank: its plan, its input buffer (the single
// buffer when in place) and its output size, and the in-place offsets.
struct RankSetup {
  Plan plan;
  std::vector<Cell> input;
  size_t outputCells = 0;
  uint64_t inBase = 0, outBase = 0;
  std::vector<Cell> absolute, device;  // the Absolute and Device locations' memory (p2p plans)
};

class Simulator {
 public:
  enum class Algo { Ring, RecursiveDoubling, Direct };
  // `ring` (ring only): ring[p] is the rank at position p; empty means rank order.
  Simulator(Algo algo, int n, uint64_t count, uint32_t ts, bool inPlace, uint64_t chunk, uint64_t scratch,
            std::vector<int> ring = {})
      : n_(n), ts_(ts), inPlace_(inPlace), ranks_(size_t(n)) {
    std::vector<int> posOf(static_cast<size_t>(n));
    if (ring.empty())
      for (int r = 0; r < n; ++r) ring.push_back(r);
    for (int p = 0; p < n; ++p) posOf[size_t(ring[size_t(p)])] = p;
    for (int r = 0; r < n; ++r) {
      RankState& s = ranks_[size_t(r)];
      if (algo == Algo::Direct) {
        DirectAllReduceArgs a;
        a.count = count;
        a.typeSize = ts;
        a.inPlace = inPlace;
        a.rank = r;
        a.nranks = n;
        planDirectAllReduce(a, s.plan);
        initBuffers(s, r, count, directScratchBytes(count, ts, n, inPlace));
        continue;
      }
      if (algo == Algo::RecursiveDoubling) {
        RdAllReduceArgs a;
        a.count = count;
        a.typeSize = ts;
        a.inPlace = inPlace;
        a.rank = r;
        a.nranks = n;
        planRdAllReduce(a, s.plan);
        initBuffers(s, r, count, rdScratchBytes(count, ts));
        continue;
      }
      RingAllReduceArgs a;
      a.count = count;
      a.typeSize = ts;
      a.inPlace = inPlace;
      a.pos = posOf[size_t(r)];
      a.nranks = n;
      a.nextRank = ring[size_t((a.pos + 1) % n)];
      a.prevRank = ring[size_t((a.pos + n - 1) % n)];
      a.chunkBytes = chunk;
      a.scratchBytes = scratch;
      planRingAllReduce(a, s.plan);
      initBuffers(s, r, count, scratch);
    }
  }

  // Any planner: plans and buffers prepared by the caller, results checked by the caller.
  Simulator(int n, uint32_t ts, bool inPlace, std::vector<RankSetup> setups)
      : n_(n), ts_(ts), inPlace_(inPlace), ranks_(size_t(n)) {
    for (int r = 0; r < n; ++r) {
      RankState& s = ranks_[size_t(r)];
      RankSetup& u = setups[size_t(r)];
      s.plan = std::move(u.plan);
      s.input = std::move(u.input);
      s.output.assign(inPlace ? 0 : u.outputCells, Cell{});
      s.inBase = u.inBase;
      s.outBase = u.outBase;
      s.fingerprints = std::move(u.absolute);
      s.deviceMemory = std::move(u.device);
      s.scratch.assign(s.plan.scratchBytes / ts_, Cell{});
      s.staging.assign(s.plan.stagingBytes / ts_, Cell{});
      s.state.assign(s.plan.steps.size(), 0);
    }
  }
  const RankState& rank(int r) const { return ranks_[size_t(r)]; }

  // Puts the fingerprint exchange in front of every rank's plan, as the communicator does;
  // its buffers are the Absolute locations of kFp. Returns the messages carried.
  int prependFingerprints() {
    int carried = 0;
    for (int r = 0; r < n_; ++r) {
      RankState& s = ranks_[size_t(r)];
      carried += prependFingerprint(s.plan, r, n_, 0xffff, kFp) != 0;
      s.fingerprints.assign(kFpCells * 8 / ts_, Cell{});
      s.state.assign(s.plan.steps.size(), 0);
    }
    return carried;
  }

  // Lowers every rank's plan for device buffers (device_lowering.h), as the communicator
  // does after the fingerprint exchange is in front. Device steps then run asynchronously:
  // posted (their ranges in flight, as a transfer's are), completed later in posting order.
  void lowerForDevice(const DeviceLowering& d) {
    for (RankState& s : ranks_) {
      algo::lowerForDevice(s.plan, d);
      s.staging.assign(s.plan.stagingBytes / ts_, Cell{});
      s.state.assign(s.plan.steps.size(), 0);
    }
  }

  // Runs to completion; returns false (with a gtest failure) on a hazard or deadlock.
  bool run(uint64_t seed) {
    std::mt19937_64 rng(seed);
    for (;;) {
      std::vector<std::pair<int, uint32_t>> startable;
      for (int r = 0; r < n_; ++r) {
        RankState& s = ranks_[size_t(r)];
        while (s.first < s.plan.steps.size() && s.state[s.first] == 2) ++s.first;
        uint64_t end = std::min<uint64_t>(s.plan.steps.size(), uint64_t(s.first) + s.plan.window);
        blocked_.assign(size_t(n_), false);
        for (uint32_t i = s.first; i < end; ++i) {
          const Step& st = s.plan.steps[i];
          bool isSend = st.kind == StepKind::Send;
          if (s.state[i] != 0 || (isSend && blocked_[size_t(st.peer)])) continue;
          if (depsDone(s, i) && (st.kind != StepKind::RecvCarried || s.carried >= 0)) startable.push_back({r, i});
          // Later sends to this peer wait until this one has started.
          if (isSend) blocked_[size_t(st.peer)] = true;
        }
      }
      std::vector<std::tuple<int, uint32_t, int, uint32_t>> deliverable;  // sender, step, receiver, step
      // Only the oldest undelivered send of each pair may move.
      for (auto& [pair, queue] : sendQueue_) {
        if (queue.empty()) continue;
        uint32_t si = queue.front();
        const Step& st = ranks_[size_t(pair.first)].plan.steps[si];
        auto it = postedRecvs_.find(Key{pair.first, pair.second, st.msg});
        if (it != postedRecvs_.end()) deliverable.push_back({pair.first, si, pair.second, it->second});
      }
      std::vector<int> completable;  // ranks whose oldest device step may finish
      for (int r = 0; r < n_; ++r)
        if (!ranks_[size_t(r)].device.empty()) completable.push_back(r);
      if (startable.empty() && deliverable.empty() && completable.empty()) break;
      size_t pick = rng() % (startable.size() + deliverable.size() + completable.size());
      if (pick < startable.size()) {
        if (!start(startable[pick].first, startable[pick].second)) return false;
      } else if (pick >= startable.size() + deliverable.size()) {
        if (!completeDevice(completable[pick - startable.size() - deliverable.size()])) return false;
      } else {
        auto [src, si, dst, ri] = deliverable[pick - startable.size()];
        if (!deliver(src, si, dst, ri)) return false;
      }
    }
    for (int r = 0; r < n_; ++r)
      for (size_t i = 0; i < ranks_[size_t(r)].state.size(); ++i)
        if (ranks_[size_t(r)].state[i] != 2) {
          ADD_FAILURE() << "deadlock: rank " << r << " step " << i << " never finished";
          return false;
        }
    return true;
  }

  void checkResult() const {
    const uint64_t all = n_ == 64 ? ~uint64_t(0) : (uint64_t(1) << n_) - 1;
    for (int r = 0; r < n_; ++r) {
      const RankState& s = ranks_[size_t(r)];
      const std::vector<Cell>& out = inPlace_ ? s.input : s.output;
      for (size_t i = 0; i < out.size(); ++i) {
        ASSERT_EQ(out[i].mask, all) << "rank " << r << " element " << i << " misses contributions";
        ASSERT_EQ(out[i].reductions, uint32_t(n_ - 1)) << "rank " << r << " element " << i;
      }
      if (inPlace_) continue;
      for (size_t i = 0; i < s.input.size(); ++i)
        ASSERT_EQ(s.input[i], (Cell{uint64_t(1) << r, 0, i})) << "out-of-place input modified";
    }
  }

  uint64_t messages() const { return messages_; }

 private:
  // mine | round 0 out | round 0 in | rounds 1.., in bytes; kFpCells counts 8-byte cells.
  static constexpr uint64_t kLead = 32 + kMaxCarriedBytes;
  static constexpr FingerprintLocs kFp{{BufId::Absolute, 0},
                                       {BufId::Absolute, 32},
                                       {BufId::Absolute, 32 + kLead},
                                       {BufId::Absolute, 32 + 2 * kLead},
                                       32};
  static constexpr uint64_t kFpCells = (32 + 2 * kLead + 30 * 32) / 8;

  void initBuffers(RankState& s, int r, uint64_t count, uint64_t scratchAvailable) {
    s.input.resize(count);
    for (uint64_t e = 0; e < count; ++e) s.input[e] = Cell{uint64_t(1) << r, 0, e};
    s.output.assign(count, Cell{});
    EXPECT_LE(s.plan.scratchBytes, scratchAvailable) << "plan needs more scratch than it was given";
    s.scratch.assign(s.plan.scratchBytes / ts_, Cell{});
    s.state.assign(s.plan.steps.size(), 0);
  }

  using Key = std::tuple<int, int, uint32_t>;  // sender, receiver, msg

  bool depsDone(const RankState& s, uint32_t i) const {
    for (uint32_t d : s.plan.steps[i].deps) {
      if (d == kNoDep) continue;
      EXPECT_LT(d, i) << "dependency does not precede its step";
      if (s.state[d] != 2) return false;
    }
    return true;
  }

  std::vector<Cell>& buffer(RankState& s, BufId b) {
    if (b == BufId::Scratch) return s.scratch;
    if (b == BufId::Staging) return s.staging;
    if (b == BufId::Absolute) return s.fingerprints;
    if (b == BufId::Device) return s.deviceMemory;
    if (b == BufId::Output && !inPlace_) return s.output;
    return s.input;  // in place, input and output are one buffer
  }
  Range range(const RankState& s, const Loc& l, uint64_t bytes) const {
    EXPECT_EQ(l.offset % ts_, 0u);
    EXPECT_EQ(bytes % ts_, 0u);
    const uint64_t b = l.offset / ts_, e = (l.offset + bytes) / ts_;
    if (l.buf == BufId::Input && inPlace_) return {BufId::Input, s.inBase + b, s.inBase + e};
    if (l.buf == BufId::Output && inPlace_) return {BufId::Input, s.outBase + b, s.outBase + e};
    return {l.buf, b, e};
  }
  bool inBounds(RankState& s, const Range& r) {
    if (r.end > buffer(s, r.buf).size()) {
      ADD_FAILURE() << "access [" << r.begin << ", " << r.end << ") past the end of buffer " << int(r.buf);
      return false;
    }
    return true;
  }
  // No access may touch a range an in-flight receive may write; no write may touch a
  // range an in-flight send may read.
  bool safe(int rank, const Range& r, bool write) {
    for (auto& [key, f] : inflight_) {
      if (std::get<0>(key) != rank || !f.range.overlaps(r)) continue;
      if (f.isRecv || write) {
        ADD_FAILURE() << "rank " << rank << ": " << (write ? "write" : "read") << " of elements [" << r.begin << ", "
                      << r.end << ") of buffer " << int(r.buf) << " while a " << (f.isRecv ? "receive" : "send") << " of them is in flight";
        return false;
      }
    }
    return true;
  }

  bool start(int rank, uint32_t i) {
    RankState& s = ranks_[size_t(rank)];
    const Step& st = s.plan.steps[i];
    switch (st.kind) {
      case StepKind::RecvCarried:
        if (s.carried == int64_t(st.bytes)) {  // it came in round 0's message: copy it out
          Range a = range(s, st.src, st.bytes), d = range(s, st.dst, st.bytes);
          if (!inBounds(s, a) || !inBounds(s, d) || !safe(rank, d, true)) return false;
          auto &A = buffer(s, a.buf), &D = buffer(s, d.buf);
          for (uint64_t k = 0; k < a.end - a.begin; ++k) D[d.begin + k] = A[a.begin + k];
          break;
        }
        if (s.carried != 0) {
          ADD_FAILURE() << "rank " << rank << ": round 0 carried " << s.carried << " bytes, expected " << st.bytes;
          return false;
        }
        [[fallthrough]];
      case StepKind::Send:
      case StepKind::Recv: {
        if (st.bytes == 0 && !st.travelsEmpty) break;  // the engine elides empty messages on both sides
        bool isRecv = st.kind != StepKind::Send;
        Range r = range(s, isRecv ? st.dst : st.src, st.bytes);
        if (!inBounds(s, r) || !safe(rank, r, isRecv)) return false;
        inflight_.insert({{rank, i}, {r, isRecv}});
        Key key = isRecv ? Key{st.peer, rank, st.msg} : Key{rank, st.peer, st.msg};
        auto& table = isRecv ? postedRecvs_ : postedSends_;
        if (table.count(key)) {
          ADD_FAILURE() << "two messages share sender/receiver/index";
          return false;
        }
        table[key] = i;
        if (!isRecv) sendQueue_[{rank, st.peer}].push_back(i);
        s.state[i] = 1;
        return true;
      }
      case StepKind::Check:  // compares fingerprints; moves no data
        if (s.plan.steps[st.deps[0]].upTo) {
          s.carried = s.leadBytes - 32;
          const uint32_t c = s.plan.carriedRecv;
          if (s.carried && (c == kNoDep || int64_t(s.plan.steps[c].bytes) != s.carried)) {
            ADD_FAILURE() << "rank " << rank << ": round 0 carried " << s.carried << " bytes it does not expect";
            return false;
          }
        }
        break;
      case StepKind::DeviceCopy:
      case StepKind::DeviceReduce: {
        if (st.bytes == 0) break;  // the engine elides empty device work
        const bool reduces = st.kind == StepKind::DeviceReduce;
        Range a = range(s, st.src, st.bytes), d = range(s, st.dst, st.bytes);
        Range b = reduces ? range(s, st.src2, st.bytes) : a;
        if (!inBounds(s, a) || !inBounds(s, b) || !inBounds(s, d)) return false;
        if (!safe(rank, a, false) || !safe(rank, b, false) || !safe(rank, d, true)) return false;
        inflight_.insert({{rank, i}, {a, false}});
        inflight_.insert({{rank, i}, {b, false}});
        inflight_.insert({{rank, i}, {d, true}});
        s.device.push_back(i);
        s.state[i] = 1;
        return true;
      }
      case StepKind::Reduce: {
        Range a = range(s, st.src, st.bytes), b = range(s, st.src2, st.bytes), d = range(s, st.dst, st.bytes);
        if (!inBounds(s, a) || !inBounds(s, b) || !inBounds(s, d)) return false;
        if (!safe(rank, a, false) || !safe(rank, b, false) || !safe(rank, d, true)) return false;
        return reduce(s, rank, i, a, b, d);
      }
      case StepKind::Copy: {
        Range a = range(s, st.src, st.bytes), d = range(s, st.dst, st.bytes);
        if (!inBounds(s, a) || !inBounds(s, d) || !safe(rank, a, false) || !safe(rank, d, true)) return false;
        copy(s, a, d);
        break;
      }
    }
    s.state[i] = 2;
    return true;
  }

  // d = a (op) b, element by element; marks step i done.
  bool reduce(RankState& s, int rank, uint32_t i, const Range& a, const Range& b, const Range& d) {
    auto &A = buffer(s, a.buf), &B = buffer(s, b.buf), &D = buffer(s, d.buf);
    for (uint64_t k = 0; k < a.end - a.begin; ++k) {
      Cell x = A[a.begin + k], y = B[b.begin + k];
      if (x.mask & y.mask) {
        ADD_FAILURE() << "rank " << rank << " reduces a contribution twice";
        return false;
      }
      if (x.index != y.index) {
        ADD_FAILURE() << "rank " << rank << " reduces element " << x.index << " with element " << y.index;
        return false;
      }
      D[d.begin + k] = {x.mask | y.mask, x.reductions + y.reductions + 1, x.index};
    }
    s.state[i] = 2;
    return true;
  }
  void copy(RankState& s, const Range& a, const Range& d) {
    auto &A = buffer(s, a.buf), &D = buffer(s, d.buf);
    for (uint64_t k = 0; k < a.end - a.begin; ++k) D[d.begin + k] = A[a.begin + k];
  }

  // The oldest posted device step of `rank` finishes: its data moves now (nothing else
  // could touch its ranges while it was in flight), and its ranges are free again.
  bool completeDevice(int rank) {
    RankState& s = ranks_[size_t(rank)];
    const uint32_t i = s.device.front();
    s.device.pop_front();
    inflight_.erase({rank, i});
    const Step& st = s.plan.steps[i];
    const Range a = range(s, st.src, st.bytes), d = range(s, st.dst, st.bytes);
    if (st.kind == StepKind::DeviceReduce) return reduce(s, rank, i, a, range(s, st.src2, st.bytes), d);
    copy(s, a, d);
    s.state[i] = 2;
    return true;
  }

  bool deliver(int src, uint32_t si, int dst, uint32_t ri) {
    RankState &S = ranks_[size_t(src)], &R = ranks_[size_t(dst)];
    const Step &ss = S.plan.steps[si], &rs = R.plan.steps[ri];
    if (rs.upTo && ss.bytes <= rs.bytes) {
      R.leadBytes = int64_t(ss.bytes);
    } else if (ss.bytes != rs.bytes) {
      ADD_FAILURE() << "rank " << src << " sends " << ss.bytes << " bytes, rank " << dst << " expects " << rs.bytes;
      return false;
    }
    Range a = range(S, ss.src, ss.bytes), d = range(R, rs.dst, ss.bytes);
    auto &A = buffer(S, a.buf), &D = buffer(R, d.buf);
    for (uint64_t k = 0; k < a.end - a.begin; ++k) D[d.begin + k] = A[a.begin + k];
    postedSends_.erase({src, dst, ss.msg});
    sendQueue_[{src, dst}].pop_front();
    postedRecvs_.erase({src, dst, rs.msg});
    inflight_.erase({src, si});
    inflight_.erase({dst, ri});
    S.state[si] = R.state[ri] = 2;
    ++messages_;
    return true;
  }

  struct Flight {
    Range range;
    bool isRecv;
  };
  int n_;
  uint32_t ts_;
  bool inPlace_;
  std::vector<RankState> ranks_;
  std::map<Key, uint32_t> postedSends_, postedRecvs_;
  std::multimap<std::pair<int, uint32_t>, Flight> inflight_;  // a device step has several
  std::map<std::pair<int, int>, std::deque<uint32_t>> sendQueue_;  // posted sends per (src, dst)
  std::vector<bool> blocked_;
  uint64_t messages_ = 0;
};

void simulate(int n, uint64_t count, uint32_t ts, bool inPlace, uint64_t chunk, uint64_t scratch, uint64_t seed) {
  SCOPED_TRACE(testing::Message() << "n=" << n << " count=" << count << " ts=" << ts << " inPlace=" << inPlace
                                  << " chunk=" << chunk << " scratch=" << scratch << " seed=" << seed);
  Simulator sim(Simulator::Algo::Ring, n, count, ts, inPlace, chunk, scratch);
  ASSERT_TRUE(sim.run(seed));
  sim.checkResult();
}

TEST(RingAllReducePlan, EveryRankGetsEveryElementReducedOnceFromEachRank) {
  for (int n = 1; n <= 12; ++n)
    for (uint64_t count : {uint64_t(1), uint64_t(n) - 1 + (n == 1), uint64_t(n), uint64_t(n) + 1, uint64_t(97),
                           uint64_t(1000)})
      for (bool inPlace : {false, true}) simulate(n, count, 4, inPlace, 64, 4096, uint64_t(n) * 1000 + count);
}

TEST(RingAllReducePlan, ManyColumnsAndScratchReuse) {
  // 16-byte columns and two in-place scratch slots force long pipelines and slot reuse.
  for (int n : {2, 3, 5, 8})
    for (uint32_t ts : {1u, 2u, 8u})
      for (bool inPlace : {false, true})
        for (uint64_t seed = 0; seed < 3; ++seed) simulate(n, 777, ts, inPlace, 16, 32, seed);
}

TEST(RingAllReducePlan, LargeRings) {
  // One column per segment keeps the 64-rank simulation quick.
  for (int n : {16, 31, 33, 64})
    for (bool inPlace : {false, true}) simulate(n, 3000, 4, inPlace, 1 << 20, 1 << 20, uint64_t(n));
}

TEST(RingAllReducePlan, AnyRingOrderGivesEveryRankTheFullResult) {
  // Topology-aware rings visit the ranks in any order (src/topo/locality.h).
  for (int n : {2, 3, 4, 5, 8, 13})
    for (uint64_t seed = 0; seed < 4; ++seed) {
      std::vector<int> ring(static_cast<size_t>(n));
      for (int r = 0; r < n; ++r) ring[size_t(r)] = r;
      std::mt19937_64 rng(seed * 31 + uint64_t(n));
      std::shuffle(ring.begin(), ring.end(), rng);
      for (bool inPlace : {false, true}) {
        SCOPED_TRACE(testing::Message() << "n=" << n << " seed=" << seed << " inPlace=" << inPlace);
        Simulator sim(Simulator::Algo::Ring, n, 1000 + uint64_t(n), 4, inPlace, 64, 256, ring);
        ASSERT_TRUE(sim.run(seed));
        sim.checkResult();
      }
    }
}

TEST(RdAllReducePlan, EveryRankGetsEveryElementReducedOnceFromEachRank) {
  // Powers of two and not, so the fold/unfold of extra ranks is covered.
  for (int n = 1; n <= 20; ++n)
    for (bool inPlace : {false, true})
      for (uint64_t seed = 0; seed < 3; ++seed) {
        SCOPED_TRACE(testing::Message() << "n=" << n << " inPlace=" << inPlace << " seed=" << seed);
        Simulator sim(Simulator::Algo::RecursiveDoubling, n, 37, 4, inPlace, 0, 1 << 20);
        ASSERT_TRUE(sim.run(seed));
        sim.checkResult();
      }
}

TEST(DirectAllReducePlan, EveryRankGetsEveryElementReducedOnceFromEachRank) {
  for (int n = 1; n <= 12; ++n)
    for (bool inPlace : {false, true})
      for (uint64_t seed = 0; seed < 3; ++seed) {
        SCOPED_TRACE(testing::Message() << "n=" << n << " inPlace=" << inPlace << " seed=" << seed);
        Simulator sim(Simulator::Algo::Direct, n, 29, 2, inPlace, 0, 0);
        ASSERT_TRUE(sim.run(seed));
        sim.checkResult();
      }
}

TEST(DirectAllReducePlan, EveryRankReducesInRankOrder) {
  // Identical bits on every rank need the same operand order everywhere: x0, x1, x2, ...
  for (int n : {2, 3, 5}) {
    for (int me = 0; me < n; ++me) {
      Plan p;
      DirectAllReduceArgs a;
      a.count = 4;
      a.nranks = n;
      a.rank = me;
      planDirectAllReduce(a, p);
      int k = 1;
      for (const Step& s : p.steps) {
        if (s.kind != StepKind::Reduce) continue;
        auto rankOf = [&](const Loc& l) {
          if (l.buf == BufId::Input) return me;
          int slot = int(l.offset / 16);
          return slot < me ? slot : slot + 1;
        };
        if (k == 1) {
          EXPECT_EQ(rankOf(s.src), 0);
        }
        EXPECT_EQ(rankOf(s.src2), k) << "n=" << n << " rank " << me;
        ++k;
      }
      EXPECT_EQ(k, n);
    }
  }
}

TEST(RdAllReducePlan, AverageDividesOnceOnEveryRankThatReduces) {
  for (int n : {2, 3, 4, 6, 8, 13}) {
    for (int r = 0; r < n; ++r) {
      Plan p;
      RdAllReduceArgs a;
      a.count = 10;
      a.nranks = n;
      a.rank = r;
      a.average = true;
      planRdAllReduce(a, p);
      int dividing = 0;
      for (const Step& s : p.steps) dividing += s.kind == StepKind::Reduce && s.postDivisor == uint32_t(n);
      int pow2 = 1;
      while (pow2 * 2 <= n) pow2 *= 2;
      EXPECT_EQ(dividing, r < pow2 ? 1 : 0) << "n=" << n << " rank " << r;
    }
  }
}

TEST(RingAllReducePlan, ZeroCountIsAnEmptyPlan) {
  Plan p;
  RingAllReduceArgs a;
  a.count = 0;
  a.nranks = 4;
  planRingAllReduce(a, p);
  EXPECT_TRUE(p.steps.empty());
}

TEST(RingAllReducePlan, AverageDividesOnceAtTheLastReduction) {
  for (int n : {2, 3, 7}) {
    Plan p;
    RingAllReduceArgs a;
    a.count = 1000;
    a.nranks = n;
    a.pos = 1 % n;
    a.nextRank = (a.pos + 1) % n;
    a.prevRank = (a.pos + n - 1) % n;
    a.average = true;
    a.chunkBytes = 128;
    planRingAllReduce(a, p);
    // Per column, the last of the n-1 reductions divides by n; the others do not.
    uint64_t reductions = 0, dividing = 0;
    for (const Step& s : p.steps)
      if (s.kind == StepKind::Reduce) {
        ++reductions;
        if (s.postDivisor == uint32_t(n)) {
          ++dividing;
        } else {
          EXPECT_EQ(s.postDivisor, 1u);
        }
      }
    EXPECT_EQ(dividing * uint64_t(n - 1), reductions);
  }
}

TEST(RingAllReducePlan, SegmentsPartitionTheBuffer) {
  for (int n = 1; n <= 64; ++n)
    for (uint64_t count : {uint64_t(0), uint64_t(1), uint64_t(63), uint64_t(64), uint64_t(1000003)}) {
      uint64_t next = 0;
      for (int s = 0; s < n; ++s) {
        algo::Range r = ringSegment(count, 4, n, s);
        EXPECT_EQ(r.begin, next);
        EXPECT_LE(r.begin, r.end);
        next = r.end;
      }
      EXPECT_EQ(next, count);
    }
}


// ---- The other collectives' planners, through the same simulator ----

enum class Coll { AllGather, ReduceScatter, Broadcast, TreeBroadcast, Reduce, Gather, Scatter, AllToAll };

Cell from(int rank, uint64_t index) { return Cell{uint64_t(1) << rank, 0, index}; }

// Plans `coll` on every rank, runs it under the random scheduler (every hazard and
// deadlock check applies), then checks each rank's final buffer element by element.
void simulateColl(Coll coll, int n, uint64_t count, uint32_t ts, bool inPlace, int root, uint64_t chunk,
                  uint64_t scratch, uint64_t seed, bool fingerprint = false, const std::vector<int>& ring = {},
                  int channels = 1, const DeviceLowering* lowered = nullptr) {
  SCOPED_TRACE(testing::Message() << "coll=" << int(coll) << " n=" << n << " count=" << count << " ts=" << ts
                                  << " inPlace=" << inPlace << " root=" << root << " chunk=" << chunk
                                  << " seed=" << seed << " channels=" << channels);
  const uint64_t N = uint64_t(n), all = n == 64 ? ~uint64_t(0) : (uint64_t(1) << n) - 1;
  const size_t ranks = size_t(n);
  std::vector<RankSetup> setups(ranks);
  std::vector<size_t> counts(ranks, count), displs(ranks);
  for (int j = 0; j < n; ++j) displs[size_t(j)] = size_t(j) * count;
  for (int r = 0; r < n; ++r) {
    RankSetup& u = setups[size_t(r)];
    CollPlanArgs a;
    a.count = count;
    a.typeSize = ts;
    a.rank = r;
    a.nranks = n;
    a.root = root;
    a.chunkBytes = chunk;
    a.scratchBytes = scratch;
    a.ring = ring;
    const bool isRoot = r == root;
    // Input cells, output size, and (in place) where each buffer sits in the single one.
    auto own = [&](uint64_t cells, uint64_t base, uint64_t total) {
      u.input.assign(total, Cell{});
      for (uint64_t e = 0; e < cells; ++e) u.input[base + e] = from(r, e);
    };
    switch (coll) {
      case Coll::AllGather:
        a.inPlace = inPlace;
        if (inPlace) { own(count, uint64_t(r) * count, N * count); u.inBase = uint64_t(r) * count; }
        else own(count, 0, count);
        u.outputCells = N * count;
        planRingChannels(RingColl::AllGather, a, channels, u.plan);
        break;
      case Coll::ReduceScatter:
        a.inPlace = inPlace;
        own(N * count, 0, N * count);
        u.outBase = inPlace ? uint64_t(r) * count : 0;
        u.outputCells = count;
        planRingChannels(RingColl::ReduceScatter, a, channels, u.plan);
        break;
      case Coll::Broadcast:
      case Coll::TreeBroadcast:
        a.inPlace = inPlace;
        if (isRoot || !inPlace) own(count, 0, count);
        else u.input.assign(count, Cell{});
        u.outputCells = count;
        if (coll == Coll::Broadcast) planChainBroadcast(a, u.plan);
        else planTreeBroadcast(a, u.plan);
        break;
      case Coll::Reduce:
        a.inPlace = inPlace;
        own(count, 0, count);
        u.outputCells = count;
        planChainReduce(a, u.plan);
        break;
      case Coll::Gather:
        a.inPlace = inPlace && isRoot;
        if (a.inPlace) { own(count, uint64_t(r) * count, N * count); u.inBase = uint64_t(r) * count; }
        else own(count, 0, count);
        u.outputCells = N * count;
        planGather(a, u.plan);
        break;
      case Coll::Scatter:
        a.inPlace = inPlace && isRoot;
        own(N * count, 0, N * count);
        u.outBase = a.inPlace ? uint64_t(r) * count : 0;
        u.outputCells = count;
        planScatter(a, u.plan);
        break;
      case Coll::AllToAll: {
        own(N * count, 0, N * count);
        u.outputCells = N * count;
        AllToAllvArgs v;
        v.typeSize = ts;
        v.rank = r;
        v.nranks = n;
        v.sendCounts = v.recvCounts = counts;
        v.sendDispls = v.recvDispls = displs;
        planAllToAllv(v, u.plan);
        break;
      }
    }
    EXPECT_LE(u.plan.scratchBytes, scratch) << "plan needs more scratch than it was given";
  }
  // Inputs are rank r's elements; remember them to check that out-of-place inputs survive.
  std::vector<std::vector<Cell>> before(ranks);
  for (int r = 0; r < n; ++r) before[size_t(r)] = setups[size_t(r)].input;
  // Gather and scatter are in place on the root only, which one simulator-wide flag cannot
  // express: the caller runs them out of place here (the API tests cover their in-place form).
  const bool single = inPlace && coll != Coll::Gather && coll != Coll::Scatter && coll != Coll::AllToAll;
  Simulator sim(n, ts, single, std::move(setups));
  if (fingerprint) sim.prependFingerprints();
  if (lowered) sim.lowerForDevice(*lowered);
  ASSERT_TRUE(sim.run(seed));
  for (int r = 0; r < n; ++r) {
    const RankState& s = sim.rank(r);
    auto out = [&](uint64_t e) -> const Cell& { return single ? s.input[s.outBase + e] : s.output[e]; };
    auto expect = [&](uint64_t e, const Cell& want) {
      ASSERT_EQ(out(e), want) << "rank " << r << " output element " << e;
    };
    switch (coll) {
      case Coll::AllGather:
        for (int j = 0; j < n; ++j)
          for (uint64_t i = 0; i < count; ++i) expect(uint64_t(j) * count + i, from(j, i));
        break;
      case Coll::ReduceScatter:
        for (uint64_t i = 0; i < count; ++i) expect(i, Cell{all, uint32_t(n - 1), uint64_t(r) * count + i});
        break;
      case Coll::Broadcast:
      case Coll::TreeBroadcast:
        for (uint64_t i = 0; i < count; ++i) expect(i, from(root, i));
        break;
      case Coll::Reduce:
        if (r == root)
          for (uint64_t i = 0; i < count; ++i) expect(i, Cell{all, uint32_t(n - 1), i});
        break;
      case Coll::Gather:
        if (r == root)
          for (int j = 0; j < n; ++j)
            for (uint64_t i = 0; i < count; ++i) expect(uint64_t(j) * count + i, from(j, i));
        break;
      case Coll::Scatter:
        for (uint64_t i = 0; i < count; ++i) expect(i, from(root, uint64_t(r) * count + i));
        break;
      case Coll::AllToAll:
        for (int j = 0; j < n; ++j)
          for (uint64_t i = 0; i < count; ++i) expect(uint64_t(j) * count + i, from(j, uint64_t(r) * count + i));
        break;
    }
    if (!single) {
      for (size_t i = 0; i < s.input.size(); ++i)
        ASSERT_EQ(s.input[i], before[size_t(r)][i]) << "rank " << r << ": out-of-place input modified at " << i;
    }
  }
}

TEST(CollectivePlans, EveryRankEndsWithExactlyItsBlocks) {
  const Coll colls[] = {Coll::AllGather, Coll::ReduceScatter, Coll::Broadcast, Coll::TreeBroadcast,
                        Coll::Reduce,    Coll::Gather,        Coll::Scatter,   Coll::AllToAll};
  for (Coll c : colls)
    for (int n : {1, 2, 3, 4, 5, 8})
      for (uint64_t count : {uint64_t(1), uint64_t(7), uint64_t(100)})
        for (bool inPlace : {false, true}) {
          if (c == Coll::AllToAll && inPlace) continue;  // refused by the API
          if ((c == Coll::Gather || c == Coll::Scatter) && inPlace) continue;  // root-only layout: API tests
          for (int root : {0, n - 1})
            simulateColl(c, n, count, 4, inPlace, root, 64, 4096, uint64_t(n) * 7919 + count * 31 + uint64_t(root));
        }
}

// Ring all-gather and reduce-scatter on any ring order (the topology ring): every rank
// still ends with its own block (reduce-scatter) and every block in its place (all-gather).
TEST(CollectivePlans, RingAllGatherAndReduceScatterOnAnyRingOrder) {
  for (int n : {2, 3, 4, 5, 8})
    for (uint64_t seed = 0; seed < 3; ++seed) {
      std::vector<int> ring(static_cast<size_t>(n));
      for (int r = 0; r < n; ++r) ring[size_t(r)] = r;
      std::mt19937_64 rng(seed * 7 + uint64_t(n));
      std::shuffle(ring.begin(), ring.end(), rng);
      for (Coll c : {Coll::AllGather, Coll::ReduceScatter})
        for (bool inPlace : {false, true}) simulateColl(c, n, 37, 4, inPlace, 0, 32, 256, seed, false, ring);
    }
}

TEST(CollectivePlans, RingAllGatherAndReduceScatterSendAlongTheGivenRing) {
  const std::vector<int> ring{0, 2, 1, 3};  // rank 2 sits at position 1: it sends to 1, receives from 0
  for (bool gather : {true, false}) {
    CollPlanArgs a;
    a.count = 1000;
    a.rank = 2;
    a.nranks = 4;
    a.chunkBytes = 256;
    a.ring = ring;
    Plan p;
    if (gather) planRingAllGather(a, p);
    else planRingReduceScatter(a, p);
    int sends = 0, recvs = 0;
    for (const Step& s : p.steps) {
      if (s.kind == StepKind::Send) {
        EXPECT_EQ(s.peer, 1) << (gather ? "all-gather" : "reduce-scatter");
        ++sends;
      }
      if (s.kind == StepKind::Recv) {
        EXPECT_EQ(s.peer, 0) << (gather ? "all-gather" : "reduce-scatter");
        ++recvs;
      }
    }
    EXPECT_GT(sends, 0);
    EXPECT_EQ(sends, recvs);
  }
}

// ---- Channels: the ring collectives split over several channels and rings ----

TEST(ChannelPlans, PartsCoverTheVectorOnAlignedBoundaries) {
  for (uint32_t ts : {1u, 2u, 4u, 8u})
    for (int channels : {1, 2, 3, 4, 7})
      for (uint64_t count : {uint64_t(0), uint64_t(1), uint64_t(15), uint64_t(64), uint64_t(1000), uint64_t(1) << 20}) {
        uint64_t next = 0;
        for (int c = 0; c < channels; ++c) {
          const ElementRange r = channelRange(count, ts, channels, c);
          EXPECT_EQ(r.begin, next) << "parts are contiguous";
          EXPECT_LE(r.begin, r.end);
          if (r.end < count) {
            EXPECT_EQ(r.end * ts % 64, 0u) << "boundaries on 64-byte multiples";
          }
          next = r.end;
        }
        EXPECT_EQ(next, count) << "the parts cover the vector";
      }
}

TEST(ChannelPlans, OddChannelsRunTheRingReversed) {
  const std::vector<int> ring{0, 2, 1, 3};
  std::vector<int> out;
  channelRing(ring, 0, out);
  EXPECT_EQ(out, ring);
  channelRing(ring, 1, out);
  EXPECT_EQ(out, (std::vector<int>{3, 1, 2, 0}));
  channelRing(ring, 2, out);
  EXPECT_EQ(out, ring);
}

// Every rank's all-reduce, all-gather and reduce-scatter deliver every element exactly
// once when split over 2-4 channels (parts smaller than a 64-byte boundary and empty parts
// included), on shuffled rings, in place and not, with the fingerprint exchange in front.
// `lowered`: the plans lowered for device buffers as well (DeviceLowering's tests).
void ringCollectivesOverChannels(const DeviceLowering* lowered) {
  for (int channels : {2, 3, 4})
    for (int n : {2, 3, 5, 8})
      for (uint64_t count : {uint64_t(1), uint64_t(17), uint64_t(100), uint64_t(1000)})
        for (bool inPlace : {false, true}) {
          const uint64_t seed = uint64_t(channels) * 1000 + uint64_t(n) * 37 + count;
          std::vector<int> ring(static_cast<size_t>(n));
          for (int r = 0; r < n; ++r) ring[size_t(r)] = r;
          std::mt19937_64 rng(seed);
          std::shuffle(ring.begin(), ring.end(), rng);
          for (Coll c : {Coll::AllGather, Coll::ReduceScatter})
            simulateColl(c, n, count, 4, inPlace, 0, 64, 1024, seed, seed % 2, ring, channels, lowered);
          SCOPED_TRACE(testing::Message() << "all-reduce channels=" << channels << " n=" << n << " count=" << count
                                          << " inPlace=" << inPlace);
          std::vector<RankSetup> setups(static_cast<size_t>(n));
          for (int r = 0; r < n; ++r) {
            CollPlanArgs a;
            a.count = count;
            a.typeSize = 4;
            a.inPlace = inPlace;
            a.rank = r;
            a.nranks = n;
            a.chunkBytes = 64;
            a.scratchBytes = 1024;
            a.ring = ring;
            RankSetup& u = setups[size_t(r)];
            planRingChannels(RingColl::AllReduce, a, channels, u.plan);
            EXPECT_LE(u.plan.scratchBytes, a.scratchBytes);
            u.input.resize(count);
            for (uint64_t e = 0; e < count; ++e) u.input[e] = from(r, e);
            u.outputCells = count;
          }
          Simulator sim(n, 4, inPlace, std::move(setups));
          if (seed % 2) sim.prependFingerprints();
          if (lowered) sim.lowerForDevice(*lowered);
          ASSERT_TRUE(sim.run(seed));
          sim.checkResult();
        }
}

TEST(ChannelPlans, RingCollectivesOverSeveralChannelsDeliverEveryElementOnce) { ringCollectivesOverChannels(nullptr); }

TEST(ChannelPlans, EachChannelSendsAlongItsOwnRingWithItsOwnMessageIds) {
  // Rank 2 at position 1 of 0 2 1 3: channel 0 sends to rank 1, channel 1 (the reversed
  // ring 3 1 2 0) to rank 0.
  const std::vector<int> ring{0, 2, 1, 3};
  CollPlanArgs a;
  a.count = 4096;
  a.rank = 2;
  a.nranks = 4;
  a.chunkBytes = 1024;
  a.ring = ring;
  Plan p;
  planRingChannels(RingColl::AllGather, a, 2, p);
  std::map<int, std::set<uint32_t>> ids;
  for (const Step& s : p.steps) {
    if (s.kind != StepKind::Send) continue;
    EXPECT_EQ(s.peer, s.channel == 0 ? 1 : 0);
    EXPECT_EQ(s.msg % 2, s.channel) << "channel c's ids are c modulo the channel count";
    ids[s.channel].insert(s.msg);
  }
  EXPECT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids[0].size(), ids[1].size());
}

// Hierarchical all-reduce over hosts with uneven numbers of ranks: every rank ends with
// every contribution exactly once, leaders through recursive doubling, the double binary
// tree or the ring, with and without the fingerprint exchange in front.
void simulateHier(const std::vector<int>& hostOf, uint64_t count, bool inPlace, LeaderAlgo leaders, uint64_t seed,
                  bool fingerprint, const std::vector<int>& ring = {}, const DeviceLowering* lowered = nullptr) {
  const int n = int(hostOf.size());
  SCOPED_TRACE(testing::Message() << "n=" << n << " count=" << count << " inPlace=" << inPlace
                                  << " leaders=" << int(leaders) << " seed=" << seed << " fp=" << fingerprint);
  std::vector<RankSetup> setups(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    RankSetup& u = setups[size_t(r)];
    HierAllReduceArgs h;
    h.base.count = count;
    h.base.typeSize = 4;
    h.base.inPlace = inPlace;
    h.base.rank = r;
    h.base.nranks = n;
    h.base.chunkBytes = 64;
    h.base.scratchBytes = 1024;
    h.hostOf = hostOf;
    h.base.ring = ring;
    h.leaders = leaders;
    h.localChunkBytes = 32;
    planHierAllReduce(h, u.plan);
    u.input.resize(count);
    for (uint64_t e = 0; e < count; ++e) u.input[e] = from(r, e);
    u.outputCells = count;
  }
  Simulator sim(n, 4, inPlace, std::move(setups));
  if (fingerprint) sim.prependFingerprints();
  if (lowered) sim.lowerForDevice(*lowered);
  ASSERT_TRUE(sim.run(seed));
  sim.checkResult();
}

constexpr LeaderAlgo kLeaderAlgos[] = {LeaderAlgo::RecursiveDoubling, LeaderAlgo::Tree, LeaderAlgo::Ring};

TEST(HierAllReducePlan, EveryRankGetsEveryContributionOnceOverUnevenHosts) {
  const std::vector<std::vector<int>> layouts = {
      {0},                       // one rank
      {0, 1, 2, 3},              // one rank per host
      {0, 0, 0, 0},              // one host
      {0, 0, 1, 1},              // 2 x 2
      {0, 1, 0, 1, 0, 1},        // interleaved ranks
      {0, 0, 0, 1, 2, 2},        // 3, 1, 2
      {2, 2, 0, 1, 1, 1, 0, 2},  // hosts numbered out of rank order
  };
  for (const auto& hostOf : layouts)
    for (uint64_t count : {uint64_t(1), uint64_t(5), uint64_t(100)})
      for (bool inPlace : {false, true})
        for (LeaderAlgo leaders : kLeaderAlgos)
          for (uint64_t seed = 0; seed < 2; ++seed) simulateHier(hostOf, count, inPlace, leaders, seed, seed == 1);
  // Leaders taken in a ring's order (the topology ring's), any order.
  const std::vector<int> hostOf{0, 1, 2, 0, 1, 2, 3};
  for (uint64_t seed = 0; seed < 4; ++seed) {
    std::vector<int> ring{0, 1, 2, 3, 4, 5, 6};
    std::mt19937_64 rng(seed);
    std::shuffle(ring.begin(), ring.end(), rng);
    for (LeaderAlgo leaders : kLeaderAlgos) simulateHier(hostOf, 50, seed % 2, leaders, seed, false, ring);
  }
}

// Recursive doubling over a ring order (the topology ring): still every contribution once,
// and the first exchange pairs ring neighbours (positions 2i and 2i+1), so on a locality
// ring it stays inside a host or a leaf.
TEST(RdAllReducePlan, PartnersAreTakenInRingPositions) {
  for (int n = 2; n <= 9; ++n)
    for (uint64_t seed = 0; seed < 3; ++seed) {
      std::vector<int> ring(static_cast<size_t>(n));
      for (int p = 0; p < n; ++p) ring[size_t(p)] = p;
      std::mt19937_64 rng(seed * 13 + uint64_t(n));
      std::shuffle(ring.begin(), ring.end(), rng);
      std::vector<RankSetup> setups(static_cast<size_t>(n));
      for (int r = 0; r < n; ++r) {
        CollPlanArgs c;
        c.count = 9;
        c.rank = r;
        c.nranks = n;
        c.inPlace = seed % 2;
        c.ring = ring;
        RankSetup& u = setups[size_t(r)];
        planRdAllReduce(c, u.plan);
        u.input.resize(9);
        for (uint64_t e = 0; e < 9; ++e) u.input[e] = from(r, e);
        u.outputCells = 9;
        const int pos = int(std::find(ring.begin(), ring.end(), r) - ring.begin());
        int p2 = 1;
        while (p2 * 2 <= n) p2 *= 2;
        if (pos < p2 && n >= 2 && (n & (n - 1)) == 0) {
          const Step* first = nullptr;
          for (const Step& st : u.plan.steps)
            if (st.kind == StepKind::Send && !first) first = &st;
          ASSERT_NE(first, nullptr);
          EXPECT_EQ(first->peer, ring[size_t(pos ^ 1)]) << "n=" << n << " rank " << r;
        }
      }
      Simulator sim(n, 4, seed % 2, std::move(setups));
      ASSERT_TRUE(sim.run(seed));
      sim.checkResult();
    }
}

// Both trees of the double binary tree, for every size up to 40: each is a tree (one root,
// every other position has exactly one parent that lists it as a child, at most two
// children, no cycle), its depth is at most ceil(log2 n) + 1, and no position other than
// a root is interior in both trees (tree 1 is built so that tree 0's leaves carry it).
TEST(DoubleBinaryTree, TwoComplementaryShallowTrees) {
  for (int n = 1; n <= 40; ++n) {
    SCOPED_TRACE(testing::Message() << "n=" << n);
    int log2n = 0;
    while ((1 << log2n) < n) ++log2n;
    std::vector<std::vector<bool>> interior(2, std::vector<bool>(size_t(n), false));
    for (int t = 0; t < 2; ++t) {
      int roots = 0;
      for (int p = 0; p < n; ++p) {
        const TreeLinks l = doubleBinaryTree(n, p, t);
        ASSERT_LE(l.nchildren, 2);
        interior[size_t(t)][size_t(p)] = l.nchildren > 0;
        if (l.parent < 0) {
          ++roots;
        } else {
          ASSERT_LT(l.parent, n);
          const TreeLinks up = doubleBinaryTree(n, l.parent, t);
          EXPECT_TRUE(std::count(up.children, up.children + up.nchildren, p) == 1) << p << " not a child of its parent";
        }
        for (int i = 0; i < l.nchildren; ++i) EXPECT_EQ(doubleBinaryTree(n, l.children[i], t).parent, p);
        int depth = 0;  // walking up reaches the root within the bound (no cycle)
        for (int q = p; doubleBinaryTree(n, q, t).parent >= 0 && depth <= n; q = doubleBinaryTree(n, q, t).parent) ++depth;
        EXPECT_LE(depth, log2n + 1) << "position " << p << " of tree " << t;
      }
      EXPECT_EQ(roots, 1);
    }
    for (int p = 0; p < n; ++p) {
      const bool root = doubleBinaryTree(n, p, 0).parent < 0 || doubleBinaryTree(n, p, 1).parent < 0;
      EXPECT_TRUE(root || !(interior[0][size_t(p)] && interior[1][size_t(p)])) << "position " << p;
    }
  }
}

// The double binary tree all-reduce: every rank ends with every contribution once, over
// any size, chunking (the software pipeline and slot reuse included), ring order, in
// place or not, with the fingerprint exchange in front; an average divides once, at each
// tree's root.
void simulateTree(int n, uint64_t count, bool inPlace, uint64_t chunk, uint64_t scratch, uint64_t seed,
                  bool fingerprint, const std::vector<int>& ring = {}, const DeviceLowering* lowered = nullptr) {
  SCOPED_TRACE(testing::Message() << "n=" << n << " count=" << count << " inPlace=" << inPlace << " chunk=" << chunk
                                  << " scratch=" << scratch << " seed=" << seed << " ring=" << ring.size());
  std::vector<RankSetup> setups(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    RankSetup& u = setups[size_t(r)];
    CollPlanArgs c;
    c.count = count;
    c.typeSize = 4;
    c.inPlace = inPlace;
    c.rank = r;
    c.nranks = n;
    c.chunkBytes = chunk;
    c.scratchBytes = scratch;
    c.ring = ring;
    planTreeAllReduce(c, u.plan);
    u.input.resize(count);
    for (uint64_t e = 0; e < count; ++e) u.input[e] = from(r, e);
    u.outputCells = count;
  }
  Simulator sim(n, 4, inPlace, std::move(setups));
  if (fingerprint) sim.prependFingerprints();
  if (lowered) sim.lowerForDevice(*lowered);
  ASSERT_TRUE(sim.run(seed));
  sim.checkResult();
}

TEST(TreeAllReducePlan, EveryRankGetsEveryContributionOnce) {
  for (int n = 1; n <= 13; ++n)
    for (uint64_t count : {uint64_t(1), uint64_t(2), uint64_t(7), uint64_t(100)})
      for (bool inPlace : {false, true})
        for (uint64_t seed = 0; seed < 2; ++seed) simulateTree(n, count, inPlace, 16, 64, seed * 7 + uint64_t(n), seed == 1);
  // Long pipelines: many columns, few slots.
  for (int n : {2, 5, 8})
    for (uint64_t seed = 0; seed < 3; ++seed) simulateTree(n, 333, seed % 2, 8, 24, seed, false);
  // Any ring order.
  for (uint64_t seed = 0; seed < 4; ++seed) {
    std::vector<int> ring{0, 1, 2, 3, 4, 5, 6};
    std::mt19937_64 rng(seed);
    std::shuffle(ring.begin(), ring.end(), rng);
    simulateTree(7, 61, seed % 2, 32, 256, seed, false, ring);
  }
}

TEST(TreeAllReducePlan, AverageDividesOnceAtEachTreesRoot) {
  for (int n : {2, 3, 6, 9}) {
    int divisions = 0;
    for (int r = 0; r < n; ++r) {
      CollPlanArgs c;
      c.count = 10;
      c.average = true;
      c.rank = r;
      c.nranks = n;
      c.chunkBytes = 1 << 20;
      Plan p;
      planTreeAllReduce(c, p);
      for (const Step& s : p.steps)
        if (s.postDivisor != 1) {
          EXPECT_EQ(s.postDivisor, uint32_t(n));
          ++divisions;
        }
    }
    EXPECT_EQ(divisions, 2) << "n=" << n << ": one division per half";
  }
}

// The binomial tree over every size up to 17 and every root: each rank has exactly one
// parent, so every rank ends with the root's vector (and none receives it twice).
TEST(CollectivePlans, TreeBroadcastReachesEveryRankOnceForAnySizeAndRoot) {
  for (int n = 2; n <= 17; ++n)
    for (int root = 0; root < n; root += 3)
      simulateColl(Coll::TreeBroadcast, n, 37, 4, root % 2 == 0, root, 32, 4096, uint64_t(n * 100 + root));
}

TEST(CollectivePlans, LongPipelinesReuseScratchSlotsSafely) {
  // 8-byte chunks and two slots force many columns and slot reuse in reduce-scatter and
  // reduce; every schedule the random scheduler picks must stay hazard-free.
  for (Coll c : {Coll::ReduceScatter, Coll::Reduce, Coll::AllGather, Coll::Broadcast, Coll::TreeBroadcast})
    for (int n : {2, 3, 5})
      for (bool inPlace : {false, true})
        for (uint64_t seed = 0; seed < 4; ++seed) simulateColl(c, n, 61, 2, inPlace, n / 2, 8, 16, seed);
}

constexpr FingerprintLocs kLocs{{BufId::Absolute, 0x1000},
                                {BufId::Absolute, 0x2000},
                                {BufId::Absolute, 0x4000},
                                {BufId::Absolute, 0x8000},
                                32};

TEST(Fingerprint, StepsPrecedeAndDoNotDelayThePlan) {
  Plan p;
  CollPlanArgs a;
  a.count = 100000;  // too large to be carried
  a.nranks = 5;
  a.rank = 1;
  planRingAllGather(a, p);
  const Plan original = p;
  EXPECT_EQ(prependFingerprint(p, 1, 5, 0xffff, kLocs), 0u);
  ASSERT_EQ(fingerprintRounds(5), 3u);
  const uint32_t added = 9;
  ASSERT_EQ(p.steps.size(), original.steps.size() + added);
  // Round k: send to rank + 2^k, receive from rank - 2^k, check it.
  const int to[] = {2, 3, 0}, from[] = {0, 4, 2};
  for (uint32_t k = 0; k < 3; ++k) {
    const Step &send = p.steps[3 * k], &recv = p.steps[fingerprintRecvStep(k)], &check = p.steps[fingerprintCheckStep(k)];
    EXPECT_EQ(send.kind, StepKind::Send);
    EXPECT_EQ(send.peer, to[k]);
    EXPECT_EQ(send.msg, 0xffffu - k);
    EXPECT_EQ(send.bytes, 32u);
    EXPECT_EQ(send.src.offset, 0x1000u) << "rounds send the fingerprint itself when nothing is carried";
    EXPECT_EQ(send.deps[0], k == 0 ? kNoDep : 3 * k - 1) << "round k's send waits for round k-1's check";
    EXPECT_EQ(recv.kind, StepKind::Recv);
    EXPECT_EQ(recv.peer, from[k]);
    EXPECT_EQ(recv.dst.offset, k == 0 ? 0x4000u : 0x8000u + 32 * (k - 1));
    EXPECT_EQ(recv.upTo, k == 0) << "round 0's message may carry data";
    EXPECT_EQ(recv.bytes, k == 0 ? 32 + kMaxCarriedBytes : 32u);
    EXPECT_EQ(check.kind, StepKind::Check);
    EXPECT_EQ(check.peer, from[k]);
    EXPECT_EQ(check.src.offset, recv.dst.offset);
    EXPECT_EQ(check.deps[0], 3 * k + 1);
    EXPECT_EQ(check.deps[1], k == 0 ? kNoDep : 3 * k - 1) << "checks are chained";
  }
  EXPECT_EQ(p.carriedRecv, kNoDep);
  for (size_t i = 0; i < original.steps.size(); ++i) {
    EXPECT_EQ(p.steps[i + added].kind, original.steps[i].kind);
    for (int k = 0; k < 2; ++k) {
      uint32_t d = original.steps[i].deps[k];
      EXPECT_EQ(p.steps[i + added].deps[k], d == kNoDep ? kNoDep : d + added) << "step " << i;
    }
  }
  EXPECT_EQ(fingerprintRounds(1), 0u);
  EXPECT_EQ(fingerprintRounds(2), 1u);
  EXPECT_EQ(fingerprintRounds(8), 3u);
  EXPECT_EQ(fingerprintRounds(9), 4u);
}

// Two ranks, out-of-place recursive doubling of 8 bytes: the exchange's send depends on
// the copy of the input into the output, a local step, so round 0 carries it.
TEST(Fingerprint, RoundZeroCarriesASmallFirstMessageThatWaitsForNoPeer) {
  Plan p;
  RdAllReduceArgs a;
  a.count = 2;
  a.typeSize = 4;
  a.nranks = 2;
  a.rank = 0;
  planRdAllReduce(a, p);
  const Plan original = p;
  uint32_t send = kNoDep, recv = kNoDep;
  for (uint32_t i = 0; i < original.steps.size(); ++i) {
    if (original.steps[i].kind == StepKind::Send) send = i;
    if (original.steps[i].kind == StepKind::Recv) recv = i;
  }
  ASSERT_NE(send, kNoDep);
  ASSERT_NE(original.steps[send].deps[0], kNoDep) << "the send waits for the copy into the output";
  EXPECT_EQ(prependFingerprint(p, 0, 2, 0xffff, kLocs), 8u);
  const uint32_t added = 3;
  ASSERT_EQ(p.steps.size(), original.steps.size() + added + 1);
  EXPECT_EQ(p.steps[0].kind, StepKind::Copy);
  EXPECT_EQ(p.steps[0].bytes, 0u) << "round 0's own send slot is empty";
  // The data send became the copy into round 0's message, which the next step sends.
  const Step &copy = p.steps[send + added], &lead = p.steps[send + added + 1];
  EXPECT_EQ(copy.kind, StepKind::Copy);
  EXPECT_EQ(copy.src.buf, original.steps[send].src.buf);
  EXPECT_EQ(copy.dst.offset, 0x2000u + 32);
  EXPECT_EQ(copy.bytes, 8u);
  EXPECT_EQ(copy.deps[0], original.steps[send].deps[0] + added);
  EXPECT_EQ(lead.kind, StepKind::Send);
  EXPECT_EQ(lead.peer, 1);
  EXPECT_EQ(lead.msg, 0xffffu);
  EXPECT_EQ(lead.src.offset, 0x2000u);
  EXPECT_EQ(lead.bytes, 40u);
  EXPECT_EQ(lead.deps[0], send + added);
  // The data receive may be served from round 0's message.
  const uint32_t carried = recv + added + (recv > send ? 1 : 0);
  EXPECT_EQ(p.carriedRecv, carried);
  EXPECT_EQ(p.steps[carried].kind, StepKind::RecvCarried);
  EXPECT_EQ(p.steps[carried].src.offset, 0x4000u + 32);
  EXPECT_EQ(p.steps[carried].bytes, 8u);
  // Dependencies past the inserted send moved by one more.
  for (uint32_t i = 0; i < original.steps.size(); ++i) {
    const uint32_t at = i + added + (i > send ? 1 : 0);
    for (int k = 0; k < 2; ++k) {
      const uint32_t d = original.steps[i].deps[k];
      EXPECT_EQ(p.steps[at].deps[k], d == kNoDep ? kNoDep : d + added + (d > send ? 1 : 0)) << "step " << i;
    }
  }
}

// A chain broadcast's middle rank forwards what it receives: round 0 must not wait for
// that, so it goes alone; the receiver cannot know, and is ready for either.
TEST(Fingerprint, AMessageThatWaitsForAPeerOrIsLargeIsNotCarried) {
  CollPlanArgs a;
  a.count = 4;
  a.typeSize = 4;
  a.nranks = 3;
  a.root = 0;
  a.chunkBytes = 1 << 20;
  for (int r = 0; r < 3; ++r) {
    Plan p;
    a.rank = r;
    planChainBroadcast(a, p);
    const uint64_t carried = prependFingerprint(p, r, 3, 0xffff, kLocs);
    EXPECT_EQ(carried, r == 0 ? 16u : 0u) << "rank " << r;
    EXPECT_EQ(p.carriedRecv != kNoDep, r != 0) << "rank " << r << " receives from rank " << (r + 2) % 3;
  }
  Plan big;
  a.count = kMaxCarriedBytes / 4 + 1;
  a.rank = 0;
  planChainBroadcast(a, big);
  EXPECT_EQ(prependFingerprint(big, 0, 3, 0xffff, kLocs), 0u);
}

// Every planner, small and large, in and out of place, with the exchange in front and
// transfers completing in random orders: results as without it, no hazard, no deadlock.
TEST(Fingerprint, EveryCollectiveStillDeliversWithTheExchangeInFront) {
  const Coll colls[] = {Coll::AllGather, Coll::ReduceScatter, Coll::Broadcast, Coll::TreeBroadcast,
                        Coll::Reduce,    Coll::Gather,        Coll::Scatter,   Coll::AllToAll};
  for (Coll c : colls)
    for (int n : {2, 3, 5})
      for (uint64_t count : {uint64_t(1), uint64_t(100), uint64_t(1500)})
        for (bool inPlace : {false, true}) {
          if (inPlace && (c == Coll::AllToAll || c == Coll::Gather || c == Coll::Scatter)) continue;
          for (uint64_t seed = 0; seed < 2; ++seed)
            simulateColl(c, n, count, 4, inPlace, n - 1, 256, 1 << 16, seed * 31 + uint64_t(n), true);
        }
  for (auto algo : {Simulator::Algo::Ring, Simulator::Algo::RecursiveDoubling, Simulator::Algo::Direct})
    for (int n : {2, 3, 4, 7})
      for (bool inPlace : {false, true})
        for (uint64_t seed = 0; seed < 3; ++seed) {
          SCOPED_TRACE(testing::Message() << "algo=" << int(algo) << " n=" << n << " inPlace=" << inPlace);
          Simulator sim(algo, n, 37, 4, inPlace, 64, 1 << 16);
          sim.prependFingerprints();
          ASSERT_TRUE(sim.run(seed));
          sim.checkResult();
        }
}

// ---- plans lowered for device buffers (device_lowering.h) ----

uint64_t alignUp256(uint64_t v) { return (v + 255) / 256 * 256; }

bool onDevice(const Loc& l, const DeviceLowering& d) {
  return (l.buf == BufId::Input && d.inputOnDevice) || (l.buf == BufId::Output && d.outputOnDevice);
}

// Every collective, its buffers on the device in every combination (in place: both), with
// and without the fingerprint exchange in front, one slot per direction (every message
// waits for the one before it in its slot) or four: each rank still ends with exactly its
// blocks, and the simulator's hazard checks hold with the device steps in flight while
// transfers and other steps run.
TEST(DeviceLowering, EveryCollectiveDeliversWithItsBuffersOnTheDevice) {
  const Coll colls[] = {Coll::AllGather, Coll::ReduceScatter, Coll::Broadcast, Coll::TreeBroadcast,
                        Coll::Reduce,    Coll::Gather,        Coll::Scatter,   Coll::AllToAll};
  const DeviceLowering ways[] = {{true, true, 1}, {true, true, 4}, {true, false, 2}, {false, true, 2}};
  uint64_t seed = 0;
  for (Coll c : colls)
    for (int n : {2, 3, 5})
      for (uint64_t count : {uint64_t(1), uint64_t(100), uint64_t(1500)})
        for (bool inPlace : {false, true}) {
          if (inPlace && (c == Coll::AllToAll || c == Coll::Gather || c == Coll::Scatter)) continue;
          for (const DeviceLowering& d : ways) {
            if (inPlace && d.inputOnDevice != d.outputOnDevice) continue;  // one buffer
            SCOPED_TRACE(testing::Message() << "lowered in=" << d.inputOnDevice << " out=" << d.outputOnDevice
                                            << " slots=" << d.slots);
            ++seed;
            simulateColl(c, n, count, 4, inPlace, n - 1, 256, 1 << 16, seed, seed % 2 == 0, {}, 1, &d);
          }
        }
}

TEST(DeviceLowering, AllReducesDeliverWithTheirBuffersOnTheDevice) {
  for (auto algo : {Simulator::Algo::Ring, Simulator::Algo::RecursiveDoubling, Simulator::Algo::Direct})
    for (int n : {2, 3, 5, 8})
      for (bool inPlace : {false, true})
        for (uint32_t slots : {1u, 4u})
          for (uint64_t seed = 0; seed < 2; ++seed) {
            SCOPED_TRACE(testing::Message() << "algo=" << int(algo) << " n=" << n << " inPlace=" << inPlace
                                            << " slots=" << slots);
            // 16-byte columns and two in-place scratch slots: long pipelines, every slot reused.
            Simulator sim(algo, n, 777, 4, inPlace, 16, algo == Simulator::Algo::Ring ? 32 : 1 << 16);
            sim.prependFingerprints();
            sim.lowerForDevice({true, true, slots});
            ASSERT_TRUE(sim.run(seed));
            sim.checkResult();
          }
}

// What the engine relies on: no host step names device memory, staging holds every
// Staging location, and a plan without device buffers is left as it was.
TEST(DeviceLowering, NoHostStepTouchesDeviceMemory) {
  for (bool in : {false, true})
    for (bool out : {false, true})
      for (bool inPlace : {false, true}) {
        if (inPlace && in != out) continue;
        RingAllReduceArgs a;
        a.count = 1000;
        a.typeSize = 4;
        a.inPlace = inPlace;
        a.nranks = 4;
        a.pos = 1;
        a.nextRank = 2;
        a.prevRank = 0;
        a.chunkBytes = 256;
        a.scratchBytes = 1024;
        Plan plan;
        planRingAllReduce(a, plan);
        const Plan host = plan;
        const DeviceLowering d{in, out, 3};
        lowerForDevice(plan, d);
        if (!in && !out) {
          ASSERT_EQ(plan.steps.size(), host.steps.size());
          EXPECT_EQ(plan.stagingBytes, 0u);
          continue;
        }
        SCOPED_TRACE(testing::Message() << "in=" << in << " out=" << out << " inPlace=" << inPlace);
        EXPECT_GT(plan.steps.size(), host.steps.size());
        for (const Step& s : plan.steps) {
          const bool device = s.kind == StepKind::DeviceCopy || s.kind == StepKind::DeviceReduce;
          // The locations each kind reads or writes (the others are unused).
          std::vector<const Loc*> used{&s.src, &s.dst};
          if (s.kind == StepKind::Send) used = {&s.src};
          if (s.kind == StepKind::Recv) used = {&s.dst};
          if (s.kind == StepKind::Reduce || s.kind == StepKind::DeviceReduce) used.push_back(&s.src2);
          for (const Loc* l : used) {
            if (!device) {
              EXPECT_FALSE(onDevice(*l, d)) << "a host step names device memory";
            }
            EXPECT_NE(l->buf, BufId::Scratch) << "scratch moves into staging";
            if (l->buf == BufId::Staging && s.bytes) {
              EXPECT_LE(l->offset + s.bytes, plan.stagingBytes);
            }
          }
        }
      }
}

// A ring all-gather forwards every block it receives: lowered, each forward is sent from
// the receive slot the block landed in, so the only copies out of the device are those of
// the rank's own block, one per column.
TEST(DeviceLowering, AForwardedChunkIsSentFromItsReceiveSlot) {
  for (int n : {3, 5}) {
    CollPlanArgs a;
    a.count = 1000;
    a.typeSize = 4;
    a.rank = 1;
    a.nranks = n;
    a.chunkBytes = 1024;
    a.scratchBytes = 1 << 16;
    Plan plan;
    planRingAllGather(a, plan);
    const uint64_t columns = (4000 + 1023) / 1024;
    lowerForDevice(plan, {true, true, 4});
    uint64_t outOfDevice = 0, fromSlots = 0;
    for (const Step& s : plan.steps) {
      outOfDevice += s.kind == StepKind::DeviceCopy && s.dst.buf == BufId::Staging;
      fromSlots += s.kind == StepKind::Send && s.src.buf == BufId::Staging;
    }
    EXPECT_EQ(outOfDevice, columns) << "n=" << n;
    EXPECT_EQ(fromSlots, columns * uint64_t(n - 1)) << "n=" << n;
  }
}

// Slots are as large as the plan's largest message; a budget takes slots away (down to
// two per direction) rather than let whole-block messages multiply the pinned memory.
TEST(DeviceLowering, ASlotBudgetLeavesTwoSlotsPerDirectionAtLeast) {
  CollPlanArgs a;
  a.count = 1 << 20;  // 4 MiB blocks
  a.typeSize = 4;
  a.rank = 0;
  a.nranks = 3;
  a.chunkBytes = uint64_t(4) << 20;
  a.scratchBytes = 1 << 16;
  for (uint64_t budget : {uint64_t(0), uint64_t(24) << 20, uint64_t(1) << 20}) {
    Plan plan;
    planRingAllGather(a, plan);
    lowerForDevice(plan, {true, true, 4, budget});
    const uint64_t slots = budget == 0 ? 4 : budget == (uint64_t(24) << 20) ? 3 : 2;
    EXPECT_EQ(plan.stagingBytes, alignUp256(plan.scratchBytes) + 2 * slots * (uint64_t(4) << 20)) << budget;
  }
}

// The plans chosen across hosts and over several rails, lowered: the hierarchical
// all-reduce (every leader algorithm, uneven hosts), the double binary tree, and the ring
// collectives split over 2-4 channels (odd channels reversed, so a rank's sends go to both
// neighbours through the same slots).
TEST(DeviceLowering, TreeHierarchicalAndChannelPlansDeliverWithTheirBuffersOnTheDevice) {
  for (uint32_t slots : {1u, 2u, 4u}) {
    const DeviceLowering d{true, true, slots};
    SCOPED_TRACE(testing::Message() << "slots=" << slots);
    for (const std::vector<int>& hostOf : std::vector<std::vector<int>>{{0, 0, 1, 1}, {0, 0, 0, 1, 2, 2}, {2, 2, 0, 1, 1, 1, 0, 2}})
      for (bool inPlace : {false, true})
        for (LeaderAlgo leaders : kLeaderAlgos) simulateHier(hostOf, 100, inPlace, leaders, slots, slots == 2, {}, &d);
    for (int n : {2, 3, 5, 8, 13})
      for (bool inPlace : {false, true}) simulateTree(n, 333, inPlace, 16, 64, uint64_t(n) + slots, slots == 2, {}, &d);
    ringCollectivesOverChannels(&d);
  }
}

// ---- point-to-point messages in pieces (p2p.h), lowered with slots per peer ----

std::vector<uint64_t> pieceLengths(uint64_t bytes, uint64_t chunk) {
  const P2pPieces p = p2pPieces(bytes, chunk);
  std::vector<uint64_t> lengths(p.count - 1, chunk);
  lengths.push_back(p.last);
  return lengths;
}

// The pieces add up to the message, every piece but the last is exactly a chunk and the
// last is shorter; so where a send and its receive disagree on the length, their pieces
// first differ at one both sides post (whose receive then fails), never with one side
// done and the other waiting for a piece that is never posted.
TEST(P2pPieces, DifferentLengthsDifferInAPieceBothSidesPost) {
  for (uint64_t chunk : {0, 1, 4, 7, 16})
    for (uint64_t s = 0; s <= 70; ++s) {
      const std::vector<uint64_t> a = pieceLengths(s, chunk);
      SCOPED_TRACE(testing::Message() << "chunk=" << chunk << " bytes=" << s);
      EXPECT_EQ(std::accumulate(a.begin(), a.end(), uint64_t(0)), s);
      if (chunk == 0) {
        EXPECT_EQ(a.size(), 1u) << "chunk 0: whole messages";
      }
      for (size_t k = 0; k + 1 < a.size(); ++k) EXPECT_EQ(a[k], chunk);
      if (chunk) {
        EXPECT_LT(a.back(), chunk);
      }
      for (uint64_t r = 0; r <= 70; ++r) {
        if (r == s) continue;
        const std::vector<uint64_t> b = pieceLengths(r, chunk);
        size_t k = 0;
        while (k < a.size() && k < b.size() && a[k] == b[k]) ++k;
        EXPECT_TRUE(k < a.size() && k < b.size()) << "a receive of " << r << " bytes ends early or waits forever";
      }
    }
}

TEST(P2pPieces, AWholeNumberOfChunksEndsWithAnEmptyPieceThatTravels) {
  static std::byte buf[3 * 4096];
  Plan plan;
  uint32_t msg = 7;
  P2pPlanner planner;
  planner.add(true, 3, 3 * 4096, absolute(buf), 4096, &msg);
  planner.emit(plan);
  ASSERT_EQ(plan.steps.size(), 4u);
  EXPECT_EQ(msg, 11u) << "each piece takes a message number";
  for (uint32_t k = 0; k < 4; ++k) {
    const Step& st = plan.steps[k];
    EXPECT_EQ(st.kind, StepKind::Send);
    EXPECT_EQ(st.peer, 3);
    EXPECT_EQ(st.msg, 7 + k);
    EXPECT_TRUE(st.travelsEmpty);
    EXPECT_EQ(st.bytes, k < 3 ? 4096u : 0u);
    if (k < 3) {
      EXPECT_EQ(st.src.offset, uint64_t(uintptr_t(buf)) + k * 4096);
    }
  }
  EXPECT_EQ(plan.steps[3].src.buf, BufId::Absolute) << "an empty piece names no device memory";
  EXPECT_EQ(plan.steps[3].src.offset, 0u);
  Plan whole;
  planner.add(false, 1, 3 * 4096, userAddress(buf, true), 0, &msg);
  planner.emit(whole);
  ASSERT_EQ(whole.steps.size(), 1u);
  EXPECT_EQ(whole.steps[0].dst.buf, BufId::Device);
}

// Random groups of point-to-point calls among n ranks, as prepareP2p plans them: every
// rank makes its sends and receives in an order of its own (NCCL matches a pair's
// messages by their order on each side only), each buffer on the device or not, sends to
// self among them (a copy), lengths of 0 to 3.5 chunks with whole numbers of chunks
// common. Lowered with slots per peer, every message arrives whole, no host step names
// device memory, and the simulator's hazard and deadlock checks hold with one slot per
// direction, two, four, and a budget that leaves two.
void simulateP2p(int n, uint64_t seed, DeviceLowering d) {
  constexpr uint32_t ts = 4;
  constexpr uint64_t chunkCells = 16, chunk = chunkCells * ts;
  std::mt19937_64 rng(seed);
  struct Msg {
    int src, dst;
    uint64_t cells;
    bool srcDevice, dstDevice;
    uint64_t srcAt = 0, dstAt = 0;  // cells into the memory the buffer is in
  };
  std::vector<Msg> msgs;
  std::vector<uint64_t> hostCells(size_t(n), 0), deviceCells(size_t(n), 0);
  const int count = 3 * n + int(rng() % 8);
  for (int i = 0; i < count; ++i) {
    Msg m{int(rng() % uint64_t(n)), int(rng() % uint64_t(n)), rng() % 57, rng() % 2 == 0, rng() % 2 == 0};
    if (rng() % 4 == 0) m.cells = chunkCells * (rng() % 4);
    m.srcAt = (m.srcDevice ? deviceCells : hostCells)[size_t(m.src)];
    (m.srcDevice ? deviceCells : hostCells)[size_t(m.src)] += m.cells;
    m.dstAt = (m.dstDevice ? deviceCells : hostCells)[size_t(m.dst)];
    (m.dstDevice ? deviceCells : hostCells)[size_t(m.dst)] += m.cells;
    msgs.push_back(m);
  }
  auto initial = [](int r, bool device, uint64_t k) { return Cell{uint64_t(r + 1), device ? 1u : 0u, k}; };
  auto loc = [](bool device, uint64_t at) {
    return Loc{device ? BufId::Device : BufId::Absolute, at * ts};
  };
  std::vector<RankSetup> setups(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    // This rank's calls: (message, is a send), shuffled, then each (peer, direction)'s
    // messages put back in their order into the places that group holds.
    std::vector<std::pair<size_t, bool>> calls;
    for (size_t i = 0; i < msgs.size(); ++i) {
      if (msgs[i].src == r) calls.push_back({i, true});
      if (msgs[i].dst == r && msgs[i].src != r) calls.push_back({i, false});
    }
    std::shuffle(calls.begin(), calls.end(), rng);
    std::map<std::pair<int, bool>, std::vector<size_t>> order;  // (peer, send) -> messages in order
    for (size_t i = 0; i < msgs.size(); ++i) {
      if (msgs[i].src == r) order[{msgs[i].dst, true}].push_back(i);
      if (msgs[i].dst == r && msgs[i].src != r) order[{msgs[i].src, false}].push_back(i);
    }
    std::map<std::pair<int, bool>, size_t> next;
    for (auto& [i, send] : calls) {
      const std::pair<int, bool> key{send ? msgs[i].dst : msgs[i].src, send};
      i = order[key][next[key]++];
    }
    RankSetup& u = setups[size_t(r)];
    std::vector<uint32_t> sent(size_t(n), 0), received(size_t(n), 0);
    P2pPlanner planner;
    for (const auto& [i, send] : calls) {
      const Msg& m = msgs[i];
      if (m.src == m.dst) {  // to self: a copy, as prepareP2p makes it
        u.plan.add(copy(m.cells * ts, loc(m.srcDevice, m.srcAt), loc(m.dstDevice, m.dstAt)));
      } else if (send) {
        planner.add(true, m.dst, m.cells * ts, loc(m.srcDevice, m.srcAt), chunk, &sent[size_t(m.dst)]);
      } else {
        planner.add(false, m.src, m.cells * ts, loc(m.dstDevice, m.dstAt), chunk, &received[size_t(m.src)]);
      }
    }
    planner.emit(u.plan);
    u.plan.window = uint32_t(std::max<size_t>(1, u.plan.steps.size()));
    d.perPeer = true;
    lowerForDevice(u.plan, d);
    for (const Step& st : u.plan.steps) {
      if (st.kind == StepKind::DeviceCopy || st.kind == StepKind::DeviceReduce || st.bytes == 0) continue;
      for (const Loc* l : {&st.src, &st.dst})
        if ((l == &st.src) == (st.kind != StepKind::Recv)) {
          EXPECT_NE(l->buf, BufId::Device) << "a host step names device memory";
        }
    }
    u.absolute.resize(hostCells[size_t(r)]);
    for (uint64_t k = 0; k < u.absolute.size(); ++k) u.absolute[k] = initial(r, false, k);
    u.device.resize(deviceCells[size_t(r)]);
    for (uint64_t k = 0; k < u.device.size(); ++k) u.device[k] = initial(r, true, k);
  }
  Simulator sim(n, ts, false, std::move(setups));
  ASSERT_TRUE(sim.run(seed));
  for (const Msg& m : msgs) {
    const RankState& dst = sim.rank(m.dst);
    const std::vector<Cell>& got = m.dstDevice ? dst.deviceMemory : dst.fingerprints;
    for (uint64_t k = 0; k < m.cells; ++k)
      ASSERT_EQ(got[m.dstAt + k], initial(m.src, m.srcDevice, m.srcAt + k))
          << "rank " << m.src << " -> " << m.dst << ", " << m.cells << " cells, element " << k;
  }
}

TEST(DeviceLowering, PointToPointGroupsDeliverWithBuffersOnTheDevice) {
  uint64_t seed = 0;
  for (int n : {2, 3, 4, 6})
    for (DeviceLowering d : {DeviceLowering{.slots = 1}, DeviceLowering{.slots = 2}, DeviceLowering{.slots = 4},
                             DeviceLowering{.slots = 4, .slotBudget = 1}})
      for (int round = 0; round < 12; ++round) {
        SCOPED_TRACE(testing::Message() << "n=" << n << " slots=" << d.slots << " budget=" << d.slotBudget
                                        << " seed=" << seed + 1);
        simulateP2p(n, ++seed, d);
        if (testing::Test::HasFatalFailure()) return;
      }
}

// Two ranks exchanging 8 bytes: with the exchange, still one message each way.
TEST(Fingerprint, DetectionAddsNoMessageToASmallTwoRankAllReduce) {
  for (auto algo : {Simulator::Algo::RecursiveDoubling, Simulator::Algo::Direct})
    for (bool inPlace : {false, true}) {
      Simulator plain(algo, 2, 2, 4, inPlace, 0, 1 << 16), checked(algo, 2, 2, 4, inPlace, 0, 1 << 16);
      EXPECT_EQ(checked.prependFingerprints(), 2);
      ASSERT_TRUE(plain.run(1));
      ASSERT_TRUE(checked.run(1));
      checked.checkResult();
      EXPECT_EQ(checked.messages(), plain.messages()) << "algo " << int(algo) << " inPlace " << inPlace;
    }
}

// The property mismatch detection rests on: a rank's last check passes only if every
// rank's fingerprint equals its own. Derived from the plans' dependencies alone: a passed
// check of rank q on the fingerprint from p proves fp(p) == fp(q), and whatever p had
// proved before sending (its send's dependency) comes with it.
TEST(Fingerprint, EveryRanksLastCheckCoversEveryRank) {
  for (int n = 2; n <= 33; ++n) {
    std::vector<Plan> plans(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r)
      prependFingerprint(plans[size_t(r)], r, n, 0xffff, kLocs);
    const uint32_t steps = 3 * fingerprintRounds(n);
    // proven[r][i]: the ranks whose fingerprint is known equal to r's once step i is done.
    std::vector<std::vector<std::vector<bool>>> proven(static_cast<size_t>(n), std::vector<std::vector<bool>>(steps));
    for (uint32_t i = 0; i < steps; ++i) {
      for (int r = 0; r < n; ++r) {
        const Step& s = plans[size_t(r)].steps[i];
        std::vector<bool> set(static_cast<size_t>(n), false);
        set[size_t(r)] = true;
        for (uint32_t d : s.deps)
          if (d != kNoDep)
            for (int x = 0; x < n; ++x) set[size_t(x)] = set[size_t(x)] || proven[size_t(r)][d][size_t(x)];
        if (s.kind == StepKind::Check) {
          // Find the matching send on the peer: same msg, to r. It precedes in step order.
          const Plan& peer = plans[size_t(s.peer)];
          bool found = false;
          for (uint32_t j = 0; j < steps && !found; ++j) {
            const Step& t = peer.steps[j];
            if (t.kind != StepKind::Send || t.peer != r || t.msg != plans[size_t(r)].steps[s.deps[0]].msg) continue;
            found = true;
            set[size_t(s.peer)] = true;
            if (t.deps[0] != kNoDep)
              for (int x = 0; x < n; ++x) set[size_t(x)] = set[size_t(x)] || proven[size_t(s.peer)][t.deps[0]][size_t(x)];
          }
          ASSERT_TRUE(found) << "n " << n << " rank " << r << " step " << i;
        }
        proven[size_t(r)][i] = set;
      }
    }
    for (int r = 0; r < n; ++r)
      for (int x = 0; x < n; ++x)
        ASSERT_TRUE(proven[size_t(r)][steps - 1][size_t(x)]) << "n " << n << ": rank " << r << " never verifies rank " << x;
  }
}

}  // namespace
}  // namespace tempo::algo
