#include "transports/shm/shm.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstddef>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "src/core/clock.h"
#include "src/core/log.h"
#include "src/core/param.h"
#include "transports/shm/mode_choice.h"

namespace tempo::transport::shm {
namespace {

// ---- layout of a region (shared between processes; every field fixed-size) ----

constexpr uint32_t kRegionMagic = 0x344d5354;  // "TSM4"
constexpr size_t kSlotBytes = 8192;
constexpr uint64_t kSlots = 64;  // per ring; a power of two
constexpr size_t kHeaderBytes = 64;
// A message occupies consecutive slots, its header at the start of the first and its
// payload right after it, at most kMaxMsgSlots of them (128 KiB). An Eager message's
// header is only the fields it uses (type, status, tag, len: kEagerHeaderBytes), so that
// a small message and its header share one cache line, the unit the receiver's core
// fetches from the sender's.
constexpr uint64_t kMaxMsgSlots = 16;
constexpr size_t kMaxInline = kMaxMsgSlots * kSlotBytes - kHeaderBytes;
constexpr size_t kStreamFrag = 4 * kSlotBytes - kHeaderBytes;  // payload of one Data message
// An arrival no receive has claimed is copied out of the ring only while the peer's
// unclaimed eager payload stays within one largest eager message and its unclaimed
// arrivals number fewer than kMaxUnexpected; beyond that it waits in the ring, which
// stops the sender once the ring is full. Without this bound a sender that runs ahead
// (a broadcast root, whose eager sends complete at once) grows the receiver's heap
// without limit, and every message is copied twice. Receives are posted in the order
// their peer sends (per peer FIFO), so the message a receiver waits for is never stuck
// behind ones it has not posted yet.
constexpr size_t kMaxUnexpected = 256;
uint64_t slotsFor(size_t header, size_t payload) { return (header + payload + kSlotBytes - 1) / kSlotBytes; }

enum class Type : uint32_t {
  Eager = 1,  // tag, len, payload inline
  Rts = 2,    // ready to send: tag, len, the sender's buffer address, send cookie
  Fin = 3,    // receiver -> sender: the pull of `cookie` is done (status 0) or failed
  Cts = 4,    // receiver -> sender: stream `cookie` to receive `peerCookie`
  Data = 5,   // one fragment of a streamed message: peerCookie, offset, fragLen, payload
  Pad = 6,    // skip `len` slots: a message never wraps around the end of the ring
  Push = 7,   // receiver -> sender: write bytes [offset, len) of `cookie` to `addr` + offset,
              // if the claim for ticket `tag` is still pending (Ring::pushClaim)
  PushDone = 8,  // sender -> receiver: the Push for `peerCookie` is done (0), failed (1), declined (2)
};

// A pulled message of at least TEMPO_SHM_SPLIT bytes is moved by both processes at once:
// the receiver pulls the first half while the sender, asked by a Push, writes the second
// half with process_vm_writev. A copy by one core runs at a fraction of the memory
// system's bandwidth here (measured on this VM: 4 MiB in 390 us pulled alone, 177 us
// split), and the sender of a broadcast or a chain step would otherwise sit idle.

struct SlotHeader {
  uint32_t type;
  uint32_t status;
  uint64_t tag;
  uint64_t len;
  uint64_t addr;
  uint64_t cookie;      // the sender's request
  uint64_t peerCookie;  // the receiver's request (Cts, Data)
  uint64_t offset;
  uint32_t fragLen;
  uint32_t reserved;
};
static_assert(sizeof(SlotHeader) <= kHeaderBytes);
constexpr size_t kEagerHeaderBytes = offsetof(SlotHeader, addr);
constexpr size_t headerBytes(Type t) { return t == Type::Eager ? kEagerHeaderBytes : kHeaderBytes; }

// One single-producer single-consumer ring. `head` is written by the sender only, `tail`
// by the receiver only; a slot is the sender's while head - tail < kSlots. A message's
// slots are contiguous in memory (a Pad fills the end of the ring when it would wrap) and
// published together, by one store of `head`.
//
// `pushClaim` settles who moves the second half of a split message (see Type::Push): the
// ring's writer, as receiver of that message, sets it to (ticket << 2 | kPushPending)
// before it sends the Push; the ring's reader, the message's sender, may take the work
// only by changing it to kPushClaimed, and the receiver, once it has pulled its own half,
// may take it back only by changing kPushPending to 0. One of the two changes succeeds,
// so the second half is moved exactly once, and a sender busy elsewhere (copying its own
// input, or descheduled) never leaves the receiver waiting. 0: no Push outstanding.
struct alignas(64) Ring {
  std::atomic<uint64_t> head;
  char pad0[56];
  std::atomic<uint64_t> tail;
  char pad1[56];
  std::atomic<uint64_t> pushClaim;
  char pad2[56];
  unsigned char slots[kSlots][kSlotBytes];
};
constexpr uint64_t kPushPending = 1, kPushClaimed = 2;

struct alignas(64) RegionHeader {
  uint32_t magic;
  uint32_t nranks;
  std::atomic<uint32_t> bell;      // bumped by every sender after it writes
  std::atomic<uint32_t> sleeping;  // 1 while the owner waits on `bell`
  std::atomic<uint32_t> attached;  // peers that have mapped the region
};
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<uint32_t>::is_always_lock_free);

// The header has the first page, and ring `s` (written by rank s) the pages from
// ringOffset(s), so that a sender maps only the header and its own ring.
constexpr size_t kPage = 4096;
constexpr size_t kRingStride = (sizeof(Ring) + kPage - 1) / kPage * kPage;
static_assert(sizeof(RegionHeader) <= kPage);
size_t ringOffset(int sender) { return kPage + kRingStride * size_t(sender); }
size_t regionBytes(int nranks) { return ringOffset(nranks); }

// What a peer needs to reach this endpoint, published through the bootstrap.
struct Address {
  uint32_t magic;
  uint32_t pid;
  uint64_t probeAddr;   // a word in this process that peers read to test cross-memory attach
  uint64_t probeValue;  // what they must find there
  uint32_t nranks;
  uint32_t reserved;
  char name[96];        // the region's shm_open name
};
static_assert(sizeof(Address) <= kMaxAddressBytes);

long futex(std::atomic<uint32_t>* word, int op, uint32_t val, const timespec* timeout) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, val, timeout, nullptr, 0);
}

