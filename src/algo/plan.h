// A Plan: the flat list of steps one rank executes for one collective.
//
// Steps are in an order in which every dependency precedes its dependent, so the engine
// can issue them with a sliding window. Offsets are in bytes into the three buffers of
// the operation: the user's input, the user's output, and the communicator's scratch.
// Planners are pure functions (no I/O, no threads) and are tested exhaustively.
#pragma once

#include <cstdint>
#include <vector>

namespace tempo::algo {

// Absolute: `offset` is the address itself (point-to-point ops, whose every call brings
// its own buffer). Device: likewise, an address in device memory (a point-to-point call's
// device buffer, which lowering for device buffers moves off every host step). Staging:
// the op's pinned host memory of a plan lowered for device buffers (device_lowering.h),
// plan.stagingBytes long.
enum class BufId : uint8_t { Input, Output, Scratch, Absolute, Staging, Device };

struct Loc {
  BufId buf = BufId::Input;
  uint64_t offset = 0;
};
inline Loc absolute(const void* p) { return {BufId::Absolute, uint64_t(uintptr_t(p))}; }
// A point-to-point call's buffer: Device where it is device memory, Absolute otherwise.
inline Loc userAddress(const void* p, bool onDevice) {
  return {onDevice ? BufId::Device : BufId::Absolute, uint64_t(uintptr_t(p))};
}

enum class StepKind : uint8_t {
  Send,    // send `bytes` at src to `peer`
  Recv,    // receive `bytes` from `peer` into dst
  Reduce,  // dst = src (op) src2, `bytes` long; then divide by postDivisor if > 1
  Copy,    // dst = src
  Check,   // the op's verify hook compares src (received from `peer`) with src2 (ours)
  // A Recv whose message may instead have come inside the peer's round-0 fingerprint
  // message (see fingerprint.h). Besides its deps it waits for round 0's Check, which
  // learns how many data bytes that message carried: `bytes` of them are copied from
  // src; none, and it receives as a Recv; any other count fails the op.
  RecvCarried,
  // Only in plans lowered for device buffers (device_lowering.h), run asynchronously on
  // the GPU runtime's stream: a copy between any two of device and pinned host memory, and
  // a Reduce by the device's kernel (which reads pinned host memory directly).
  DeviceCopy,
  DeviceReduce,
};

inline constexpr uint32_t kNoDep = UINT32_MAX;
// A message's `msg` travels in 16 bits of its tag. Data plans number their messages
// between a pair, in one direction, below kMaxDataMsgs; the ids above it are reserved for
// the fingerprint rounds of prependFingerprint (at most 31, fingerprint.h).
inline constexpr uint32_t kMsgIdSpace = 0x10000;
inline constexpr uint32_t kMaxDataMsgs = kMsgIdSpace - 32;

struct Step {
  StepKind kind = StepKind::Copy;
  bool upTo = false;         // Recv: `bytes` is the capacity; a shorter message is accepted
  bool travelsEmpty = false; // Send/Recv: a message even when `bytes` is 0 (empty messages
                             // are otherwise skipped on both sides): the empty last piece
                             // of a point-to-point message (p2p.h)
  uint8_t channel = 0;       // Send/Recv: the channel it belongs to (channels.h); the engine
                             // sends it over that channel's rail
  int32_t peer = -1;         // Send/Recv
  uint32_t msg = 0;          // Send/Recv: index among the messages between this pair, in
                             // this direction, within the collective; both sides agree
  uint32_t postDivisor = 1;  // Reduce: the last reduction of an average divides by n
  uint64_t bytes = 0;
  Loc src, src2, dst;
  uint32_t deps[2] = {kNoDep, kNoDep};
};

struct Plan {
  std::vector<Step> steps;
  uint32_t window = 64;      // how many steps ahead of the oldest unfinished one may start
  uint64_t scratchBytes = 0; // scratch this plan needs
  uint64_t stagingBytes = 0; // pinned staging this plan needs (lowered plans only)
  uint32_t carriedRecv = kNoDep;  // the RecvCarried step, if any (prependFingerprint)
  const char* algorithm = "";  // a static name for records and traces: "ring", "tree", ...
  std::vector<uint32_t> work;  // planner scratch (kept for its capacity)
  std::vector<Step> spare;     // likewise, for building a plan's steps anew

  void clear() {
    steps.clear();
    window = 64;
    scratchBytes = 0;
    stagingBytes = 0;
    carriedRecv = kNoDep;
    algorithm = "";
  }
  uint32_t add(const Step& s) {
    steps.push_back(s);
    return uint32_t(steps.size() - 1);
  }
};

}  // namespace tempo::algo
