// Ring index math, in ring positions (0..n-1 around the ring), as tiny pure functions.
//
// Position p sends to p+1 and receives from p-1. Reduce-scatter step s (0..n-2): send
// segment p-s, receive segment p-s-1 and fold it in; after n-1 steps position p owns the
// fully reduced segment p+1. All-gather step s: send segment p+1-s, receive segment p-s.
#pragma once

namespace tempo::algo::ring {

constexpr int mod(int x, int n) { return ((x % n) + n) % n; }
constexpr int next(int p, int n) { return mod(p + 1, n); }
constexpr int prev(int p, int n) { return mod(p - 1, n); }
constexpr int rsSendSeg(int p, int s, int n) { return mod(p - s, n); }
constexpr int rsRecvSeg(int p, int s, int n) { return mod(p - s - 1, n); }
constexpr int ownedSeg(int p, int n) { return mod(p + 1, n); }
constexpr int agSendSeg(int p, int s, int n) { return mod(p + 1 - s, n); }
constexpr int agRecvSeg(int p, int s, int n) { return mod(p - s, n); }

}  // namespace tempo::algo::ring