// ---- RAII for the mappings ----

class Mapping {
 public:
  Mapping() = default;
  Mapping(void* p, size_t n) : p_(p), n_(n) {}
  Mapping(Mapping&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(o.n_) {}
  Mapping& operator=(Mapping&& o) noexcept {
    if (this != &o) {
      reset();
      p_ = std::exchange(o.p_, nullptr);
      n_ = o.n_;
    }
    return *this;
  }
  ~Mapping() { reset(); }
  void reset() {
    if (p_) munmap(p_, n_);
    p_ = nullptr;
  }
  void* get() const { return p_; }

 private:
  void* p_ = nullptr;
  size_t n_ = 0;
};

// Tells whether a peer process has exited: a pidfd (which, unlike a pid, cannot come to
// name another process), or kill(pid, 0) where the kernel has no pidfd_open.
class ProcessWatch {
 public:
  ProcessWatch() = default;
  explicit ProcessWatch(pid_t pid) : pid_(pid), fd_(int(syscall(SYS_pidfd_open, pid, 0))) {}
  ProcessWatch(ProcessWatch&& o) noexcept : pid_(std::exchange(o.pid_, 0)), fd_(std::exchange(o.fd_, -1)) {}
  ProcessWatch& operator=(ProcessWatch&& o) noexcept {
    if (this != &o) {
      reset();
      pid_ = std::exchange(o.pid_, 0);
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  ~ProcessWatch() { reset(); }
  bool exited() const {
    if (fd_ >= 0) {
      pollfd p{fd_, POLLIN, 0};
      return poll(&p, 1, 0) == 1;  // a pidfd turns readable when its process exits
    }
    return pid_ > 0 && kill(pid_, 0) != 0 && errno == ESRCH;
  }

 private:
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  pid_t pid_ = 0;
  int fd_ = -1;
};

// Writes every page of [p, p + bytes) once from this process. First touches cost 6-11 us
// a page on the VMs measured (machine.md), and not only the guest's page fault: the
// hypervisor fills its own page tables on the first access from each address space, so
// neither MAP_POPULATE nor MADV_POPULATE_WRITE avoids it; only a user-space access does.
// Unprepared, a ring pays that for both of its 8 KiB slot pages on each side during its
// first lap, which made the first ~20 collectives of a job 5-7x slower. The write is an
// atomic add of zero, so it changes nothing a peer may be writing there.
void touchPages(void* p, size_t bytes) {
  for (size_t off = 0; off < bytes; off += kPage)
    reinterpret_cast<std::atomic<uint32_t>*>(static_cast<char*>(p) + off)->fetch_add(0, std::memory_order_relaxed);
}

// Maps `bytes` of `name` from `offset` (creating it when `create`), every page touched.
Result<Mapping> mapRegion(const std::string& name, size_t bytes, bool create, size_t offset = 0) {
  int fd = create ? shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600) : shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) return fail(Status::SystemError, "shm: shm_open(%s) failed: %s", name.c_str(), strerror(errno));
  if (create && ftruncate(fd, off_t(bytes)) != 0) {
    int e = errno;
    close(fd);
    shm_unlink(name.c_str());
    return fail(Status::SystemError, "shm: sizing %s to %zu bytes failed: %s", name.c_str(), bytes, strerror(e));
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off_t(offset));
  int e = errno;
  close(fd);
  if (p == MAP_FAILED) {
    if (create) shm_unlink(name.c_str());
    return fail(Status::SystemError, "shm: mapping %s (%zu bytes) failed: %s", name.c_str(), bytes, strerror(e));
  }
  touchPages(p, bytes);
  return Mapping(p, bytes);
}

// A killed process leaves its regions behind; none can belong to a live process with our
// pid, so before the first region of this process they are removed.
void removeStaleRegions() {
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string prefix = "tempo-shm." + std::to_string(getpid()) + ".";
    DIR* dir = opendir("/dev/shm");
    if (!dir) return;
    while (dirent* e = readdir(dir))
      if (strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0) shm_unlink((std::string("/") + e->d_name).c_str());
    closedir(dir);
  });
}

// ---- per-request state, kept in Request::internal ----

struct ReqState {
  void* buf;
  size_t len;      // send length, or receive capacity
  uint64_t tag;
  size_t moved;    // bytes streamed so far (Data); a split receive: where the Push starts
  uint64_t peerCookie;  // a split receive: the sender's buffer address
  uint32_t pushStatus;  // a split send: 1 if writing the Push part failed
  // A rendezvous receive whose way is being timed (Peer::adaptive):
  uint32_t copiedNs;    // time this process spent copying it so far
  int64_t matchedNs;    // when it matched (0: untimed)
  bool busy;            // this process had sends of its own in flight when it matched
};
static_assert(sizeof(ReqState) <= sizeof(Request::internal));
ReqState& state(Request* r) { return *reinterpret_cast<ReqState*>(r->internal); }
uint64_t cookieOf(Request* r) { return reinterpret_cast<uintptr_t>(r); }

// An arrival no receive has claimed yet.
struct Unexpected {
  Type type;
  uint64_t tag;
  uint64_t len;
  uint64_t addr;    // Rts
  uint64_t cookie;  // Rts
  std::vector<unsigned char> payload;  // Eager (capacity reused)
};

