// One rank's side of one rooted or symmetric collective, for tests that run ranks as
// threads and tests that run them as processes alike.
//
// A RankCase names a collective call (collective, datatype, op, count, root, placement,
// seed). RankBuffers builds, for one rank, the guarded buffers that call needs in NCCL's
// layout for that placement, fills the input with the reference values of verify.h, issues
// the call through the public API, and checks afterwards that the output is bit-exact, that
// an out-of-place input was left untouched and that no guard byte changed. Every rank can
// compute its expected output alone, from the seed: no data is shared between ranks.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "rccl/rccl.h"
#include "tests/common/verify.h"

// ncclAllToAll is RCCL's deprecated spelling; it is exercised here on purpose.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace tempo::testing {

enum class Coll { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AllToAll, Gather, Scatter };
// Every collective RankBuffers can check, in enum order.
inline constexpr Coll kAllColls[] = {Coll::AllReduce,     Coll::Broadcast, Coll::Reduce, Coll::AllGather,
                                     Coll::ReduceScatter, Coll::AllToAll,  Coll::Gather, Coll::Scatter};

inline const char* collName(Coll c) {
  switch (c) {
    case Coll::AllReduce: return "AllReduce";
    case Coll::Broadcast: return "Broadcast";
    case Coll::Reduce: return "Reduce";
    case Coll::AllGather: return "AllGather";
    case Coll::ReduceScatter: return "ReduceScatter";
    case Coll::AllToAll: return "AllToAll";
    case Coll::Gather: return "Gather";
    case Coll::Scatter: return "Scatter";
  }
  return "?";
}

// Whether the collective reduces (and so takes an op) and whether it has a root.
inline bool reduces(Coll c) { return c == Coll::AllReduce || c == Coll::Reduce || c == Coll::ReduceScatter; }
inline bool rooted(Coll c) { return c == Coll::Broadcast || c == Coll::Reduce || c == Coll::Gather || c == Coll::Scatter; }
// All-to-all has no in-place form in RCCL.
inline bool hasInPlace(Coll c) { return c != Coll::AllToAll; }

struct RankCase {
  Coll coll;
  DataType type;
  RedOp op;  // Sum for the collectives that only move data
  size_t count;  // NCCL's count argument: per rank block for gather-like collectives
  int root;
  bool inPlace;
  uint64_t seed;

  std::string describe() const {
    std::string s = std::string(collName(coll)) + " " + dataTypeName(type);
    if (reduces(coll)) s += std::string(" ") + redOpName(op);
    s += " count " + std::to_string(count);
    if (rooted(coll)) s += " root " + std::to_string(root);
    return s + (inPlace ? " in place" : " out of place");
  }
};

// Where RankBuffers may put device copies of its buffers (tests of device memory).
class DeviceMirror {
 public:
  virtual ~DeviceMirror() = default;
  virtual void* upload(const void* host, size_t bytes) = 0;  // a new device copy of host
  virtual void download(void* host, const void* dev, size_t bytes) = 0;
  virtual void* stream() = 0;  // the stream the calls are issued on
};

class RankBuffers {
 public:
  RankBuffers(const RankCase& c, int rank, int nranks)
      : c_(c), rank_(rank), n_(nranks), elem_(dataTypeSize(c.type)), block_(c.count * elem_),
        in_(block_ * inBlocks()), out_(block_ * outBlocks()), want_(block_ * outBlocks()) {
    fillInput(in_.data(), c.count * inBlocks(), c.type, c.op, rank, nranks, c.seed);
    std::memset(out_.data(), 0x5c, out_.bytes());
    // In-place all-gather and gather (root) take the input from the rank's block of the output.
    if (c.inPlace && (c.coll == Coll::AllGather || (c.coll == Coll::Gather && rank == c.root)) && block_)
      std::memcpy(at(out_, size_t(rank)), in_.data(), block_);
    expect();
  }

