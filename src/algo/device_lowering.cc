#include "src/algo/device_lowering.h"

#include <algorithm>
#include <array>
#include <vector>

#include "src/algo/steps.h"

namespace tempo::algo {
namespace {

constexpr uint64_t kAlign = 256;  // what the copy engines and the kernels' vector loads like
uint64_t alignUp(uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

// One direction's slots, used round robin; lastUse[k] is the step after which slot k is
// free again (kNoDep: never used).
struct SlotRing {
  SlotRing() = default;
  SlotRing(uint64_t base, uint64_t bytes, uint32_t count)
      : base(base), bytes(bytes), count(count), lastUse(count, kNoDep), owner(count, kNoDep) {}
  uint64_t base = 0, bytes = 0;
  uint32_t next = 0, count = 1;
  std::vector<uint32_t> lastUse;
  std::vector<uint32_t> owner;  // receive slots: the original receive whose chunk is there
  uint32_t take() { return next++ % count; }
  Loc at(uint32_t k) const { return {BufId::Staging, base + uint64_t(k) * bytes}; }
};

class Lowerer {
 public:
  Lowerer(Plan& plan, const DeviceLowering& d) : plan_(plan), d_(d) {}

  void run() {
    const std::vector<Step>& in = plan_.steps;
    // Each lane (a channel, or a peer: DeviceLowering::perPeer) has a send and a receive
    // direction, each sized by its largest lowered message.
    std::vector<uint64_t> sendBytes, recvBytes;  // by lane
    bool touches = false;
    for (const Step& s : in) {
      touches = touches || namesDevice(s);
      const bool send = isSend(s) && onDevice(s.src), recv = isRecv(s) && onDevice(s.dst);
      if (!send && !recv) continue;
      const size_t lane = laneOf(s);
      if (lane >= sendBytes.size()) {
        sendBytes.resize(lane + 1, 0);
        recvBytes.resize(lane + 1, 0);
      }
      uint64_t& most = send ? sendBytes[lane] : recvBytes[lane];
      most = std::max(most, alignUp(s.bytes));
    }
    if (!touches) return;

    // Staging: scratch, then per lane its send slots and its receive slots. Every lane has
    // slots of its own: a collective's channels run their rings in opposite directions,
    // and sharing slots would make each wait on the other (the simulator found such
    // deadlocks with two channels); an application orders its point-to-point calls to
    // different peers as it likes.
    uint64_t perSlot = 0;  // one slot of every lane and direction
    for (size_t l = 0; l < sendBytes.size(); ++l) perSlot += sendBytes[l] + recvBytes[l];
    uint32_t k = std::max<uint32_t>(1, d_.slots);
    while (k > 2 && d_.slotBudget && k * perSlot > d_.slotBudget) --k;
    sends_.clear();
    recvs_.clear();
    uint64_t at = alignUp(plan_.scratchBytes);
    for (size_t l = 0; l < sendBytes.size(); ++l) {
      sends_.emplace_back(at, sendBytes[l], k);
      at += k * sendBytes[l];
      recvs_.emplace_back(at, recvBytes[l], k);
      at += k * recvBytes[l];
    }
    plan_.stagingBytes = perSlot ? at : plan_.scratchBytes;

    std::vector<Step>& out = plan_.spare;
    out.clear();
    out.reserve(in.size() * 2);
    std::vector<uint32_t>& doneAt = plan_.work;  // old step -> the new step that finishes it
    doneAt.assign(in.size(), kNoDep);
    uint32_t carried = kNoDep;
    landed_.assign(in.size(), Landed{});
    for (uint32_t i = 0; i < in.size(); ++i) {
      Step s = in[i];
      for (uint32_t& dep : s.deps) dep = dep == kNoDep ? kNoDep : doneAt[dep];
      for (Loc* l : {&s.src, &s.src2, &s.dst})
        if (l->buf == BufId::Scratch) l->buf = BufId::Staging;  // scratch lives at the start
      if (const uint32_t from = isSend(s) && k >= 2 ? forwarded(in[i]) : kNoDep; from != kNoDep) {
        // A chunk sent on as it arrived (ring all-gather, chain broadcast): send it from its
        // receive slot as soon as it is there, beside the copy into place; the slot is
        // refilled only once both are done. That refill then waits for the next rank to
        // take the forward, which it does only once its own slot is free: with one slot
        // the ring of such waits would close on itself (a forward is the message after the
        // one it carries), so forwards need two slots at least.
        const Landed& l = landed_[from];
        SlotRing& ring = recvs_[l.lane];
        s.src = ring.at(l.slot);
        for (uint32_t& dep : s.deps)
          if (dep == l.copy) dep = l.recv;
        doneAt[i] = add(s);
        ring.lastUse[l.slot] = add(join(ring.lastUse[l.slot], doneAt[i]));
      } else if (isSend(s) && onDevice(s.src)) {
        // Copy the chunk out of the device into a free send slot, then send the slot.
        SlotRing& ring = sends_[laneOf(s)];
        const uint32_t slot = ring.take();
        const Loc at = ring.at(slot);
        Step copy = deviceCopy(s.bytes, s.src, at);
        setDeps(copy, s.deps[0], s.deps[1], ring.lastUse[slot]);
        const uint32_t copied = add(copy);
        s.src = at;
        s.deps[0] = copied;
        s.deps[1] = kNoDep;
        doneAt[i] = ring.lastUse[slot] = add(s);
      } else if (isRecv(s) && onDevice(s.dst)) {
        // Receive into a free receive slot, then copy the chunk into place on the device.
        const uint32_t lane = laneOf(s);
        SlotRing& ring = recvs_[lane];
        const uint32_t slot = ring.take();
        const Loc at = ring.at(slot), to = s.dst;
        s.dst = at;
        setDeps(s, s.deps[0], s.deps[1], ring.lastUse[slot]);
        const uint32_t received = add(s);
        if (s.kind == StepKind::RecvCarried) carried = received;
        Step copy = deviceCopy(s.bytes, at, to);
        copy.deps[0] = received;
        doneAt[i] = ring.lastUse[slot] = add(copy);
        landed_[i] = {received, doneAt[i], slot, lane, to, s.bytes};
        ring.owner[slot] = i;
      } else {
        const bool device = namesDevice(s);
        if (device && s.kind == StepKind::Reduce) s.kind = StepKind::DeviceReduce;
        if (device && s.kind == StepKind::Copy) s.kind = StepKind::DeviceCopy;
        doneAt[i] = add(s);
        if (s.kind == StepKind::RecvCarried) carried = doneAt[i];
      }
    }
    // The window covers as many of the original steps as before.
    const uint64_t window = (uint64_t(plan_.window) * out.size() + in.size() - 1) / std::max<size_t>(1, in.size());
    plan_.window = uint32_t(std::min<uint64_t>(window, UINT32_MAX));
    if (plan_.carriedRecv != kNoDep) plan_.carriedRecv = carried;
    plan_.steps.swap(out);
  }

 private:
  static bool isSend(const Step& s) { return s.kind == StepKind::Send; }
  static bool isRecv(const Step& s) { return s.kind == StepKind::Recv || s.kind == StepKind::RecvCarried; }
  bool onDevice(const Loc& l) const {
    return l.buf == BufId::Device || (l.buf == BufId::Input && d_.inputOnDevice) ||
           (l.buf == BufId::Output && d_.outputOnDevice);
  }
  uint32_t laneOf(const Step& s) const { return d_.perPeer ? uint32_t(s.peer) : s.channel; }
  // Whether a location the step reads or writes is device memory (a step's other
  // locations are unused and may hold anything).
  bool namesDevice(const Step& s) const {
    switch (s.kind) {
      case StepKind::Send: return onDevice(s.src);
      case StepKind::Recv:
      case StepKind::RecvCarried: return onDevice(s.dst);
      case StepKind::Copy:
      case StepKind::DeviceCopy: return onDevice(s.src) || onDevice(s.dst);
      case StepKind::Reduce:
      case StepKind::DeviceReduce: return onDevice(s.src) || onDevice(s.src2) || onDevice(s.dst);
      case StepKind::Check: return false;  // fingerprints: host memory
    }
    return false;
  }
  // The lowered receive (an index of the original plan) whose chunk the original Send
  // `s` sends on unchanged, while that chunk is still in its slot; kNoDep if none.
  uint32_t forwarded(const Step& s) const {
    for (uint32_t d : s.deps) {
      if (d == kNoDep || landed_[d].recv == kNoDep) continue;
      const Landed& l = landed_[d];
      if (l.to.buf == s.src.buf && l.to.offset == s.src.offset && l.bytes == s.bytes &&
          recvs_[l.lane].owner[l.slot] == d)
        return d;
    }
    return kNoDep;
  }
  // A step that is done once steps a and b are: a Copy of nothing (in staging, which a plan
  // with joins always has).
  static Step join(uint32_t a, uint32_t b) {
    Step j = copy(0, {BufId::Staging, 0}, {BufId::Staging, 0});
    j.deps[0] = a;
    j.deps[1] = b;
    return j;
  }
  static Step deviceCopy(uint64_t bytes, Loc src, Loc dst) {
    Step c = copy(bytes, src, dst);
    c.kind = StepKind::DeviceCopy;
    return c;
  }
  uint32_t add(const Step& s) {
    plan_.spare.push_back(s);
    return uint32_t(plan_.spare.size() - 1);
  }
  // Gives `s` up to three dependencies; a step holds two, so a third joins the first two in
  // an empty Copy that `s` waits for.
  void setDeps(Step& s, uint32_t a, uint32_t b, uint32_t c) {
    std::array<uint32_t, 3> all{a, b, c};
    auto end = std::remove(all.begin(), all.end(), kNoDep);
    const size_t n = size_t(end - all.begin());
    if (n == 3) {
      all[0] = add(join(all[0], all[1]));
      all[1] = all[2];
    }
    s.deps[0] = n > 0 ? all[0] : kNoDep;
    s.deps[1] = n > 1 ? all[1] : kNoDep;
  }

  Plan& plan_;
  const DeviceLowering& d_;
  std::vector<SlotRing> sends_, recvs_;  // by lane
  // Per lowered receive of the original plan: its new Recv and copy steps, its slot, and
  // where its chunk goes on the device.
  struct Landed {
    uint32_t recv = kNoDep, copy = kNoDep, slot = 0, lane = 0;
    Loc to;
    uint64_t bytes = 0;
  };
  std::vector<Landed> landed_;
};

}  // namespace

void lowerForDevice(Plan& plan, const DeviceLowering& d) {
  plan.stagingBytes = 0;
  Lowerer(plan, d).run();
}

}  // namespace tempo::algo