struct Peer {
  bool connected = false;
  Status failed = Status::Success;  // RemoteError once its process has exited
  pid_t pid = 0;
  ProcessWatch watch;  // another process's only
  bool cma = false;      // messages from this peer may be pulled by cross-memory attach
  bool adaptive = false; // ... and whether each is, is chosen by timing both (TEMPO_SHM_CMA=2,
                         // or -1 where every local rank has a core)
  ModeChooser modes[2];  // adaptive: the timings, per size class, [1] while we send as well
  uint64_t decidedClasses[2] = {};  // adaptive: size classes whose first choice has been logged
  int64_t lastTimedNs = 0;  // adaptive: when the last timed receive from this peer completed
  size_t eagerMax = 0;  // messages up to this many bytes go inline (eagerLimit)
  Mapping remoteHead;    // the header page of the peer's region
  Mapping remoteRing;    // our ring in the peer's region
  Ring* out = nullptr;   // our ring in the peer's region
  uint64_t tailSeen = 0; // the peer's tail of `out` as last read (it only grows)
  RegionHeader* remoteHeader = nullptr;
  Ring* in = nullptr;    // the peer's ring in our region
  std::deque<Request*> posted;          // receives, in posting order
  std::deque<Unexpected> unexpected;    // arrivals, in arrival order
  size_t unexpectedBytes = 0;           // eager payload bytes held in `unexpected`
  uint64_t parkedHead = ~0ull;          // the ring's head when drain() last left a message in it
  std::vector<Request*> awaitingPull;   // our rendezvous sends the peer has not finished
  std::vector<Request*> awaitingData;   // our receives being streamed to
  std::vector<Request*> awaitingPush;   // our split receives whose second half the sender writes
  uint64_t pushTicket = 0;              // our last Push to this peer
  std::deque<Request*> streams;         // our sends cleared to stream, in Cts order
  std::deque<SlotHeader> control;       // Fin/Cts waiting for room in the peer's ring
};

class ShmEndpoint final : public Endpoint {
 public:
  ShmEndpoint(int rank, int nranks, int peers)
      : rank_(rank), nranks_(nranks), expectedPeers_(peers), peers_(size_t(nranks)) {}
  ~ShmEndpoint() override {
    cancelAll();
    if (!unlinked_ && !name_.empty()) shm_unlink(name_.c_str());
  }
  Status open();

  Kind kind() const override { return Kind::Shm; }
  const char* name() const override { return "shm"; }
  std::span<const std::byte> address() const override {
    return {reinterpret_cast<const std::byte*>(&address_), sizeof address_};
  }
  Status connect(int peer, std::span<const std::byte> address) override;
  Status isend(int peer, uint64_t tag, const void* buf, size_t len, Request* req) override;
  Status irecv(int peer, uint64_t tag, void* buf, size_t len, Request* req) override;
  int progress() override;
  void wait(int64_t ns) override;
  int maxOutstanding() const override { return 1024; }
  void cancelAll() override;

 private:
  Status checkPeer(int peer, const char* what) const;
  bool waitingOn(const Peer& p) const {
    return !p.posted.empty() || !p.awaitingPull.empty() || !p.awaitingData.empty() || !p.awaitingPush.empty() ||
           !p.streams.empty() || !p.control.empty();
  }
  // Fails every request that waits on `peer`, whose process has exited.
  void failPeer(int peer, Peer& p);
  bool write(Peer& p, const SlotHeader& h, const void* payload, size_t bytes);
  void complete(Request* r, Status s, size_t bytes) {
    r->status = s;
    r->bytes = bytes;
    finished_.push_back(r);
  }
  // Completes rendezvous receive `r` of `len` bytes from `from`, moved by `way`, of which
  // the sender copied `senderBytes` (a stream: all; a split pull: the pushed half). When its
  // way was chosen by timing, a success adds its cost to the timings (see finishTimed).
  void finishTimed(int from, Peer& p, Request* r, Status s, size_t len, ModeChooser::Mode way, size_t senderBytes);
  // Whether this process has rendezvous sends in flight (to any peer).
  bool sending() const {
    for (const Peer& q : peers_)
      if (!q.awaitingPull.empty() || !q.streams.empty()) return true;
    return false;
  }
  void drain(int from, Peer& p);
  // Handles one message; false if it must stay in the ring for now (an unclaimed arrival
  // beyond the peer's unexpected-message bound).
  bool arrive(int from, Peer& p, const SlotHeader& h, const unsigned char* payload);
  void match(int from, Peer& p, Request* r, Type type, uint64_t len, uint64_t addr, uint64_t cookie,
             const unsigned char* payload);
  Status pull(int from, Peer& p, void* dst, uint64_t src, size_t len);
  // process_vm_readv (or, with `write`, process_vm_writev) of `len` bytes between `local`
  // here and `remote` in `peer`'s address space.
  Status crossCopy(int peer, Peer& p, void* local, uint64_t remote, size_t len, bool write);
  void flush(Peer& p);
  static bool take(std::vector<Request*>& v, uint64_t cookie, Request** out);
  void unlinkWhenAttached();