  // Issues the collective on `comm` with this rank's buffers, or, given a mirror, with
  // device copies of them (guards included) on the mirror's stream; check() then reads the
  // device copies back first.
  ncclResult_t call(ncclComm_t comm, DeviceMirror* mirror = nullptr) {
    mirror_ = mirror;
    if (mirror_) {
      devIn_ = static_cast<unsigned char*>(mirror_->upload(in_.raw(), in_.rawBytes())) + GuardedBuffer::kGuard;
      devOut_ = static_cast<unsigned char*>(mirror_->upload(out_.raw(), out_.rawBytes())) + GuardedBuffer::kGuard;
    }
    const auto t = ncclDataType_t(c_.type);
    const auto op = ncclRedOp_t(c_.op);
    const size_t n = c_.count;
    void* in = base(in_);
    void* out = base(out_);
    hipStream_t stream = mirror_ ? static_cast<hipStream_t>(mirror_->stream()) : nullptr;
    const bool root = rank_ == c_.root;
    switch (c_.coll) {
      case Coll::AllReduce: return ncclAllReduce(in, c_.inPlace ? in : out, n, t, op, comm, stream);
      case Coll::Broadcast:
        return c_.inPlace ? ncclBcast(in, n, t, c_.root, comm, stream)
                          : ncclBroadcast(in, out, n, t, c_.root, comm, stream);
      case Coll::Reduce: return ncclReduce(in, c_.inPlace ? in : out, n, t, op, c_.root, comm, stream);
      case Coll::AllGather: return ncclAllGather(c_.inPlace ? callAt(out_, size_t(rank_)) : in, out, n, t, comm, stream);
      case Coll::ReduceScatter:
        return ncclReduceScatter(in, c_.inPlace ? callAt(in_, size_t(rank_)) : out, n, t, op, comm, stream);
      case Coll::AllToAll:  // odd ranks use RCCL's deprecated spelling, which must forward
        return (rank_ & 1) ? ncclAllToAll(in, out, n, t, comm, stream) : ncclAlltoAll(in, out, n, t, comm, stream);
      case Coll::Gather:
        return ncclGather(c_.inPlace && root ? callAt(out_, size_t(rank_)) : in, out, n, t, c_.root, comm, stream);
      case Coll::Scatter:
        return ncclScatter(in, c_.inPlace && root ? callAt(in_, size_t(rank_)) : out, n, t, c_.root, comm, stream);
    }
    return ncclInvalidArgument;
  }

  // Empty when the call left exactly the expected bytes; otherwise what was wrong.
  std::string check() {
    if (mirror_) {
      mirror_->download(in_.raw(), devIn_ - GuardedBuffer::kGuard, in_.rawBytes());
      mirror_->download(out_.raw(), devOut_ - GuardedBuffer::kGuard, out_.rawBytes());
    }
    std::string bad;
    auto note = [&](const char* what, size_t wrong) {
      if (wrong) bad += std::string(bad.empty() ? "" : "; ") + what + ": " + std::to_string(wrong) + " wrong elements";
    };
    const size_t outElems = c_.count * outBlocks();
    if (resultInInput()) {
      note("result", countMismatches(resultPtr(), want_.data(), c_.count, c_.type));
    } else if (hasOutput()) {
      note("output", countMismatches(out_.data(), want_.data(), outElems, c_.type));
    }
    if (!resultInInput()) {
      // An input that does not carry the result is only read: it must come back unchanged.
      GuardedBuffer orig(in_.bytes());
      fillInput(orig.data(), c_.count * inBlocks(), c_.type, c_.op, rank_, n_, c_.seed);
      note("input", countMismatches(in_.data(), orig.data(), c_.count * inBlocks(), c_.type));
    }
    if (!in_.guardsIntact() || !out_.guardsIntact())
      bad += std::string(bad.empty() ? "" : "; ") + "guard bytes overwritten";
    return bad;
  }

 private:
  // Blocks of `count` elements in this rank's input and output buffers.
  size_t inBlocks() const {
    switch (c_.coll) {
      case Coll::ReduceScatter:
      case Coll::AllToAll:
      case Coll::Scatter: return size_t(n_);
      default: return 1;
    }
  }
  size_t outBlocks() const {
    switch (c_.coll) {
      case Coll::AllGather:
      case Coll::AllToAll:
      case Coll::Gather: return size_t(n_);
      default: return 1;
    }
  }
  unsigned char* at(GuardedBuffer& b, size_t block) { return static_cast<unsigned char*>(b.data()) + block * block_; }
  // The buffer the call names: the host one, or its device copy.
  unsigned char* base(GuardedBuffer& b) {
    if (!mirror_) return static_cast<unsigned char*>(b.data());
    return &b == &in_ ? devIn_ : devOut_;
  }
  unsigned char* callAt(GuardedBuffer& b, size_t block) { return base(b) + block * block_; }

