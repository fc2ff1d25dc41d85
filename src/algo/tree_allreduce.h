// Double binary tree all-reduce (NCCL's "Tree"): the vector is split in two halves, each
// reduced up one binary tree to its root and broadcast back down it, pipelined in chunks.
// The two trees are complementary: a position that is interior in one is (except for a
// root) a leaf in the other, so every rank sends and receives about as much as in one
// tree while both halves move at once, and the depth is ceil(log2 n) + 1 hops, against
// the ring's 2(n-1) steps. Trees are laid over ring positions (CollPlanArgs::ring, the
// topology ring when given): every subtree is a contiguous run of positions, so on a
// locality ring it stays inside as few hosts and switches as possible.
#pragma once

#include <cstdint>

#include "src/algo/args.h"
#include "src/algo/plan.h"

namespace tempo::algo {

// One position's links in one tree, in positions (-1: none).
struct TreeLinks {
  int parent = -1;
  int children[2] = {-1, -1};
  int nchildren = 0;
};

// Tree 0: the in-order binary tree over positions 0..n-1 (position 0 is the root, with one
// child, the highest power of two below n; a position with lowest set bit b has children
// p - b/2 and p + b/2, the latter shrunk to fit below n). Tree 1: tree 0 mirrored
// (p -> n-1-p) when n is even, shifted by one position when n is odd.
TreeLinks doubleBinaryTree(int n, int pos, int tree);

// Plans the all-reduce. Uses count, typeSize, inPlace, average, rank, nranks, chunkBytes,
// scratchBytes and ring.
void planTreeAllReduce(const CollPlanArgs& a, Plan& out);

}  // namespace tempo::algo