  int rank_, nranks_;
  int expectedPeers_;  // peers that will map our region
  std::string name_;
  Mapping region_;
  RegionHeader* header_ = nullptr;
  Address address_{};
  bool unlinked_ = false;
  bool closed_ = false;
  std::vector<Peer> peers_;
  std::vector<Request*> finished_;  // completed, reported by the next progress()
  std::vector<Unexpected> spare_;   // recycled unexpected entries (payload capacity kept)
  int64_t nextWatch_ = 0;           // when progress() next asks whether waited-on peers live
  uint32_t idlePasses_ = 0;         // progress() calls that completed nothing
  const size_t splitMin_ = size_t(std::max<int64_t>(0, param::ShmSplit()));
  uint64_t probe_ = 0;
  // TEMPO_SHM_EAGER, or -1: 64 KiB. An eager message costs one copy on each side and no
  // handshake; above the limit a message pays a round trip (ready-to-send, then a pull or
  // clear-to-send) before any byte moves. Measured here, 2 processes
  // (`broadcast_perf -n 200`, busbw GB/s, limit 16 KiB against 64 KiB, three alternating
  // runs): 32 KiB 5.9-6.4 against 10.1-10.5, 64 KiB 9.7-9.9 against 15.9-17.3, and the
  // all-reduce, all-gather and reduce-scatter at 64 KiB gained as well; on another day a
  // 32 KiB pull had beaten a 32 KiB eager copy (3.8 against 5.0 us), and the limit was 16
  // KiB where pulling is possible; today's pulls of 64 KiB cost 5-12 us after their handshake.
  size_t eagerLimit() const {
    const int64_t v = param::ShmEager();
    return std::min<size_t>(kMaxInline, v < 0 ? 65536 : size_t(v));
  }
  // Whether this host's local ranks outnumber its cores.
  bool shareCores() const { return long(expectedPeers_) + 1 > sysconf(_SC_NPROCESSORS_ONLN); }
};

std::atomic<uint32_t> g_regionSerial{0};

Status ShmEndpoint::open() {
  removeStaleRegions();
  char name[64];
  snprintf(name, sizeof name, "/tempo-shm.%d.%u", int(getpid()), g_regionSerial.fetch_add(1));
  name_ = name;
  TEMPO_ASSIGN(region_, mapRegion(name_, regionBytes(nranks_), /*create=*/true));
  header_ = static_cast<RegionHeader*>(region_.get());
  header_->magic = kRegionMagic;
  header_->nranks = uint32_t(nranks_);
  probe_ = (uint64_t(getpid()) << 32) ^ uint64_t(reinterpret_cast<uintptr_t>(this)) ^ 0x9e3779b97f4a7c15ull;
  address_.magic = kRegionMagic;
  address_.pid = uint32_t(getpid());
  address_.probeAddr = reinterpret_cast<uintptr_t>(&probe_);
  address_.probeValue = probe_;
  address_.nranks = uint32_t(nranks_);
  snprintf(address_.name, sizeof address_.name, "%s", name_.c_str());
  return Status::Success;
}

Status ShmEndpoint::connect(int peer, std::span<const std::byte> bytes) {
  if (peer < 0 || peer >= nranks_ || peer == rank_)
    return fail(Status::InvalidArgument, "shm: cannot connect rank %d to peer %d of %d", rank_, peer, nranks_);
  Address a;
  if (bytes.size() != sizeof a) return fail(Status::InvalidUsage, "shm: peer %d published a malformed address", peer);
  memcpy(&a, bytes.data(), sizeof a);
  a.name[sizeof a.name - 1] = '\0';
  if (a.magic != kRegionMagic || a.nranks != uint32_t(nranks_))
    return fail(Status::InvalidUsage, "shm: peer %d published an address of another job or version", peer);
  Peer& p = peers_[size_t(peer)];
  TEMPO_ASSIGN(p.remoteHead, mapRegion(a.name, kPage, /*create=*/false));
  p.remoteHeader = static_cast<RegionHeader*>(p.remoteHead.get());
  if (p.remoteHeader->magic != kRegionMagic || p.remoteHeader->nranks != uint32_t(nranks_))
    return fail(Status::InvalidUsage, "shm: region %s of peer %d is not a Tempo region of %d ranks", a.name, peer,
                nranks_);
  TEMPO_ASSIGN(p.remoteRing, mapRegion(a.name, kRingStride, /*create=*/false, ringOffset(rank_)));
  p.out = static_cast<Ring*>(p.remoteRing.get());
  p.tailSeen = p.out->tail.load(std::memory_order_acquire);
  p.in = reinterpret_cast<Ring*>(static_cast<char*>(region_.get()) + ringOffset(peer));
  p.pid = pid_t(a.pid);
  if (p.pid != getpid()) p.watch = ProcessWatch(p.pid);
  // Cross-memory attach works when the peer's probe word reads back as published.
  // TEMPO_SHM_CMA: 0 streams, 1 pulls, 2 chooses by timings; -1 (the default) chooses by
  // timings where every local rank has a core and streams where they outnumber the cores:
  // timings there measure the scheduler more than the copies, and streaming, which shares
  // each message's copying between the two processes, was ahead of pulling and of choosing
  // by timings in most broadcast and all-gather sizes with 4 processes on 2 cores.
  const int64_t cmaMode = param::ShmCma() < 0 ? (shareCores() ? 0 : 2) : param::ShmCma();
  p.cma = false;
  if (cmaMode > 0) {
    uint64_t seen = 0;
    iovec local{&seen, sizeof seen}, remote{reinterpret_cast<void*>(uintptr_t(a.probeAddr)), sizeof seen};
    p.cma = process_vm_readv(p.pid, &local, 1, &remote, 1, 0) == ssize_t(sizeof seen) && seen == a.probeValue;
    if (!p.cma)
      TEMPO_INFO(log::Net | log::Shm, "shm: rank %d cannot read pid %u by cross-memory attach (%s); large messages "
                 "stream through shared memory", rank_, a.pid, strerror(errno));
  }
  p.adaptive = p.cma && cmaMode == 2;
  p.eagerMax = eagerLimit();
  p.connected = true;
  p.remoteHeader->attached.fetch_add(1, std::memory_order_acq_rel);
  TEMPO_INFO(log::Net | log::Shm, "shm: rank %d -> %d (pid %u) eager <= %zu B, larger %s", rank_, peer, a.pid,
             p.eagerMax, p.adaptive ? "pulled by cross-memory attach or streamed, whichever its receiver times faster"
                         : p.cma    ? "by cross-memory attach"
                         : param::ShmCma() < 0 && shareCores() ? "streamed (local ranks outnumber cores)"
                                    : "streamed");
  unlinkWhenAttached();
  return Status::Success;
}