  // In place, these collectives leave the result in the input buffer.
  bool resultInInput() const {
    if (!c_.inPlace) return false;
    switch (c_.coll) {
      case Coll::AllReduce:
      case Coll::Broadcast:
      case Coll::ReduceScatter: return true;
      case Coll::Reduce:
      case Coll::Scatter: return rank_ == c_.root;
      default: return false;
    }
  }
  void* resultPtr() {
    if (c_.coll == Coll::ReduceScatter || c_.coll == Coll::Scatter) return at(in_, size_t(rank_));
    return in_.data();
  }
  // Whether this rank's output buffer receives anything (NCCL leaves it alone otherwise).
  bool hasOutput() const {
    if (c_.coll == Coll::Reduce || c_.coll == Coll::Gather) return rank_ == c_.root;
    return true;
  }

  // The expected result of this rank, computed from the seed alone.
  void expect() {
    const size_t count = c_.count, total = count * size_t(n_);
    auto* want = static_cast<unsigned char*>(want_.data());
    switch (c_.coll) {
      case Coll::AllReduce:
      case Coll::Reduce: expectedAllReduce(want, count, c_.type, c_.op, n_, c_.seed); break;
      case Coll::Broadcast: fillInput(want, count, c_.type, c_.op, c_.root, n_, c_.seed); break;
      case Coll::AllGather:
      case Coll::Gather:
        for (int j = 0; j < n_; ++j)
          fillInput(want + size_t(j) * block_, count, c_.type, c_.op, j, n_, c_.seed);
        break;
      case Coll::ReduceScatter: {
        GuardedBuffer all(block_ * size_t(n_));
        expectedAllReduce(all.data(), total, c_.type, c_.op, n_, c_.seed);
        if (block_) std::memcpy(want, at(all, size_t(rank_)), block_);
        break;
      }
      case Coll::AllToAll:
        for (int j = 0; j < n_; ++j) {  // block j comes from rank j's block rank_
          GuardedBuffer src(block_ * size_t(n_));
          fillInput(src.data(), total, c_.type, c_.op, j, n_, c_.seed);
          if (block_) std::memcpy(want + size_t(j) * block_, at(src, size_t(rank_)), block_);
        }
        break;
      case Coll::Scatter: {
        GuardedBuffer src(block_ * size_t(n_));
        fillInput(src.data(), total, c_.type, c_.op, c_.root, n_, c_.seed);
        if (block_) std::memcpy(want, at(src, size_t(rank_)), block_);
        break;
      }
    }
  }

  RankCase c_;
  int rank_, n_;
  size_t elem_, block_;
  GuardedBuffer in_, out_, want_;
  DeviceMirror* mirror_ = nullptr;
  unsigned char* devIn_ = nullptr;  // device copies of in_ and out_ (their data, past the guard)
  unsigned char* devOut_ = nullptr;
};

// Datatypes for the collectives that only move data: every element size, and formats whose
// bytes must not be reinterpreted (fp8, bf16).
inline constexpr DataType kMoveTypes[] = {DataType::Int8, DataType::Float8e5m2, DataType::Bfloat16,
                                          DataType::Float32, DataType::Float64};

// The matrix every collective is tested over with `n` ranks, seeds counting up from
// `seed`: collectives that move data over kMoveTypes, counts {0, 1, 7, n+1, 1021, 4099}
// (none, one, a prime, fewer elements than ranks... ) and, when rooted, the first and last
// rank; reducing collectives over every datatype and op, counts {0, 1, n+1, 1021} and a
// root that varies with the seed; each in place (where RCCL has it) and out of place.
inline std::vector<RankCase> casesFor(Coll c, int n, uint64_t seed) {
  std::vector<RankCase> cases;
  auto add = [&](DataType t, RedOp op, size_t count, int root) {
    for (bool inPlace : {false, true}) {
      if (inPlace && !hasInPlace(c)) continue;
      cases.push_back(RankCase{c, t, op, count, root, inPlace, seed++});
    }
  };
  if (reduces(c)) {
    for (DataType t : kAllTypes)
      for (RedOp op : kAllOps)
        for (size_t count : {size_t(0), size_t(1), size_t(n) + 1, size_t(1021)})
          add(t, op, count, rooted(c) ? int(seed % uint64_t(n)) : 0);
  } else {
    for (DataType t : kMoveTypes)
      for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(n) + 1, size_t(1021), size_t(4099)})
        if (rooted(c)) {
          add(t, RedOp::Sum, count, 0);
          if (n > 1) add(t, RedOp::Sum, count, n - 1);
        } else {
          add(t, RedOp::Sum, count, 0);
        }
  }
  return cases;
}

}  // namespace tempo::testing

#pragma GCC diagnostic pop
