#include "src/algo/tree_allreduce.h"

#include <algorithm>

#include "src/algo/collectives.h"
#include "src/algo/steps.h"

namespace tempo::algo {
namespace {

TreeLinks binaryTree(int n, int p) {
  TreeLinks t;
  if (n <= 1) return t;
  if (p == 0) {
    int top = 1;
    while (top * 2 < n) top *= 2;
    t.children[t.nchildren++] = top;
    return t;
  }
  const int b = p & -p;
  const int up = (p ^ b) | (b << 1);
  t.parent = up < n ? up : p ^ b;
  if (b > 1) {
    int lo = b / 2;
    t.children[t.nchildren++] = p - lo;
    while (lo > 0 && p + lo >= n) lo /= 2;
    if (lo > 0) t.children[t.nchildren++] = p + lo;
  }
  return t;
}

}  // namespace

TreeLinks doubleBinaryTree(int n, int pos, int tree) {
  if (tree == 0) return binaryTree(n, pos);
  // Mirror (even n) or shift (odd n): both map tree 0's leaves, the odd positions, onto
  // interior positions of tree 1.
  auto there = [&](int p) { return n % 2 == 0 ? n - 1 - p : (p - 1 + n) % n; };
  auto back = [&](int q) { return q < 0 ? -1 : n % 2 == 0 ? n - 1 - q : (q + 1) % n; };
  TreeLinks t = binaryTree(n, there(pos));
  t.parent = back(t.parent);
  for (int i = 0; i < t.nchildren; ++i) t.children[i] = back(t.children[i]);
  return t;
}

void planTreeAllReduce(const CollPlanArgs& a, Plan& out) {
  const int n = a.nranks;
  const uint64_t ts = a.typeSize, bytes = a.count * ts;
  if (!bytes) return;
  if (n == 1) {
    if (!a.inPlace) out.add(copy(bytes, {BufId::Input, 0}, {BufId::Output, 0}));
    return;
  }
  const RingView rv(a);
  const BufId acc = a.inPlace ? BufId::Input : BufId::Output;  // where sums and the result live

  // The halves: tree 0 takes the first ceil(count/2) elements, tree 1 the rest.
  const uint64_t half0 = (a.count + 1) / 2 * ts;
  const uint64_t halfBytes[2] = {half0, bytes - half0};
  TreeLinks links[2];
  for (int t = 0; t < 2; ++t) {
    links[t] = doubleBinaryTree(n, rv.pos, t);
    if (links[t].parent >= 0) links[t].parent = rv.rankAt(links[t].parent);
    for (int i = 0; i < links[t].nchildren; ++i) links[t].children[i] = rv.rankAt(links[t].children[i]);
  }
  // Column c of tree t is message 2c + t between every pair, both ways (a pair may be
  // linked in both trees, in either direction).
  uint64_t chunk = std::min(a.chunkBytes, std::max<uint64_t>(ts, a.scratchBytes / 4));
  chunk = columnChunk(half0, chunk, 2, a.typeSize);
  const uint64_t columns = (half0 + chunk - 1) / chunk;
  const uint64_t slotBytes = std::min(chunk, half0);
  Slots slots(out, slotBytes, slotCount(a.scratchBytes, slotBytes, columns * 2, 2));

  // The way up for column c of tree t: fold each child's partial sum (received into a
  // slot) into ours, then pass it to the parent. Returns the step after which our
  // partial (or, at the root, the result) is in acc; `sentUp` gets the send to the parent.
  auto up = [&](int t, uint64_t c, uint32_t* sentUp) {
    const uint64_t off = (t == 0 ? 0 : half0) + c * chunk;
    const uint64_t len = std::min(chunk, halfBytes[t] - c * chunk);
    Loc partial{BufId::Input, off};
    uint32_t ready = kNoDep;
    for (int i = 0; i < links[t].nchildren; ++i) {
      uint32_t free;
      const uint64_t slot = slots.take(&free);
      const uint32_t recv =
          out.add(transfer(StepKind::Recv, links[t].children[i], 2 * c + uint64_t(t), len, slots.loc(slot), free));
      Step fold = reduce(len, slots.loc(slot), partial, {acc, off}, recv, ready);
      fold.postDivisor = a.average && links[t].parent < 0 && i == links[t].nchildren - 1 ? uint32_t(n) : 1;
      ready = out.add(fold);
      slots.readBy(slot, ready);
      partial = {acc, off};
    }
    *sentUp = kNoDep;
    if (links[t].parent >= 0)
      *sentUp = out.add(transfer(StepKind::Send, links[t].parent, 2 * c + uint64_t(t), len, partial, ready));
    return ready;
  };
  // The way down: receive the result from the parent into acc (after our partial has
  // left, which may be the same memory), then send it to each child.
  auto down = [&](int t, uint64_t c, uint32_t ready, uint32_t sentUp) {
    const uint64_t off = (t == 0 ? 0 : half0) + c * chunk;
    const uint64_t len = std::min(chunk, halfBytes[t] - c * chunk);
    uint32_t have = ready;
    if (links[t].parent >= 0)
      have = out.add(transfer(StepKind::Recv, links[t].parent, 2 * c + uint64_t(t), len, {acc, off}, sentUp));
    for (int i = 0; i < links[t].nchildren; ++i)
      out.add(transfer(StepKind::Send, links[t].children[i], 2 * c + uint64_t(t), len, {acc, off}, have));
  };

  // Software pipeline: column c's way up is planned next to column c - lag's way down, so
  // that the sends to one peer, which the engine posts in plan order, never queue an
  // upward chunk behind a downward one still waiting for its round trip to the root.
  int depth = 1;
  while ((1 << depth) < n) ++depth;
  const uint64_t lag = std::min<uint64_t>(columns, uint64_t(2 * depth));
  std::vector<uint32_t> pending(size_t(4 * columns), kNoDep);  // per column and tree: ready, sentUp
  for (uint64_t i = 0; i < columns + lag; ++i) {
    for (int t = 0; t < 2; ++t) {
      if (i < columns && i * chunk < halfBytes[t]) {
        uint32_t* slot = &pending[size_t(4 * i + 2 * uint64_t(t))];
        slot[0] = up(t, i, &slot[1]);
      }
      if (i >= lag && (i - lag) * chunk < halfBytes[t]) {
        const uint32_t* slot = &pending[size_t(4 * (i - lag) + 2 * uint64_t(t))];
        down(t, i - lag, slot[0], slot[1]);
      }
    }
  }
  // A column is at most 16 steps (two trees, each: 2 receives and folds, a send up, a
  // receive down, 2 sends down); the window spans the lag and two more columns.
  out.window = uint32_t(std::min<uint64_t>(out.steps.size(), 16 * (lag + 2)));
}

}  // namespace tempo::algo