// Once every expected peer has mapped our region, the name can go, so that nothing is left
// in /dev/shm even if the process is killed later.
void ShmEndpoint::unlinkWhenAttached() {
  if (unlinked_ || int(header_->attached.load(std::memory_order_acquire)) < expectedPeers_) return;
  shm_unlink(name_.c_str());
  unlinked_ = true;
}

Status ShmEndpoint::checkPeer(int peer, const char* what) const {
  if (closed_) return fail(Status::RemoteError, "shm: %s on an aborted endpoint", what);
  if (peer < 0 || peer >= nranks_ || !peers_[size_t(peer)].connected)
    return fail(Status::InvalidArgument, "shm: %s to peer %d, which is not connected", what, peer);
  if (!ok(peers_[size_t(peer)].failed))
    return fail(Status::RemoteError, "shm: %s to rank %d, whose process (pid %d) has exited", what, peer,
                int(peers_[size_t(peer)].pid));
  return Status::Success;
}

void ShmEndpoint::failPeer(int peer, Peer& p) {
  p.failed = fail(Status::RemoteError, "shm: rank %d's process (pid %d) exited with transfers outstanding", peer,
                  int(p.pid));
  for (auto* list : {&p.awaitingPull, &p.awaitingData, &p.awaitingPush})
    for (Request* r : *list) complete(r, p.failed, 0);
  for (auto* list : {&p.posted, &p.streams})
    for (Request* r : *list) complete(r, p.failed, 0);
  p.awaitingPull.clear();
  p.awaitingData.clear();
  p.awaitingPush.clear();
  p.posted.clear();
  p.streams.clear();
  p.control.clear();
}

// Writes one message (at most kMaxInline payload bytes) into our ring in `p`'s region;
// false when the ring has no room for it.
bool ShmEndpoint::write(Peer& p, const SlotHeader& h, const void* payload, size_t bytes) {
  Ring* r = p.out;
  const uint64_t head = r->head.load(std::memory_order_relaxed);
  const size_t header = headerBytes(Type(h.type));
  const uint64_t need = slotsFor(header, bytes), at = head & (kSlots - 1);
  const uint64_t pad = at + need > kSlots ? kSlots - at : 0;
  // The receiver's tail is re-read (a cache line it writes) only when the copy seen last
  // leaves too little room.
  if (head + pad + need - p.tailSeen > kSlots) {
    p.tailSeen = r->tail.load(std::memory_order_acquire);
    if (head + pad + need - p.tailSeen > kSlots) return false;
  }
  if (pad) {
    SlotHeader skip{};
    skip.type = uint32_t(Type::Pad);
    skip.len = pad;
    memcpy(r->slots[at], &skip, sizeof skip);
  }
  unsigned char* slot = r->slots[(head + pad) & (kSlots - 1)];
  memcpy(slot, &h, header);
  if (bytes) memcpy(slot + header, payload, bytes);
  r->head.store(head + pad + need, std::memory_order_seq_cst);
  // Wake the owner if it sleeps (see wait() for the ordering argument).
  if (p.remoteHeader->sleeping.load(std::memory_order_seq_cst)) {
    p.remoteHeader->bell.fetch_add(1, std::memory_order_seq_cst);
    futex(&p.remoteHeader->bell, FUTEX_WAKE, INT_MAX, nullptr);
  }
  return true;
}

Status ShmEndpoint::isend(int peer, uint64_t tag, const void* buf, size_t len, Request* req) {
  TEMPO_TRY(checkPeer(peer, "send"));
  Peer& p = peers_[size_t(peer)];
  SlotHeader h{};
  h.tag = tag;
  h.len = len;
  const bool eager = len <= p.eagerMax;
  h.type = uint32_t(eager ? Type::Eager : Type::Rts);
  h.addr = reinterpret_cast<uintptr_t>(buf);
  h.cookie = cookieOf(req);
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (write(p, h, buf, eager ? len : 0)) {
      if (eager) {
        complete(req, Status::Success, len);
      } else {
        state(req) = ReqState{const_cast<void*>(buf), len, tag, 0, 0, 0, 0, 0, false};
        p.awaitingPull.push_back(req);
      }
      return Status::Success;
    }
    progress();  // the peer may have drained meanwhile
  }
  return Status::InProgress;
}

Status ShmEndpoint::irecv(int peer, uint64_t tag, void* buf, size_t len, Request* req) {
  TEMPO_TRY(checkPeer(peer, "receive"));
  Peer& p = peers_[size_t(peer)];
  state(req) = ReqState{buf, len, tag, 0, 0, 0, 0, 0, false};
  for (auto it = p.unexpected.begin(); it != p.unexpected.end(); ++it) {
    if (it->tag != tag) continue;
    match(peer, p, req, it->type, it->len, it->addr, it->cookie, it->payload.data());
    if (it->type == Type::Eager) p.unexpectedBytes -= it->len;
    spare_.push_back(std::move(*it));
    p.unexpected.erase(it);
    return Status::Success;
  }
  p.posted.push_back(req);
  p.parkedHead = ~0ull;  // a message left in the ring may be this one's: look again
  return Status::Success;
}

