#include "src/algo/collectives.h"

#include <algorithm>

#include "src/algo/ring.h"
#include "src/algo/steps.h"

namespace tempo::algo {
namespace {

// A single rank: out-of-place collectives copy their block; in place there is nothing to do.
bool singleRank(const CollPlanArgs& a, Plan& out) {
  if (a.nranks != 1) return false;
  if (!a.inPlace && a.count) out.add(copy(a.count * a.typeSize, {BufId::Input, 0}, {BufId::Output, 0}));
  return true;
}

}  // namespace

uint64_t columnChunk(uint64_t bytes, uint64_t chunk, uint32_t msgsPerColumn, uint32_t typeSize) {
  chunk = std::max<uint64_t>(chunk, typeSize);
  chunk -= chunk % typeSize;
  const uint64_t maxColumns = std::max<uint64_t>(1, kMaxDataMsgs / std::max<uint32_t>(1, msgsPerColumn));
  if ((bytes + chunk - 1) / chunk > maxColumns) {
    chunk = (bytes + maxColumns - 1) / maxColumns;
    chunk = (chunk + typeSize - 1) / typeSize * typeSize;
  }
  return chunk;
}

void planRingAllGather(const CollPlanArgs& a, Plan& out) {
  const int n = a.nranks, r = a.rank;
  const uint64_t block = a.count * a.typeSize;
  if (!block) return;
  if (n == 1) return void(singleRank(a, out));
  const uint32_t perColumn = uint32_t(n - 1);
  const uint64_t chunk = columnChunk(block, a.chunkBytes, perColumn, a.typeSize);
  const uint64_t columns = (block + chunk - 1) / chunk;
  const RingView rv(a);
  const int next = rv.rankAt(rv.pos + 1), prev = rv.rankAt(rv.pos - 1);
  const uint64_t stride = a.blockStride ? a.blockStride : block;

  // n-1 ring steps per column; a block (named by its rank) is forwarded once it has arrived. Out of place, our
  // own slice of the column is copied into place right after its first send and receive
  // are posted, so the copy overlaps the peers' transfers instead of delaying them.
  for (uint64_t c = 0; c < columns; ++c) {
    const uint64_t off = c * chunk, len = std::min(chunk, block - off);
    uint32_t arrived = kNoDep;
    for (int s = 0; s < n - 1; ++s) {
      const uint64_t msg = c * perColumn + uint64_t(s);
      const int sendBlock = rv.rankAt(rv.pos - s), recvBlock = rv.rankAt(rv.pos - s - 1);
      Loc from = s == 0 ? Loc{BufId::Input, off} : Loc{BufId::Output, uint64_t(sendBlock) * stride + off};
      out.add(transfer(StepKind::Send, next, msg, len, from, arrived));
      arrived = out.add(transfer(StepKind::Recv, prev, msg, len, {BufId::Output, uint64_t(recvBlock) * stride + off}, kNoDep));
      if (s == 0 && !a.inPlace) out.add(copy(len, {BufId::Input, off}, {BufId::Output, uint64_t(r) * stride + off}));
    }
  }
  const uint64_t perColumnSteps = uint64_t(2 * (n - 1)) + (a.inPlace ? 0 : 1);
  out.window = uint32_t(std::min<uint64_t>(out.steps.size(), perColumnSteps * 16));
}

void planRingReduceScatter(const CollPlanArgs& a, Plan& out) {
  const int n = a.nranks;
  const uint64_t block = a.count * a.typeSize;
  if (!block) return;
  if (n == 1) return void(singleRank(a, out));
  const uint32_t perColumn = uint32_t(n - 1);
  uint64_t chunk = std::min(a.chunkBytes, std::max<uint64_t>(a.typeSize, a.scratchBytes / 2));
  chunk = columnChunk(block, chunk, perColumn, a.typeSize);
  const uint64_t columns = (block + chunk - 1) / chunk;
  const uint64_t slotBytes = std::min(chunk, block);
  Slots slots(out, slotBytes, slotCount(a.scratchBytes, slotBytes, columns, perColumn));
  const RingView rv(a);
  const int next = rv.rankAt(rv.pos + 1), prev = rv.rankAt(rv.pos - 1);
  const uint64_t stride = a.blockStride ? a.blockStride : block;

  // Per column, n-1 steps, in ring positions p: step s sends the partial sum of the block
  // of position p-1-s (our raw input at s = 0), receives the partial of position p-2-s's
  // block into a slot and folds our input into it; the last fold (our own block, p-n = p)
  // lands in the output.
  for (uint64_t c = 0; c < columns; ++c) {
    const uint64_t off = c * chunk, len = std::min(chunk, block - off);
    uint32_t partial = kNoDep;  // the fold whose slot the next send reads
    uint64_t partialSlot = 0;
    for (int s = 0; s < n - 1; ++s) {
      const uint64_t msg = c * perColumn + uint64_t(s);
      const int sendBlock = rv.rankAt(rv.pos - 1 - s), recvBlock = rv.rankAt(rv.pos - 2 - s);
      Loc from = s == 0 ? Loc{BufId::Input, uint64_t(sendBlock) * stride + off} : slots.loc(partialSlot);
      uint32_t send = out.add(transfer(StepKind::Send, next, msg, len, from, partial));
      if (s > 0) slots.readBy(partialSlot, send);

      uint32_t free;
      uint64_t slot = slots.take(&free);
      uint32_t recv = out.add(transfer(StepKind::Recv, prev, msg, len, slots.loc(slot), free));
      const bool last = s == n - 2;
      Step fold;
      fold.kind = StepKind::Reduce;
      fold.bytes = len;
      fold.src = slots.loc(slot);
      fold.src2 = {BufId::Input, uint64_t(recvBlock) * stride + off};
      fold.dst = last ? Loc{BufId::Output, off} : slots.loc(slot);
      fold.postDivisor = last && a.average ? uint32_t(n) : 1;
      fold.deps[0] = recv;
      partial = out.add(fold);
      partialSlot = slot;
      if (last) slots.readBy(slot, partial);
    }
  }
  out.window = uint32_t(std::min<uint64_t>(out.steps.size(), uint64_t(3 * (n - 1)) * 4));
}

void planChainBroadcast(const CollPlanArgs& a, Plan& out) {
  const int n = a.nranks, r = a.rank;
  const uint64_t bytes = a.count * a.typeSize;
  if (!bytes) return;
  const bool isRoot = r == a.root;
  if (n == 1) return void(singleRank(a, out));
  const uint64_t chunk = columnChunk(bytes, a.chunkBytes, 1, a.typeSize);
  const int pos = ring::mod(r - a.root, n);
  const int next = ring::next(r, n), prev = ring::prev(r, n);
  const bool forwards = pos < n - 1;

  // Chunk k travels root -> root+1 -> ... ; a rank forwards a chunk as soon as it landed.
  // Out of place, the root copies each chunk into its output after posting its send (the
  // transfers read the input), so the copy overlaps the next rank's receive.
  for (uint64_t off = 0, k = 0; off < bytes; off += chunk, ++k) {
    const uint64_t len = std::min(chunk, bytes - off);
    if (isRoot) {
      out.add(transfer(StepKind::Send, next, k, len, {BufId::Input, off}, kNoDep));
      if (!a.inPlace) out.add(copy(len, {BufId::Input, off}, {BufId::Output, off}));
      continue;
    }
    uint32_t recv = out.add(transfer(StepKind::Recv, prev, k, len, {BufId::Output, off}, kNoDep));
    if (forwards) out.add(transfer(StepKind::Send, next, k, len, {BufId::Output, off}, recv));
  }
  // Up to 16 chunks in flight (8 on a middle rank, which receives and sends each).
  out.window = uint32_t(std::min<size_t>(out.steps.size(), isRoot && !a.inPlace ? 32 : 16));
}

void planTreeBroadcast(const CollPlanArgs& a, Plan& out) {
  const int n = a.nranks, r = a.rank;
  const uint64_t bytes = a.count * a.typeSize;
  if (!bytes) return;
  if (n == 1) return void(singleRank(a, out));
  const uint64_t chunk = columnChunk(bytes, a.chunkBytes, 1, a.typeSize);
  const int pos = ring::mod(r - a.root, n);
  // Binomial tree over positions relative to the root: the parent of p is p without its
  // highest set bit; the children of p are p + 2^k for every 2^k above p (below n), the
  // largest subtree first so that the deepest branch starts soonest.
  int high = 1;
  while (high * 2 <= pos) high *= 2;
  int children[32], nchildren = 0;
  int top = 1;
  while (top < n) top *= 2;
  for (int m = top / 2; m > pos; m /= 2)
    if (pos + m < n) children[nchildren++] = ring::mod(pos + m + a.root, n);
  const int parent = pos == 0 ? -1 : ring::mod(pos - high + a.root, n);

  // Chunk k: received from the parent into the output (the root reads its input), then
  // sent on to each child as soon as it landed.
  for (uint64_t off = 0, k = 0; off < bytes; off += chunk, ++k) {
    const uint64_t len = std::min(chunk, bytes - off);
    const Loc at = parent < 0 ? Loc{BufId::Input, off} : Loc{BufId::Output, off};
    const uint32_t recv =
        parent < 0 ? kNoDep : out.add(transfer(StepKind::Recv, parent, k, len, {BufId::Output, off}, kNoDep));
    for (int c = 0; c < nchildren; ++c) out.add(transfer(StepKind::Send, children[c], k, len, at, recv));
    if (parent < 0 && !a.inPlace) out.add(copy(len, {BufId::Input, off}, {BufId::Output, off}));
  }
  out.window = uint32_t(std::min<size_t>(out.steps.size(), size_t(16) * size_t(nchildren + 2)));
}

void planChainReduce(const CollPlanArgs& a, Plan& out) {
  const int n = a.nranks, r = a.rank;
  const uint64_t bytes = a.count * a.typeSize;
  if (!bytes) return;
  if (n == 1) return void(singleRank(a, out));
  uint64_t chunk = std::min(a.chunkBytes, std::max<uint64_t>(a.typeSize, a.scratchBytes / 2));
  chunk = columnChunk(bytes, chunk, 1, a.typeSize);
  const uint64_t columns = (bytes + chunk - 1) / chunk;
  const int pos = ring::mod(r - a.root, n);
  const int toRoot = ring::prev(r, n), fromTail = ring::next(r, n);

  // The chain runs root-1 -> root-2 -> ... -> root: the last position sends its input,
  // every middle position folds its input into the partial it received and passes it on,
  // the root folds the final partial into its output.
  if (pos == n - 1) {
    for (uint64_t off = 0, k = 0; off < bytes; off += chunk, ++k)
      out.add(transfer(StepKind::Send, toRoot, k, std::min(chunk, bytes - off), {BufId::Input, off}, kNoDep));
    out.window = uint32_t(std::min<size_t>(out.steps.size(), 16));
    return;
  }
  const uint64_t slotBytes = std::min(chunk, bytes);
  Slots slots(out, slotBytes, slotCount(a.scratchBytes, slotBytes, columns, 1));
  for (uint64_t off = 0, k = 0; off < bytes; off += chunk, ++k) {
    const uint64_t len = std::min(chunk, bytes - off);
    uint32_t free;
    uint64_t slot = slots.take(&free);
    uint32_t recv = out.add(transfer(StepKind::Recv, fromTail, k, len, slots.loc(slot), free));
    Step fold;
    fold.kind = StepKind::Reduce;
    fold.bytes = len;
    fold.src = slots.loc(slot);
    fold.src2 = {BufId::Input, off};
    fold.dst = pos == 0 ? Loc{BufId::Output, off} : slots.loc(slot);
    fold.postDivisor = pos == 0 && a.average ? uint32_t(n) : 1;
    fold.deps[0] = recv;
    uint32_t folded = out.add(fold);
    if (pos == 0) {
      slots.readBy(slot, folded);
    } else {
      slots.readBy(slot, out.add(transfer(StepKind::Send, toRoot, k, len, slots.loc(slot), folded)));
    }
  }
  out.window = uint32_t(std::min<size_t>(out.steps.size(), 24));
}

void planGather(const CollPlanArgs& a, Plan& out) {
  const int n = a.nranks, r = a.rank;
  const uint64_t block = a.count * a.typeSize;
  if (!block) return;
  if (r != a.root) {
    out.add(transfer(StepKind::Send, a.root, 0, block, {BufId::Input, 0}, kNoDep));
    return;
  }
  if (!a.inPlace) out.add(copy(block, {BufId::Input, 0}, {BufId::Output, uint64_t(r) * block}));
  for (int k = 1; k < n; ++k) {
    const int peer = ring::mod(r + k, n);
    out.add(transfer(StepKind::Recv, peer, 0, block, {BufId::Output, uint64_t(peer) * block}, kNoDep));
  }
  out.window = uint32_t(std::max<size_t>(1, out.steps.size()));
}

void planScatter(const CollPlanArgs& a, Plan& out) {
  const int n = a.nranks, r = a.rank;
  const uint64_t block = a.count * a.typeSize;
  if (!block) return;
  if (r != a.root) {
    out.add(transfer(StepKind::Recv, a.root, 0, block, {BufId::Output, 0}, kNoDep));
    return;
  }
  if (!a.inPlace) out.add(copy(block, {BufId::Input, uint64_t(r) * block}, {BufId::Output, 0}));
  for (int k = 1; k < n; ++k) {
    const int peer = ring::mod(r + k, n);
    out.add(transfer(StepKind::Send, peer, 0, block, {BufId::Input, uint64_t(peer) * block}, kNoDep));
  }
  out.window = uint32_t(std::max<size_t>(1, out.steps.size()));
}

void planAllToAllv(const AllToAllvArgs& a, Plan& out) {
  const int n = a.nranks, r = a.rank;
  const uint64_t ts = a.typeSize;
  const size_t self = size_t(r);
  if (a.sendCounts[self])
    out.add(copy(a.sendCounts[self] * ts, {BufId::Input, a.sendDispls[self] * ts},
                 {BufId::Output, a.recvDispls[self] * ts}));
  for (int k = 1; k < n; ++k) {
    const int to = ring::mod(r + k, n), from = ring::mod(r - k, n);
    if (a.sendCounts[size_t(to)])
      out.add(transfer(StepKind::Send, to, 0, a.sendCounts[size_t(to)] * ts,
                       {BufId::Input, a.sendDispls[size_t(to)] * ts}, kNoDep));
    if (a.recvCounts[size_t(from)])
      out.add(transfer(StepKind::Recv, from, 0, a.recvCounts[size_t(from)] * ts,
                       {BufId::Output, a.recvDispls[size_t(from)] * ts}, kNoDep));
  }
  out.window = uint32_t(std::max<size_t>(1, out.steps.size()));
}

}  // namespace tempo::algo