// Pairs receive `r` with an arrival from `from`.
void ShmEndpoint::match(int from, Peer& p, Request* r, Type type, uint64_t len, uint64_t addr, uint64_t cookie,
                        const unsigned char* payload) {
  ReqState& st = state(r);
  const bool fits = len <= st.len;
  if (!fits)
    complete(r, fail(Status::InvalidUsage, "shm: a message of %lu bytes from rank %d is longer than the receive (%zu)",
                     (unsigned long)len, from, st.len),
             0);
  if (type == Type::Eager) {
    if (fits) {
      if (len) memcpy(st.buf, payload, len);
      complete(r, Status::Success, len);
    }
    return;
  }
  // Rendezvous: pull it now, or clear the sender to stream it.
  SlotHeader c{};
  c.cookie = cookie;
  const bool busy = sending();
  st.busy = p.adaptive && busy;
  const bool pullIt = fits && p.cma && (!p.adaptive || p.modes[st.busy].pick(len) == ModeChooser::Pull);
  st.matchedNs = fits && p.adaptive ? nowNs() : 0;
  st.copiedNs = 0;
  if (pullIt) {
    // Split: ask the sender for the second half first, so that it copies while we do
    // (one Push outstanding per peer). Only while we send nothing ourselves: then the
    // sender, as a rule, has its own receives to move (an all-gather, a chain's middle),
    // and the half it is asked to write waits behind them (2 processes, all-gather of 256
    // KiB-4 MiB, always pulled: 4.9-8.4 GB/s split, 6.2-10.8 not).
    const bool idle = !busy && p.out->pushClaim.load(std::memory_order_acquire) == 0;
    const size_t split = idle && splitMin_ && len >= splitMin_ ? (len / 2) & ~(kPage - 1) : len;
    const uint64_t pending = (p.pushTicket + 1) << 2 | kPushPending;
    if (split < len) {
      ++p.pushTicket;
      p.out->pushClaim.store(pending, std::memory_order_release);
      SlotHeader q{};
      q.type = uint32_t(Type::Push);
      q.tag = p.pushTicket;
      q.cookie = cookie;
      q.peerCookie = cookieOf(r);
      q.addr = reinterpret_cast<uintptr_t>(st.buf);
      q.offset = split;
      q.len = len;
      p.control.push_back(q);
      flush(p);
    }
    Status s = pull(from, p, st.buf, addr, split);
    uint64_t expect = pending;
    if (split < len && p.out->pushClaim.compare_exchange_strong(expect, 0, std::memory_order_acq_rel)) {
      // The sender has not started its half (it is busy elsewhere): pull that too.
      if (ok(s)) s = pull(from, p, static_cast<char*>(st.buf) + split, addr + split, len - split);
      finishTimed(from, p, r, s, len, ModeChooser::Pull, 0);
    } else if (ok(s) && split < len) {
      st.len = len;
      st.moved = split;
      st.peerCookie = addr;
      if (st.matchedNs) st.copiedNs = uint32_t(std::min<int64_t>(UINT32_MAX, nowNs() - st.matchedNs));
      p.awaitingPush.push_back(r);
    } else {
      finishTimed(from, p, r, s, len, ModeChooser::Pull, 0);
    }
    c.type = uint32_t(Type::Fin);
    c.status = ok(s) ? 0 : 1;
  } else if (fits) {
    st.len = len;
    st.moved = 0;
    p.awaitingData.push_back(r);
    c.type = uint32_t(Type::Cts);
    c.peerCookie = cookieOf(r);
  } else {
    c.type = uint32_t(Type::Fin);  // the sender's part is over; the receive has failed
  }
  p.control.push_back(c);
  flush(p);
}

// The cost of a timed receive is its service time: from its match, or from the completion
// of the previous timed receive from the same peer if that came later (several matched at
// once are moved one after another, and the last should not be charged for the others'
// time), to its own completion. While this process sends as well (an all-gather, a chain's middle),
// so does its peer, as a rule, and what the peer copies for us it does not copy for its own
// receives: then the sender's share of the copying, estimated from our own copying rate
// (the same bytes by the same kind of copy), is added. A stream makes the sender copy every
// byte once more; a pull none, or the half it pushes.
void ShmEndpoint::finishTimed(int from, Peer& p, Request* r, Status s, size_t len, ModeChooser::Mode way,
                              size_t senderBytes) {
  const ReqState st = state(r);
  complete(r, s, ok(s) ? len : 0);
  if (!st.matchedNs || !ok(s)) return;
  const int64_t now = nowNs();
  int64_t cost = now - std::max(st.matchedNs, p.lastTimedNs);
  p.lastTimedNs = now;
  const size_t ownBytes = len - std::min(len, senderBytes);
  if (st.busy && senderBytes && ownBytes) cost += int64_t(double(st.copiedNs) * double(senderBytes) / double(ownBytes));
  ModeChooser& modes = p.modes[st.busy];
  modes.record(way, len, cost);
  const int k = ModeChooser::classOf(len);
  uint64_t& logged = p.decidedClasses[st.busy];
  if (logged >> k & 1 || !modes.decided(len)) return;
  logged |= uint64_t(1) << k;
  const double streamed = modes.medianCost(ModeChooser::Stream, len), pulled = modes.medianCost(ModeChooser::Pull, len);
  TEMPO_INFO(log::Net | log::Shm, "shm: rank %d <- %d: messages of %zu-%zu KiB%s %s (median %.2f GB/s pulled, %.2f "
             "streamed; both kept timed)", rank_, from, (size_t(1) << k) >> 10, (size_t(2) << k) >> 10,
             st.busy ? " while sending too" : "",
             modes.preferred(len) == ModeChooser::Pull ? "pulled by cross-memory attach" : "streamed through the ring",
             pulled > 0 ? 1 / pulled : 0.0, streamed > 0 ? 1 / streamed : 0.0);
}

Status ShmEndpoint::pull(int from, Peer& p, void* dst, uint64_t src, size_t len) {
  return crossCopy(from, p, dst, src, len, false);
}

Status ShmEndpoint::crossCopy(int peer, Peer& p, void* local, uint64_t remote, size_t len, bool write) {
  size_t done = 0;
  while (done < len) {
    iovec l{static_cast<char*>(local) + done, len - done};
    iovec r{reinterpret_cast<void*>(uintptr_t(remote + done)), len - done};
    ssize_t n = write ? process_vm_writev(p.pid, &l, 1, &r, 1, 0) : process_vm_readv(p.pid, &l, 1, &r, 1, 0);
    if (n <= 0)
      return fail(errno == ESRCH ? Status::RemoteError : Status::SystemError,
                  "shm: %s %zu bytes %s rank %d (pid %d) failed: %s", write ? "writing" : "reading", len - done,
                  write ? "to" : "from", peer, int(p.pid), n < 0 ? strerror(errno) : "no progress");
    done += size_t(n);
  }
  return Status::Success;
}

// Sends queued control messages and streams cleared sends while `p`'s ring has room.
void ShmEndpoint::flush(Peer& p) {
  while (!p.control.empty() && write(p, p.control.front(), nullptr, 0)) p.control.pop_front();
  while (!p.streams.empty()) {
    Request* r = p.streams.front();
    ReqState& st = state(r);
    SlotHeader h{};
    h.type = uint32_t(Type::Data);
    h.peerCookie = st.peerCookie;
    h.offset = st.moved;
    h.fragLen = uint32_t(std::min(kStreamFrag, st.len - st.moved));
    if (!write(p, h, static_cast<const char*>(st.buf) + st.moved, h.fragLen)) return;
    st.moved += h.fragLen;
    if (st.moved == st.len) {
      p.streams.pop_front();
      complete(r, Status::Success, st.len);
    }
  }
}

bool ShmEndpoint::take(std::vector<Request*>& v, uint64_t cookie, Request** out) {
  for (size_t i = 0; i < v.size(); ++i)
    if (cookieOf(v[i]) == cookie) {
      *out = v[i];
      v[i] = v.back();
      v.pop_back();
      return true;
    }
  return false;
}

bool ShmEndpoint::arrive(int from, Peer& p, const SlotHeader& h, const unsigned char* payload) {
  Request* r = nullptr;
  switch (Type(h.type)) {
    case Type::Eager:
    case Type::Rts: {
      if (Type(h.type) == Type::Eager && h.len > kMaxInline) break;  // malformed; dropped below
      for (auto it = p.posted.begin(); it != p.posted.end(); ++it)
        if (state(*it).tag == h.tag) {
          r = *it;
          p.posted.erase(it);
          match(from, p, r, Type(h.type), h.len, h.addr, h.cookie, payload);
          return true;
        }
      const size_t bytes = Type(h.type) == Type::Eager ? h.len : 0;
      if (p.unexpected.size() >= kMaxUnexpected || (bytes && p.unexpectedBytes + bytes > p.eagerMax))
        return false;  // leave it in the ring until its receive is posted
      p.unexpectedBytes += bytes;
      Unexpected u;
      if (!spare_.empty()) {
        u = std::move(spare_.back());
        spare_.pop_back();
      }
      u.type = Type(h.type);
      u.tag = h.tag;
      u.len = h.len;
      u.addr = h.addr;
      u.cookie = h.cookie;
      u.payload.assign(payload, payload + (u.type == Type::Eager ? h.len : 0));
      p.unexpected.push_back(std::move(u));
      return true;
    }
    case Type::Fin:
      if (take(p.awaitingPull, h.cookie, &r))
        complete(r, h.status || state(r).pushStatus
                        ? fail(Status::RemoteError, "shm: moving our message to rank %d failed", from)
                        : Status::Success,
                 state(r).len);
      return true;
    case Type::Push: {
      // Our split send's second half: write it now (the receiver pulls the first meanwhile).
      uint64_t expect = h.tag << 2 | kPushPending;
      if (!p.in->pushClaim.compare_exchange_strong(expect, h.tag << 2 | kPushClaimed, std::memory_order_acq_rel))
        return true;  // the receiver took it back and moved it all
      SlotHeader d{};
      d.type = uint32_t(Type::PushDone);
      d.peerCookie = h.peerCookie;
      d.status = 2;  // declined: the receiver moves it itself
      for (Request* s : p.awaitingPull) {
        ReqState& st = state(s);
        if (cookieOf(s) != h.cookie || h.len != st.len || h.offset >= st.len || !p.cma) continue;
        const bool done = ok(crossCopy(from, p, static_cast<char*>(st.buf) + h.offset, h.addr + h.offset,
                                       st.len - h.offset, true));
        st.pushStatus = done ? 0 : 1;
        d.status = done ? 0 : 1;
        break;
      }
      p.control.push_back(d);
      flush(p);
      return true;
    }
    case Type::PushDone:
      p.out->pushClaim.store(0, std::memory_order_release);  // the next split may ask again
      if (take(p.awaitingPush, h.peerCookie, &r)) {
        ReqState& st = state(r);
        Status s = h.status == 0 ? Status::Success
                   : h.status == 2
                       ? pull(from, p, static_cast<char*>(st.buf) + st.moved, st.peerCookie + st.moved, st.len - st.moved)
                       : fail(Status::RemoteError, "shm: rank %d could not write its message to us", from);
        finishTimed(from, p, r, s, st.len, ModeChooser::Pull, h.status == 0 ? st.len - st.moved : 0);
      }
      return true;
    case Type::Cts:
      if (take(p.awaitingPull, h.cookie, &r)) {
        state(r).peerCookie = h.peerCookie;
        state(r).moved = 0;
        p.streams.push_back(r);
      }
      return true;
    case Type::Data:
      for (size_t i = 0; i < p.awaitingData.size(); ++i) {
        r = p.awaitingData[i];
        if (cookieOf(r) != h.peerCookie) continue;
        ReqState& st = state(r);
        if (h.fragLen > kStreamFrag || h.offset != st.moved || h.offset + h.fragLen > st.len) break;
        const int64_t copyFrom = st.matchedNs ? nowNs() : 0;
        memcpy(static_cast<char*>(st.buf) + h.offset, payload, h.fragLen);
        if (copyFrom) st.copiedNs = uint32_t(std::min<int64_t>(UINT32_MAX, st.copiedNs + (nowNs() - copyFrom)));
        st.moved += h.fragLen;
        if (st.moved == st.len) {
          p.awaitingData[i] = p.awaitingData.back();
          p.awaitingData.pop_back();
          finishTimed(from, p, r, Status::Success, st.len, ModeChooser::Stream, st.len);
        }
        return true;
      }
      break;
    case Type::Pad:  // consumed by drain()
      return true;
  }
  TEMPO_WARN_RATELIMITED(1000, "shm: rank %d dropped a malformed message (type %u) from rank %d", rank_, h.type, from);
  return true;
}

// Handles everything `from` has written into our ring for it.
void ShmEndpoint::drain(int from, Peer& p) {
  Ring* r = p.in;
  uint64_t tail = r->tail.load(std::memory_order_relaxed);
  const uint64_t head = r->head.load(std::memory_order_acquire);
  while (tail != head) {
    const uint64_t at = tail & (kSlots - 1);
    const unsigned char* slot = r->slots[at];
    SlotHeader h{};
    memcpy(&h, slot, kEagerHeaderBytes);
    const size_t header = headerBytes(Type(h.type));
    if (header > kEagerHeaderBytes) memcpy(&h, slot, sizeof h);
    uint64_t used = 1;
    if (Type(h.type) == Type::Pad) used = h.len;
    else if (Type(h.type) == Type::Eager && h.len <= kMaxInline) used = slotsFor(header, h.len);
    else if (Type(h.type) == Type::Data && h.fragLen <= kStreamFrag) used = slotsFor(header, h.fragLen);
    if (used == 0 || used > head - tail || at + used > kSlots) {
      // Claims slots that were never published: nothing after it can be trusted.
      TEMPO_WARN_RATELIMITED(1000, "shm: rank %d dropped a malformed ring from rank %d", rank_, from);
      r->tail.store(head, std::memory_order_release);
      return;
    }
    if (Type(h.type) != Type::Pad && !arrive(from, p, h, slot + header)) {
      p.parkedHead = head;  // nothing new to read until the head moves (or a receive is posted)
      return;
    }
    tail += used;
    r->tail.store(tail, std::memory_order_release);  // frees the slots as soon as they are read
  }
  p.parkedHead = ~0ull;
}

int ShmEndpoint::progress() {
  if (closed_) return 0;
  if (!unlinked_) unlinkWhenAttached();
  for (int i = 0; i < nranks_; ++i) {
    Peer& p = peers_[size_t(i)];
    if (!p.connected) continue;
    drain(i, p);
    if (!p.control.empty() || !p.streams.empty()) flush(p);
  }
  // A peer process that exits leaves nothing in the rings to say so: every 50 ms, each
  // peer something waits on is asked whether it still lives. The clock is read only every
  // 64th idle pass, to keep it off the polling path.
  if (finished_.empty() && (++idlePasses_ & 63) == 0) {
    const int64_t now = nowNs();
    if (now >= nextWatch_) {
      nextWatch_ = now + 50'000'000;
      for (int i = 0; i < nranks_; ++i) {
        Peer& p = peers_[size_t(i)];
        if (p.connected && ok(p.failed) && waitingOn(p) && p.watch.exited()) failPeer(i, p);
      }
    }
  }
  const int completed = int(finished_.size());
  for (Request* r : finished_) r->done = true;
  finished_.clear();
  return completed;
}

// Ordering (all sequentially consistent): the owner sets `sleeping`, reads `bell`, checks
// the rings' heads and sleeps only if `bell` is unchanged; a sender publishes its head,
// then reads `sleeping`, and only if it is set bumps `bell` and wakes the owner. If the
// sender read `sleeping` as 0, its head store precedes the owner's store of `sleeping`,
// so the owner's check sees the new head. If it read 1, the owner either sees the head or
// read `bell` before the bump, and then its futex wait returns at once or is woken.
void ShmEndpoint::wait(int64_t ns) {
  if (closed_ || !header_) return Endpoint::wait(ns);
  header_->sleeping.store(1, std::memory_order_seq_cst);
  const uint32_t seen = header_->bell.load(std::memory_order_seq_cst);
  bool pending = !finished_.empty();
  for (int i = 0; i < nranks_ && !pending; ++i) {
    const Peer& p = peers_[size_t(i)];
    if (!p.connected) continue;
    const uint64_t head = p.in->head.load(std::memory_order_seq_cst);
    pending = head != p.in->tail.load(std::memory_order_relaxed) && head != p.parkedHead;
  }
  if (!pending) {
    timespec t{time_t(ns / 1000000000), long(ns % 1000000000)};
    futex(&header_->bell, FUTEX_WAIT, seen, &t);
  }
  header_->sleeping.store(0, std::memory_order_relaxed);
}

void ShmEndpoint::cancelAll() {
  closed_ = true;
  for (Peer& p : peers_) {
    p.posted.clear();
    p.unexpected.clear();
    p.unexpectedBytes = 0;
    p.awaitingPull.clear();
    p.awaitingData.clear();
    p.awaitingPush.clear();
    p.streams.clear();
    p.control.clear();
  }
  finished_.clear();
}

}  // namespace

Result<std::unique_ptr<Endpoint>> create(int rank, int nranks, int peers) {
  auto ep = std::make_unique<ShmEndpoint>(rank, nranks, peers);
  TEMPO_TRY(ep->open());
  return std::unique_ptr<Endpoint>(std::move(ep));
}

}  // namespace tempo::transport::shm
