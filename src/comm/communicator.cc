#include "src/comm/communicator.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <mutex>
#include <numeric>
#include <optional>

#include "src/algo/collectives.h"
#include "src/algo/direct_allreduce.h"
#include "src/algo/fingerprint.h"
#include "src/algo/hier_allreduce.h"
#include "src/algo/rd_allreduce.h"
#include "src/algo/ring.h"
#include "src/algo/ring_allreduce.h"
#include "src/algo/tree_allreduce.h"
#include "src/core/host.h"
#include "src/core/log.h"
#include "src/core/param.h"
#include "src/topo/dump.h"
#include "src/topo/locality.h"
#include "src/tune/tune.h"
#include "transports/loopback/loopback.h"
#include "transports/routed/routed.h"
#include "transports/shm/shm.h"
#ifdef TEMPO_HAVE_OFI
#include "transports/ofi/ofi.h"
#endif
#ifdef TEMPO_HAVE_UCX
#include "transports/ucx/ucx.h"
#endif

namespace tempo::comm {
namespace {

// Per-peer transport choices, in the order their addresses are published.
// kShm is Tempo's own shared-memory transport; kOfiShm, kTcp and kUserProvider are
// libfabric providers; kUcx is one UCX worker, which picks its transports per peer;
// kRouted is a UCX worker and libfabric tcp behind one endpoint that sends each message
// over the faster of the two for its size (transports/routed).
enum Choice : int {
  kLoopback = 0, kShm = 1, kOfiShm = 2, kTcp = 3, kUserProvider = 4, kUcx = 5, kRouted = 6, kChoices = 7
};

void logBannerOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    TEMPO_LOG(log::Level::Version, log::Init, "NCCL version %d.%d.%d+tempo%s", NCCL_MAJOR, NCCL_MINOR,
              NCCL_PATCH, TEMPO_VERSION_STRING);
    param::logNonDefault();
  });
}

// `users` is how many peers chose this transport.
Result<std::unique_ptr<transport::Endpoint>> openEndpoint(Choice c, uint64_t commHash, int rank, int nranks,
                                                          int users, const std::vector<bool>& sameHost) {
  if (c == kLoopback) return transport::loopback::create(commHash, rank, nranks);
  if (c == kShm) return transport::shm::create(rank, nranks, users);
  if (c == kUcx) {
#ifdef TEMPO_HAVE_UCX
    return transport::ucx::create(rank, nranks, {.tls = "", .sameHost = sameHost});
#else
    return fail(Status::InvalidUsage, "this build of Tempo has no UCX transport (TEMPO_WITH_UCX=OFF)");
#endif
  }
  if (c == kRouted) {  // autoNetChoice picks it only where both libraries are built
    TEMPO_ASSIGN(auto small, openEndpoint(kUcx, commHash, rank, nranks, users, sameHost));
    TEMPO_ASSIGN(auto large, openEndpoint(kTcp, commHash, rank, nranks, users, sameHost));
    // Point-to-point lengths are the user's and may disagree between the two sides, so
    // those messages never split across the two (see routed.h).
    return transport::routed::create(std::move(small), std::move(large),
                                     {.largeBytes = uint64_t(param::NetLargeBytes()),
                                      .pinnedTags = engine::kP2pTagBit});
  }
#ifdef TEMPO_HAVE_OFI
  std::string prov = c == kOfiShm ? "shm" : c == kTcp ? "tcp" : param::FiProvider();
  return transport::ofi::create(prov, rank, nranks);
#else
  return fail(Status::InvalidUsage, "this build of Tempo has no libfabric transport (TEMPO_WITH_OFI=OFF)");
#endif
}

// TEMPO_TRANSPORT=auto's transport for a peer on another host: the one the user's own
// variables name, else TEMPO_NET_DEFAULT.
Result<Choice> autoNetChoice() {
  if (*param::FiProvider()) return kUserProvider;
  if (*param::UcxTls() || *param::UcxNetDevices()) return kUcx;
  constexpr bool haveUcx =
#ifdef TEMPO_HAVE_UCX
      true;
#else
      false;
#endif
  constexpr bool haveOfi =
#ifdef TEMPO_HAVE_OFI
      true;
#else
      false;
#endif
  // Both by default, each for the sizes it moves faster: between emulated hosts here UCX
  // measured 1.1-1.7x faster than libfabric tcp up to 256 KiB all-reduces and libfabric
  // 1.1-1.4x faster from 1 MiB (README, bench/compare_transports.sh).
  const char* d = param::NetDefault();
  if (!strcmp(d, "auto")) {
    // Mismatch detection's first message of a collective (the fingerprint and up to 1 KiB
    // it carries) is received into a longer buffer than it may need; it must stay below
    // the threshold, on one side of the split.
    if (param::NetLargeBytes() < 4096)
      return fail(Status::InvalidArgument, "TEMPO_NET_LARGE_BYTES=%ld: must be at least 4096",
                  long(param::NetLargeBytes()));
    return haveUcx && haveOfi ? kRouted : haveUcx ? kUcx : kTcp;
  }
  if (!strcmp(d, "ofi")) return haveOfi ? kTcp : kUcx;
  if (!strcmp(d, "ucx")) return haveUcx ? kUcx : kTcp;
  return fail(Status::InvalidArgument, "TEMPO_NET_DEFAULT=%s: expected auto, ucx or ofi", d);
}

const char* viaName(int choice, const transport::Endpoint& ep) {
  if (choice == kRouted) return "NET/UCX+OFI";
  switch (ep.kind()) {
    case transport::Kind::Loopback: return "P2P/loopback";
    case transport::Kind::Shm: return "SHM";
    case transport::Kind::UcxShm:
    case transport::Kind::UcxNet: return "NET/UCX";
    default: return "NET/OFI";
  }
}

}  // namespace

std::unique_ptr<Communicator> Communicator::pending(const Config& config, int device) {
  std::unique_ptr<Communicator> c(new Communicator());
  c->config_ = config;
  c->device_ = device;
  c->inProgress_.store(true, std::memory_order_release);
  return c;
}

Result<std::unique_ptr<Communicator>> Communicator::create(const bootstrap::UniqueId& id, int nranks, int rank,
                                                           const Config& config, int device) {
  std::unique_ptr<Communicator> c = pending(config, device);
  Status s = c->join(id, nranks, rank);
  c->inProgress_.store(false, std::memory_order_release);
  TEMPO_TRY(s);
  return c;
}

Status Communicator::join(const bootstrap::UniqueId& id, int nranks, int rank) {
  logBannerOnce();
  TEMPO_TRY(tune::checkOverrides());
  rank_ = rank;
  nranks_ = nranks;
  log::setThreadDevice(device_);
  // ncclCommAbort during a nonblocking init cancels the bootstrap's waits.
  const Deadline deadline = Deadline::afterSeconds(param::InitTimeout()).cancelledBy(&aborting_);
  TEMPO_INFO(log::Init, "comm %p rank %d nranks %d cudaDev %d - Init START", static_cast<void*>(this), rank,
             nranks, device_);

  TEMPO_ASSIGN(boot_, bootstrap::Bootstrap::join(id, rank, nranks, deadline));
  uint64_t nonce = boot_->commNonce();
  commHash_ = fnv1a(&nonce, sizeof nonce);
  TEMPO_TRY(connectTransports(deadline));
  TEMPO_TRY(handshake(deadline));
  TEMPO_TRY(buildRing(deadline));
  TEMPO_ASSIGN(scratch_, mem::HostBuffer::allocate(size_t(std::max<int64_t>(param::BuffSize(), 64 << 10))));

  std::vector<transport::Endpoint*> eps;
  for (auto& ep : endpoints_) eps.push_back(ep.get());
  engine_ = std::make_unique<engine::Engine>(rank, nranks, peerEndpoint_, std::move(eps),
                                             std::span(scratch_.data(), scratch_.size()), this);
  // Polling only pays while every rank on this host has a core: with more ranks than
  // cores a spinning rank takes the core its peer needs, so it yields at once instead.
  int localRanks = 0;
  for (const auto& p : boot_->peers()) localRanks += p.hostHash == boot_->peers()[size_t(rank)].hostHash;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int64_t spinUs = param::SpinUs() >= 0 ? param::SpinUs() : (localRanks > cores ? 0 : 20);
  engine_->setSpinNs(spinUs * 1000);
  tuning_.nranks = nranks;
  checkMismatch_ = nranks > 1 && param::CheckMismatch();
  tuning_.oversubscribed = localRanks > cores;
  tuning_.scratchBytes = scratch_.size();
  for (auto& ep : endpoints_) tuning_.slowest = std::max(tuning_.slowest, ep->kind());
  tuning_.net = tune::netCost(tuning_.slowest);
  TEMPO_INFO(log::Init, "comm %p rank %d: %d ranks on this host with %ld cores, polling %ld us before yielding",
             static_cast<void*>(this), rank, localRanks, cores, long(spinUs));
  if (rank == 0) logTuning();

  // Every rank has connected before anyone sends.
  TEMPO_TRY(boot_->barrier(deadline));
  if (deadline.cancelled()) return fail(Status::InvalidUsage, "comm %p rank %d: init aborted", static_cast<void*>(this), rank);
  TEMPO_INFO(log::Init, "comm %p rank %d nranks %d cudaDev %d busId 0 commId %#lx - Init COMPLETE",
             static_cast<void*>(this), rank, nranks, device_, (unsigned long)commHash_);
  return Status::Success;
}

// NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=TUNING: which all-reduce algorithm each size band
// gets, and the facts the tuner decided from.
void Communicator::logTuning() const {
  if (!log::enabled(log::Level::Info, log::Tuning)) return;
  std::string bands;
  auto size = [](uint64_t b) {
    return b >= (1u << 20) ? std::to_string(b >> 20) + " MiB" : b >= 1024 ? std::to_string(b >> 10) + " KiB"
                                                                           : std::to_string(b) + " B";
  };
  // Sampled at powers of two: each band is named by the largest size it holds.
  auto name = [&](uint64_t b) {
    const tune::AllReduceChoice c = tune::allReduce(b, tuning_);
    return std::string(tune::candidateName({c.algo, c.leaders, 0}));
  };
  std::string current = name(8);
  for (uint64_t b = 16; b <= (uint64_t(1) << 30); b *= 2) {
    const std::string a = name(b);
    if (a == current) continue;
    bands += (bands.empty() ? "" : ", ") + current + " up to " + size(b / 2);
    current = a;
  }
  bands += (bands.empty() ? "" : ", ") + current + (bands.empty() ? " at every size" : " above");
  TEMPO_INFO(log::Tuning,
             "comm %p AllReduce: %s (%d ranks on %d hosts, at most %d on one; slowest transport %s%s; scratch %zu "
             "bytes)",
             static_cast<const void*>(this), bands.c_str(), nranks_, tuning_.hosts, tuning_.maxRanksPerHost,
             transport::kindName(tuning_.slowest), tuning_.oversubscribed ? ", more ranks than cores" : "",
             size_t(tuning_.scratchBytes));
  if (tuning_.hosts <= 1) return;
  // Across hosts the bands come from the cost model: say what it assumed and predicted.
  TEMPO_INFO(log::Tuning, "comm %p cost model: network %.0f us + %.3f GB/s per host, on a host %.0f us + %.1f GB/s",
             static_cast<const void*>(this), tuning_.net.alphaUs, tuning_.net.gbps, tuning_.local.alphaUs,
             tuning_.local.gbps);
  for (uint64_t b = 8; b <= (uint64_t(1) << 28); b *= 16) {
    tune::Candidate cands[tune::kMaxCandidates];
    const int k = tune::predictAllReduce(b, tuning_, false, cands);
    std::string line;
    for (int i = 0; i < k; ++i) {
      char one[64];
      snprintf(one, sizeof one, "%s%s %.0f us", i ? ", " : "", tune::candidateName(cands[i]), cands[i].us);
      line += one;
    }
    TEMPO_INFO(log::Tuning, "comm %p predicted AllReduce %s: %s", static_cast<const void*>(this), size(b).c_str(),
               line.c_str());
  }
}

Status Communicator::buildRing(Deadline deadline) {
  const std::string order = param::RingOrder();
  if (order != "topology" && order != "rank")
    return fail(Status::InvalidArgument, "TEMPO_RING_ORDER=%s: expected topology or rank", order.c_str());
  std::optional<topo::SwitchMap> map;
  if (*param::TopoFile()) {
    TEMPO_ASSIGN(map, topo::loadSwitchMap(param::TopoFile()));
  }
  std::vector<std::string> hosts;
  for (const auto& p : boot_->peers()) hosts.emplace_back(p.hostname);
  const topo::Locality loc = topo::placeRanks(hosts, map ? &*map : nullptr);
  if (rank_ == 0 && *param::TopoDumpFile()) {
    TEMPO_TRY(topo::writeTopology(param::TopoDumpFile(), map ? *map : topo::SwitchMap{}, hosts));
    TEMPO_INFO(log::Graph, "comm %p wrote its topology to %s", static_cast<void*>(this), param::TopoDumpFile());
  }
  if (rank_ == 0 && !loc.unmapped.empty())
    TEMPO_WARN("TEMPO_TOPO_FILE %s does not name %zu of the communicator's hosts (%s%s); they are placed as if "
               "on switches of their own",
               param::TopoFile(), loc.unmapped.size(), loc.unmapped.front().c_str(),
               loc.unmapped.size() > 1 ? ", ..." : "");
  if (order == "rank") {
    ring_.resize(size_t(nranks_));
    std::iota(ring_.begin(), ring_.end(), 0);
  } else {
    ring_ = topo::localityRing(loc);
  }
  ringPos_ = int(std::find(ring_.begin(), ring_.end(), rank_) - ring_.begin());
  hostOf_ = loc.group[0];
  std::vector<int> perHost;
  for (int h : hostOf_) {
    if (size_t(h) >= perHost.size()) perHost.resize(size_t(h) + 1, 0);
    ++perHost[size_t(h)];
  }
  tuning_.hosts = int(perHost.size());
  tuning_.maxRanksPerHost = *std::max_element(perHost.begin(), perHost.end());

  // Ranks that read different switch maps (or settings) would run different rings and
  // wait on each other forever: compare the ring's hash across ranks.
  // The tuner's network cost model comes from the environment too, and ranks that model
  // the network differently would pick different algorithms: it joins the ring's hash.
  std::vector<int64_t> shared(ring_.begin(), ring_.end());
  shared.push_back(param::NetAlphaUs());
  shared.push_back(param::NetMbits());
  const uint64_t mine = fnv1a(shared.data(), shared.size() * sizeof(int64_t));
  std::vector<uint64_t> all(static_cast<size_t>(nranks_));
  all[size_t(rank_)] = mine;
  TEMPO_TRY(boot_->allGather(std::as_writable_bytes(std::span(all)), sizeof(uint64_t), deadline));
  for (int r = 0; r < nranks_; ++r)
    if (all[size_t(r)] != mine)
      return fail(Status::InvalidUsage,
                  "rank %d laid out a different ring or cost model than rank %d (do their TEMPO_TOPO_FILE, "
                  "TEMPO_RING_ORDER, TEMPO_NET_ALPHA_US or TEMPO_NET_MBITS settings differ?)",
                  r, rank_);

  if (rank_ == 0) {
    std::string crossings;
    const std::vector<int> c = topo::ringCrossings(ring_, loc);
    for (int k = 0; k < loc.levels(); ++k)
      crossings += (k ? ", " : "") + loc.levelNames[size_t(k)] + " " + std::to_string(c[size_t(k)]);
    TEMPO_INFO(log::Graph, "comm %p Ring (%s order): %s; crossings: %s", static_cast<void*>(this), order.c_str(),
               topo::ringString(ring_).c_str(), crossings.c_str());
  }
  return Status::Success;
}

Status Communicator::connectTransports(Deadline deadline) {
  const auto& peers = boot_->peers();
  const bootstrap::PeerInfo& me = peers[size_t(rank_)];
  std::string mode = param::Transport();
  if (mode != "auto" && mode != "ofi" && mode != "ucx" && mode != "shm" && mode != "loopback")
    return fail(Status::InvalidArgument, "TEMPO_TRANSPORT=%s: expected auto, shm, ofi, ucx or loopback",
                mode.c_str());
  const bool userProvider = *param::FiProvider() != '\0';

  // Phase 1: choose a transport per peer (both ends decide alike from the same rules).
  std::vector<int> choice(size_t(nranks_), -1);
  std::vector<bool> sameHost(static_cast<size_t>(nranks_));
  int needed[kChoices] = {};  // peers per choice
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_) continue;
    bool sameProcess = peers[size_t(p)].processToken == me.processToken;
    sameHost[size_t(p)] = peers[size_t(p)].hostHash == me.hostHash;
    Choice ch;
    if (mode == "loopback") {
      if (!sameProcess)
        return fail(Status::InvalidUsage, "TEMPO_TRANSPORT=loopback, but rank %d is in another process (pid %u on %s)",
                    p, peers[size_t(p)].pid, peers[size_t(p)].hostname);
      ch = kLoopback;
    } else if (mode == "shm") {
      if (!sameHost[size_t(p)])
        return fail(Status::InvalidUsage, "TEMPO_TRANSPORT=shm, but rank %d is on another host (%s)", p,
                    peers[size_t(p)].hostname);
      ch = kShm;
    } else if (mode == "ucx") {
      ch = kUcx;
    } else if (mode == "ofi") {
      ch = userProvider ? kUserProvider : sameHost[size_t(p)] ? kOfiShm : kTcp;
    } else if (sameProcess) {
      ch = kLoopback;
    } else if (userProvider) {
      ch = kUserProvider;
    } else if (sameHost[size_t(p)]) {
      ch = kShm;
    } else {
      TEMPO_ASSIGN(ch, autoNetChoice());
    }
    choice[size_t(p)] = ch;
    ++needed[ch];
  }

  // Phase 2: open what is needed and publish the addresses. A rank's record holds, for
  // each choice in order, a 16-bit length and that many address bytes (0: not opened);
  // records are as long as the longest rank's, learnt by a first exchange of lengths.
  transport::Endpoint* byChoice[kChoices] = {};
  std::vector<std::byte> record;
  for (int ch = 0; ch < kChoices; ++ch) {
    std::span<const std::byte> addr;
    if (needed[ch]) {
      TEMPO_ASSIGN(std::unique_ptr<transport::Endpoint> ep,
                   openEndpoint(Choice(ch), commHash_, rank_, nranks_, needed[ch], sameHost));
      addr = ep->address();
      if (addr.empty() || addr.size() > transport::kMaxAddressBytes)
        return fail(Status::InternalError, "%s address of %zu bytes is empty or too long", ep->name(), addr.size());
      byChoice[ch] = ep.get();
      endpoints_.push_back(std::move(ep));
    }
    record.push_back(std::byte(addr.size() & 0xff));
    record.push_back(std::byte(addr.size() >> 8));
    record.insert(record.end(), addr.begin(), addr.end());
  }
  std::vector<std::byte> lengths(sizeof(uint32_t) * size_t(nranks_));
  const uint32_t myLength = uint32_t(record.size());
  memcpy(lengths.data() + sizeof(uint32_t) * size_t(rank_), &myLength, sizeof myLength);
  TEMPO_TRY(boot_->allGather(lengths, sizeof(uint32_t), deadline));
  size_t blockBytes = 0;
  for (int p = 0; p < nranks_; ++p) {
    uint32_t len;
    memcpy(&len, lengths.data() + sizeof(uint32_t) * size_t(p), sizeof len);
    if (len < 2 * kChoices || len > kChoices * (2 + transport::kMaxAddressBytes))
      return fail(Status::InvalidUsage, "rank %d published a transport record of %u bytes", p, len);
    blockBytes = std::max<size_t>(blockBytes, len);
  }
  std::vector<std::byte> blocks(blockBytes * size_t(nranks_));
  memcpy(blocks.data() + blockBytes * size_t(rank_), record.data(), record.size());
  TEMPO_TRY(boot_->allGather(blocks, blockBytes, deadline));

  // Phase 3: connect every peer with the address it published for our shared choice.
  peerEndpoint_.assign(size_t(nranks_), nullptr);
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_) continue;
    const int ch = choice[size_t(p)];
    std::span<const std::byte> rec(blocks.data() + blockBytes * size_t(p), blockBytes);
    size_t at = 0, len = 0;
    for (int c = 0; c <= ch && at + 2 <= rec.size(); ++c) {
      len = size_t(rec[at]) | (size_t(rec[at + 1]) << 8);
      if (c < ch) at += 2 + len;
    }
    if (len == 0 || at + 2 + len > rec.size())
      return fail(Status::InvalidUsage, "rank %d did not open the %s transport that rank %d chose for it", p,
                  byChoice[ch]->name(), rank_);
    TEMPO_TRY(byChoice[ch]->connect(p, rec.subspan(at + 2, len)));
    peerEndpoint_[size_t(p)] = byChoice[ch];
  }
  // Logged once every peer is connected: a UCX endpoint's kind is known only then.
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_) continue;
    const transport::Endpoint& ep = *peerEndpoint_[size_t(p)];
    if (p == (rank_ + 1) % nranks_ || p == (rank_ + nranks_ - 1) % nranks_)
      TEMPO_INFO(log::Init | log::Net, "Channel 00/0 : %d[%d] -> %d[%d] via %s/%s", rank_, device_, p, device_,
                 viaName(choice[size_t(p)], ep), ep.name());
    TEMPO_INFO(log::Net, "comm %p rank %d -> rank %d (%s): %s %s", static_cast<void*>(this), rank_, p,
               peers[size_t(p)].hostname, viaName(choice[size_t(p)], ep), ep.describePeer(p).c_str());
  }
  return Status::Success;
}

// Every connection carries a message both ways before Init COMPLETE: a peer that cannot be
// reached fails init, not the first collective, and transports that connect lazily (UCX
// wires an endpoint up on its first message) are fully connected while every rank is still
// alive and progressing. (UCX 1.13 over tcp aborts the process when a peer it was still
// wiring up to dies: ucp_request_send_state_ff's assertion.) An endpoint made of several
// (transports/routed) carries the message on each of its lanes: libfabric tcp;ofi_rxm
// connected by a first large message from one side alone, instead of by both sides at
// once here, then moved 2 MiB all-reduces 15-25% slower. Rank r pairs with r + k and
// r - k in round k, at most kWindow rounds in flight; each message is the communicator
// hash, checked on arrival.
Status Communicator::handshake(Deadline deadline) {
  constexpr int kWindow = 32;
  constexpr size_t kLanes = transport::Endpoint::kMaxLanes;
  const int n = nranks_;
  if (n <= 1) return Status::Success;
  struct Pair {
    transport::Request send[kLanes], recv[kLanes];
    uint64_t in[kLanes] = {};
    size_t inLanes = 0, outLanes = 0;  // a round's two peers may be reached differently
  };
  std::vector<Pair> pairs(static_cast<size_t>(n));  // by round k (1 .. n-1)
  std::vector<transport::Endpoint*> everyLane;
  for (auto& e : endpoints_)
    for (transport::Endpoint* l : e->lanes()) everyLane.push_back(l);
  auto progressAll = [&] {
    for (transport::Endpoint* l : everyLane) l->progress();
  };
  // Posts round `pr`'s receive from `from` on every lane that reaches it, and its send to
  // `to` on every lane to that one. Both ends of a pair have the same lanes (both chose
  // the transports by the same rule), but `from` and `to` may differ: one on this host
  // (Tempo's shm, one lane), the other remote (routed, two).
  auto post = [&](int from, int to, Pair& pr) -> Status {
    const std::vector<transport::Endpoint*> in = peerEndpoint_[size_t(from)]->lanes();
    const std::vector<transport::Endpoint*> out = peerEndpoint_[size_t(to)]->lanes();
    if (in.size() > kLanes || out.size() > kLanes)
      return fail(Status::InternalError, "rank %d: ranks %d and %d are reached over %zu and %zu lanes", rank_, from,
                  to, in.size(), out.size());
    pr.inLanes = in.size();
    pr.outLanes = out.size();
    for (size_t l = 0; l < kLanes; ++l) {
      for (int dir = 0; dir < 2; ++dir) {
        if (l >= (dir == 0 ? pr.inLanes : pr.outLanes)) continue;
        for (;;) {
          Status s = dir == 0 ? in[l]->irecv(from, engine::kHandshakeTag, &pr.in[l], sizeof pr.in[l], &pr.recv[l])
                              : out[l]->isend(to, engine::kHandshakeTag, &commHash_, sizeof commHash_, &pr.send[l]);
          if (s != Status::InProgress) {
            TEMPO_TRY(s);
            break;
          }
          progressAll();
          if (deadline.expired())
            return fail(Status::SystemError, "rank %d: connecting to rank %d timed out", rank_, dir ? to : from);
        }
      }
    }
    return Status::Success;
  };
  auto finished = [](const Pair& pr) {
    for (size_t l = 0; l < pr.inLanes; ++l)
      if (!pr.recv[l].done) return false;
    for (size_t l = 0; l < pr.outLanes; ++l)
      if (!pr.send[l].done) return false;
    return true;
  };
  int posted = 1, done = 1;  // rounds
  // On failure the transports must forget the requests before `pairs` goes.
  struct CancelOnFailure {
    std::vector<std::unique_ptr<transport::Endpoint>>& eps;
    bool armed = true;
    ~CancelOnFailure() {
      if (armed)
        for (auto& e : eps) e->cancelAll();
    }
  } guard{endpoints_};
  while (done < n) {
    while (posted < n && posted - done < kWindow) {
      TEMPO_TRY(post((rank_ + n - posted) % n, (rank_ + posted) % n, pairs[size_t(posted)]));
      ++posted;
    }
    progressAll();
    for (; done < posted && finished(pairs[size_t(done)]); ++done) {
      const Pair& pr = pairs[size_t(done)];
      const int from = (rank_ + n - done) % n;
      for (size_t l = 0; l < std::max(pr.inLanes, pr.outLanes); ++l) {
        const Status sent = l < pr.outLanes ? pr.send[l].status : Status::Success;
        const Status got = l < pr.inLanes ? pr.recv[l].status : Status::Success;
        if (!ok(sent) || !ok(got))
          return fail(ok(sent) ? got : sent, "rank %d: the first messages with ranks %d and %d failed", rank_,
                      (rank_ + done) % n, from);
        if (l < pr.inLanes && pr.in[l] != commHash_)
          return fail(Status::InvalidUsage, "rank %d: rank %d answered for another communicator", rank_, from);
      }
    }
    if (deadline.expired()) {
      const int from = (rank_ + n - done) % n, to = (rank_ + done) % n;
      return fail(Status::SystemError, "rank %d: no first message from rank %d or to rank %d within the init timeout",
                  rank_, from, to);
    }
  }
  guard.armed = false;
  return Status::Success;
}

Result<Communicator::SplitTarget> Communicator::splitExchange(int color, int key) {
  constexpr int kNoColor = -1;  // NCCL_SPLIT_NOCOLOR
  const Deadline deadline = Deadline::afterSeconds(param::InitTimeout()).cancelledBy(&aborting_);
  const size_t n = size_t(nranks_);
  // Phase 1: every rank's color and key, around the parent's bootstrap ring.
  struct Entry {
    int32_t color, key;
  };
  std::vector<std::byte> table(n * sizeof(Entry));
  const Entry mine{color, key};
  memcpy(table.data() + size_t(rank_) * sizeof(Entry), &mine, sizeof mine);
  TEMPO_TRY(boot_->allGather(table, sizeof(Entry), deadline));
  // Phase 2: this color's members in (key, parent rank) order.
  std::vector<std::pair<int, int>> members;  // (key, parent rank)
  for (size_t r = 0; r < n; ++r) {
    Entry e;
    memcpy(&e, table.data() + r * sizeof(Entry), sizeof e);
    if (color != kNoColor && e.color == color) members.push_back({e.key, int(r)});
  }
  std::sort(members.begin(), members.end());
  const int leader = members.empty() ? -1 : members.front().second;
  // Phase 3: each color's first member opens the new rendezvous; one more all-gather hands
  // every rank its leader's unique id.
  constexpr size_t kId = bootstrap::kUniqueIdBytes;
  std::vector<std::byte> ids(n * kId);
  if (rank_ == leader)
    TEMPO_TRY(bootstrap::createUniqueId(
        std::span<uint8_t, kId>(reinterpret_cast<uint8_t*>(ids.data() + size_t(rank_) * kId), kId)));
  TEMPO_TRY(boot_->allGather(ids, kId, deadline));
  SplitTarget t;
  if (color == kNoColor) return t;
  int newRank = 0;
  while (members[size_t(newRank)].second != rank_) ++newRank;
  TEMPO_ASSIGN(t.id, bootstrap::decodeUniqueId(std::span<const uint8_t, kId>(
                   reinterpret_cast<const uint8_t*>(ids.data() + size_t(leader) * kId), kId)));
  TEMPO_INFO(log::Init, "comm %p rank %d splits with color %d key %d: rank %d of %zu", static_cast<void*>(this),
             rank_, color, key, newRank, members.size());
  t.nranks = int(members.size());
  t.rank = newRank;
  return t;
}

Result<std::unique_ptr<Communicator>> Communicator::split(int color, int key, const Config& config) {
  TEMPO_ASSIGN(SplitTarget t, splitExchange(color, key));
  if (t.nranks == 0) return std::unique_ptr<Communicator>();
  return create(t.id, t.nranks, t.rank, config, device_);
}

namespace {

// The leader's shrink message: which shrink (the parent's count of them), a digest of the
// excluded ranks, and the new communicator's unique id. Little-endian, fixed size.
constexpr size_t kShrinkMsgBytes = 4 + 8 + bootstrap::kUniqueIdBytes;

uint64_t digestRanks(std::span<const int> ranks) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the sorted list
  for (int r : ranks)
    for (int b = 0; b < 4; ++b) h = (h ^ uint8_t(uint32_t(r) >> (8 * b))) * 1099511628211ull;
  return h ^ ranks.size();
}

void putLe(uint8_t* p, uint64_t v, int bytes) {
  for (int b = 0; b < bytes; ++b) p[b] = uint8_t(v >> (8 * b));
}
uint64_t getLe(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int b = 0; b < bytes; ++b) v |= uint64_t(p[b]) << (8 * b);
  return v;
}

}  // namespace

Result<Communicator::SplitTarget> Communicator::shrinkExchange(std::span<const int> excluded) {
  const Deadline deadline = Deadline::afterSeconds(param::InitTimeout()).cancelledBy(&aborting_);
  const uint32_t seq = shrinks_++;
  const uint64_t digest = digestRanks(excluded);
  // Phase 1: the survivors in parent order; this rank's place among them is its new rank.
  std::vector<int> survivors;
  for (int r = 0, e = 0; r < nranks_; ++r) {
    if (size_t(e) < excluded.size() && excluded[size_t(e)] == r) ++e;
    else survivors.push_back(r);
  }
  SplitTarget t;
  t.nranks = int(survivors.size());
  t.rank = int(std::find(survivors.begin(), survivors.end(), rank_) - survivors.begin());
  const int leader = survivors.front();
  // Phase 2: the leader opens the new rendezvous and offers every survivor its id.
  std::array<uint8_t, kShrinkMsgBytes> offer;
  auto verdict = [seq](bool agree) {
    std::array<uint8_t, 5> v;
    putLe(v.data(), seq, 4);
    v[4] = agree;
    return v;
  };
  auto readVerdict = [seq](const std::vector<uint8_t>& v) { return v.size() == 5 && getLe(v.data(), 4) == seq && v[4]; };
  const auto reach = [&](int r, std::span<const uint8_t> m) -> Status {
    Status s = boot_->sendDirect(r, m, deadline);
    if (ok(s)) return s;
    const std::string why = lastErrorMessage();
    return fail(s, "ncclCommShrink: rank %d could not reach surviving rank %d: %s", rank_, r, why.c_str());
  };
  const char* kDisagree =
      "ncclCommShrink: the surviving ranks passed different exclude lists (or have shrunk this communicator a different "
      "number of times); rank %d's list has %zu ranks";
  if (rank_ == leader) {
    putLe(offer.data(), seq, 4);
    putLe(offer.data() + 4, digest, 8);
    TEMPO_TRY(bootstrap::createUniqueId(std::span<uint8_t, bootstrap::kUniqueIdBytes>(offer.data() + 12, 128)));
    for (int r : survivors)
      if (r != rank_) TEMPO_TRY(reach(r, offer));
    // Phase 3: each survivor says whether its list matched; the leader tells all the outcome.
    bool agree = true;
    for (size_t heard = 1; heard < survivors.size(); ++heard) {
      TEMPO_ASSIGN(std::vector<uint8_t> v, boot_->recvDirect(-1, 5, deadline));
      agree = agree && readVerdict(v);
    }
    for (int r : survivors)
      if (r != rank_) TEMPO_TRY(reach(r, verdict(agree)));
    if (!agree) return fail(Status::InvalidUsage, kDisagree, rank_, excluded.size());
  } else {
    TEMPO_ASSIGN(std::vector<uint8_t> got, boot_->recvDirect(leader, kShrinkMsgBytes, deadline));
    const bool match = got.size() == kShrinkMsgBytes && getLe(got.data(), 4) == seq && getLe(got.data() + 4, 8) == digest;
    TEMPO_TRY(reach(leader, verdict(match)));
    TEMPO_ASSIGN(std::vector<uint8_t> outcome, boot_->recvDirect(leader, 5, deadline));
    if (!match || !readVerdict(outcome)) return fail(Status::InvalidUsage, kDisagree, rank_, excluded.size());
    std::copy(got.begin(), got.end(), offer.begin());
  }
  TEMPO_ASSIGN(t.id, bootstrap::decodeUniqueId(std::span<const uint8_t, bootstrap::kUniqueIdBytes>(offer.data() + 12, 128)));
  TEMPO_INFO(log::Init, "comm %p rank %d shrinks without %zu ranks: rank %d of %d", static_cast<void*>(this), rank_,
             excluded.size(), t.rank, t.nranks);
  return t;
}

Result<Communicator::SplitTarget> Communicator::growExchange(int nranks, const bootstrap::UniqueId* id) {
  const Deadline deadline = Deadline::afterSeconds(param::InitTimeout()).cancelledBy(&aborting_);
  // Every rank's nranks and, where it has one, its encoded id, around the ring.
  constexpr size_t kId = bootstrap::kUniqueIdBytes, kBlock = 8 + kId;
  std::vector<std::byte> table(size_t(nranks_) * kBlock);
  uint8_t* mine = reinterpret_cast<uint8_t*>(table.data()) + size_t(rank_) * kBlock;
  putLe(mine, uint32_t(nranks), 4);
  putLe(mine + 4, id ? 1 : 0, 4);
  if (id) bootstrap::encodeUniqueId(*id, std::span<uint8_t, kId>(mine + 8, kId));
  TEMPO_TRY(boot_->allGather(table, kBlock, deadline));
  const uint8_t* chosen = nullptr;
  for (int r = 0; r < nranks_; ++r) {
    const uint8_t* b = reinterpret_cast<const uint8_t*>(table.data()) + size_t(r) * kBlock;
    if (int(getLe(b, 4)) != nranks)
      return fail(Status::InvalidUsage, "ncclCommGrow: rank %d passes nRanks %d but rank %d passes %d", rank_, nranks,
                  r, int(getLe(b, 4)));
    if (!getLe(b + 4, 4)) continue;
    if (!chosen) chosen = b + 8;
    else if (memcmp(chosen, b + 8, kId) != 0)
      return fail(Status::InvalidUsage, "ncclCommGrow: ranks of comm %p passed different unique ids",
                  static_cast<void*>(this));
  }
  if (!chosen)
    return fail(Status::InvalidArgument,
                "ncclCommGrow: no rank of comm %p passed the unique id (make one with ncclCommGetUniqueId)",
                static_cast<void*>(this));
  SplitTarget t;
  TEMPO_ASSIGN(t.id, bootstrap::decodeUniqueId(std::span<const uint8_t, kId>(chosen, kId)));
  t.nranks = nranks;
  t.rank = rank_;
  TEMPO_INFO(log::Init, "comm %p rank %d grows from %d to %d ranks", static_cast<void*>(this), rank_, nranks_, nranks);
  return t;
}

Result<void*> Communicator::registerBuffer(void* buff, size_t size) {
  TEMPO_ASSIGN(void* handle, registrations_.add(buff, size));
  Status st = engine_->userRegions().add(handle, buff, size);
  if (!ok(st)) {
    (void)registrations_.remove(handle);
    return st;
  }
  return handle;
}

Status Communicator::deregisterBuffer(void* handle) {
  TEMPO_TRY(registrations_.remove(handle));
  engine_->userRegions().remove(handle);
  return Status::Success;
}

Communicator::~Communicator() {
  worker_.stop();  // a nonblocking job uses everything below
  engine_.reset();
  endpoints_.clear();
}

engine::Op* Communicator::takeOp(const CollArgs& a, uint64_t payloadBytes) {
  engine::Op* op;
  if (!freeOps_.empty()) {
    op = freeOps_.back();
    freeOps_.pop_back();
  } else {
    ops_.push_back(std::make_unique<engine::Op>());
    op = ops_.back().get();
  }
  op->input = static_cast<const std::byte*>(a.send);
  op->output = static_cast<std::byte*>(a.recv);
  op->type = a.type;
  op->op = a.op;
  op->coll = a.coll;
  op->p2p = a.p2p != P2p::None;
  op->verify = nullptr;
  op->fingerprintRounds = 0;
  op->causeKnown = false;
  op->prescaleSrc = nullptr;
  op->scalar = a.scalar;
  op->bias = static_cast<const std::byte*>(a.bias);
  op->payloadBytes = payloadBytes;
  return op;
}

Result<engine::Op*> Communicator::prepare(const CollArgs& a) {
  using engine::CollKind;
  const uint32_t typeSize = uint32_t(dataTypeSize(a.type));
  const uint64_t bytes = a.count * typeSize;
  const uint64_t block = bytes;  // per-rank block of the rooted and gathering collectives
  engine::Op* op = takeOp(a, bytes);
  const std::byte* send = static_cast<const std::byte*>(a.send);
  const std::byte* recv = static_cast<const std::byte*>(a.recv);
  if (a.scalar) {
    // PreMulSum: the plan reads the premultiplied copy the engine makes when the op starts,
    // so it is planned out of place whatever the user's buffers.
    op->prescaleElems = a.coll == engine::CollKind::ReduceScatter ? a.count * uint64_t(nranks_) : a.count;
    op->prescaled.resize(op->prescaleElems * typeSize);
    op->prescaleSrc = send;
    send = op->prescaled.data();
    op->input = send;
  }
  if (a.coll == CollKind::SendRecv) {
    release(op);
    return fail(Status::InternalError, "point-to-point calls are planned by prepareP2p");
  }

  // Phase 1: what the plan depends on besides the communicator: NCCL's in-place rule of
  // each collective, and the payload the records count.
  bool inPlace = send == recv;
  switch (a.coll) {
    case CollKind::AllGather:
    case CollKind::Gather:
      inPlace = send == recv + uint64_t(rank_) * block && (a.coll == CollKind::AllGather || rank_ == a.root);
      op->payloadBytes = bytes * uint64_t(nranks_);
      break;
    case CollKind::ReduceScatter:
    case CollKind::Scatter:
      inPlace = recv == send + uint64_t(rank_) * block && (a.coll == CollKind::ReduceScatter || rank_ == a.root);
      op->payloadBytes = bytes * uint64_t(nranks_);
      break;
    case CollKind::AllToAll:
      op->payloadBytes = bytes * uint64_t(nranks_);
      break;
    case CollKind::AllToAllv: {
      uint64_t sent = 0, received = 0;
      for (size_t j = 0; j < size_t(nranks_); ++j) {
        sent += a.sendCounts[j];
        received += a.recvCounts[j];
      }
      op->payloadBytes = std::max(sent, received) * typeSize;
      break;
    }
    default:
      break;
  }

  // Phase 2: plan, unless this pooled op last ran the same call (a training loop's
  // collectives repeat): a plan depends only on the key and the communicator. The
  // v-counts of AllToAllv are not in the key, so it is always planned.
  engine::PlanKey key;
  key.valid = a.coll != CollKind::AllToAllv;
  key.coll = a.coll;
  key.type = a.type;
  key.op = a.op;
  key.preMulSum = a.scalar != nullptr;
  key.inPlace = inPlace;
  key.root = a.root;
  key.count = a.count;
  if (!key.valid || !(key == op->planKey)) {
    op->planKey = {};
    op->plan.clear();
    plan(a, inPlace, op->plan);
    op->carriedOut = prependFingerprint(*op);
    op->planKey = key;
  }
  writeFingerprint(*op, a);
  logCall(a, engine_->nextSeq());
  return op;
}

void Communicator::plan(const CollArgs& a, bool inPlace, algo::Plan& out) {
  using engine::CollKind;
  const uint32_t typeSize = uint32_t(dataTypeSize(a.type));
  const uint64_t bytes = a.count * typeSize;
  algo::CollPlanArgs c;
  c.count = a.count;
  c.typeSize = typeSize;
  c.average = a.op == RedOp::Avg;
  c.rank = rank_;
  c.nranks = nranks_;
  c.root = a.root;
  c.inPlace = inPlace;
  c.chunkBytes = tune::chainChunk(bytes, tuning_);
  c.scratchBytes = scratch_.size();
  c.ring = ring_;  // ring all-gather and reduce-scatter run on the topology ring
  switch (a.coll) {
    case CollKind::AllReduce: {
      tune::AllReduceChoice choice = tune::allReduce(bytes, tuning_, c.average);
      if (choice.algo == tune::AllReduceAlgo::Direct) {
        algo::planDirectAllReduce(c, out);
      } else if (choice.algo == tune::AllReduceAlgo::Hierarchical) {
        algo::HierAllReduceArgs h;
        h.base = c;
        h.base.chunkBytes = choice.chunkBytes;
        h.hostOf = hostOf_;
        h.localChunkBytes = choice.localChunkBytes;
        h.leaders = choice.leaders == tune::LeaderAlgo::Tree   ? algo::LeaderAlgo::Tree
                    : choice.leaders == tune::LeaderAlgo::Ring ? algo::LeaderAlgo::Ring
                                                               : algo::LeaderAlgo::RecursiveDoubling;
        algo::planHierAllReduce(h, out);
      } else if (choice.algo == tune::AllReduceAlgo::Tree) {
        c.chunkBytes = choice.chunkBytes;
        algo::planTreeAllReduce(c, out);
      } else if (choice.algo == tune::AllReduceAlgo::RecursiveDoubling) {
        algo::planRdAllReduce(c, out);
      } else {
        algo::RingAllReduceArgs r;
        r.count = a.count;
        r.typeSize = typeSize;
        r.inPlace = inPlace;
        r.average = c.average;
        r.pos = ringPos_;
        r.nranks = nranks_;
        r.nextRank = ring_[size_t(algo::ring::next(ringPos_, nranks_))];
        r.prevRank = ring_[size_t(algo::ring::prev(ringPos_, nranks_))];
        r.chunkBytes = choice.chunkBytes;
        r.scratchBytes = scratch_.size();
        algo::planRingAllReduce(r, out);
      }
      TEMPO_TRACE(log::Tuning, "AllReduce %lu bytes: %s, chunk %lu", (unsigned long)bytes,
                  tune::candidateName({choice.algo, choice.leaders, 0}), (unsigned long)choice.chunkBytes);
      break;
    }
    case CollKind::Broadcast: {
      const tune::BroadcastAlgo algo = tune::broadcast(bytes, tuning_);
      if (algo == tune::BroadcastAlgo::Tree) algo::planTreeBroadcast(c, out);
      else algo::planChainBroadcast(c, out);
      TEMPO_TRACE(log::Tuning, "Broadcast %lu bytes: %s, chunk %lu", (unsigned long)bytes, tune::algoName(algo),
                  (unsigned long)c.chunkBytes);
      break;
    }
    case CollKind::Reduce:
      algo::planChainReduce(c, out);
      break;
    case CollKind::AllGather:
      c.chunkBytes = tune::ringChunk(bytes, tuning_);
      algo::planRingAllGather(c, out);
      break;
    case CollKind::ReduceScatter:
      c.chunkBytes = tune::ringChunk(bytes, tuning_);
      algo::planRingReduceScatter(c, out);
      break;
    case CollKind::Gather:
      algo::planGather(c, out);
      break;
    case CollKind::Scatter:
      algo::planScatter(c, out);
      break;
    case CollKind::AllToAll:
    case CollKind::AllToAllv: {
      algo::AllToAllvArgs v;
      v.typeSize = typeSize;
      v.rank = rank_;
      v.nranks = nranks_;
      const size_t n = size_t(nranks_);
      if (a.coll == CollKind::AllToAll) {
        // Fixed counts: count elements to and from every peer, at j * count.
        a2aCounts_.assign(n, a.count);
        a2aDispls_.resize(n);
        for (size_t j = 0; j < n; ++j) a2aDispls_[j] = j * a.count;
        v.sendCounts = v.recvCounts = a2aCounts_;
        v.sendDispls = v.recvDispls = a2aDispls_;
      } else {
        v.sendCounts = {a.sendCounts, n};
        v.sendDispls = {a.sendDispls, n};
        v.recvCounts = {a.recvCounts, n};
        v.recvDispls = {a.recvDispls, n};
      }
      algo::planAllToAllv(v, out);
      break;
    }
    case CollKind::SendRecv:
      break;  // prepareP2p's
  }
}

namespace {

// The fingerprint of a collective call (32 bytes, little endian). `carried` is not part
// of the call: it counts the data bytes that follow it in round 0's message.
struct Fingerprint {
  uint32_t magic = 0x31504654;  // "TFP1"
  uint8_t coll = 0, type = 0, op = 0, pad = 0;
  int32_t root = -1;
  uint32_t carried = 0;
  uint64_t seq = 0;
  uint64_t count = 0;
};
static_assert(sizeof(Fingerprint) == engine::Op::kFingerprintBytes);

// The fingerprint's op field: the RedOp, or kPreMulSumCode.
constexpr uint8_t kPreMulSumCode = kNumRedOps;
const char* opText(uint8_t op) { return op == kPreMulSumCode ? "ncclPreMulSum" : redOpName(RedOp(op)); }

// Compares the previous rank's fingerprint with ours; names the first field that differs,
// both values and both ranks.
Status verifyFingerprint(const engine::Op& op, const std::byte* received, int rank, int peer, uint64_t* carried) {
  Fingerprint mine, theirs;
  memcpy(&mine, op.fingerprint.data(), sizeof mine);
  memcpy(&theirs, received, sizeof theirs);
  *carried = theirs.carried;
  const char* name = engine::collName(engine::CollKind(mine.coll));
  const unsigned long seq = (unsigned long)mine.seq;
  if (theirs.magic != mine.magic)
    return fail(Status::InvalidUsage, "collective #%lu (%s): rank %d received a malformed fingerprint from rank %d",
                seq, name, rank, peer);
  if (theirs.coll != mine.coll)
    return fail(Status::InvalidUsage,
                "collective mismatch at collective #%lu: field collective is %s on rank %d but %s on rank %d", seq,
                name, rank, engine::collName(engine::CollKind(theirs.coll)), peer);
  if (theirs.count != mine.count)
    return fail(Status::InvalidUsage, "%s mismatch at collective #%lu: field count is %lu on rank %d but %lu on rank %d",
                name, seq, (unsigned long)mine.count, rank, (unsigned long)theirs.count, peer);
  if (theirs.type != mine.type)
    return fail(Status::InvalidUsage, "%s mismatch at collective #%lu: field datatype is %s on rank %d but %s on rank %d",
                name, seq, dataTypeName(DataType(mine.type)), rank, dataTypeName(DataType(theirs.type)), peer);
  if (theirs.op != mine.op)
    return fail(Status::InvalidUsage, "%s mismatch at collective #%lu: field op is %s on rank %d but %s on rank %d", name,
                seq, opText(mine.op), rank, opText(theirs.op), peer);
  if (theirs.root != mine.root)
    return fail(Status::InvalidUsage, "%s mismatch at collective #%lu: field root is %d on rank %d but %d on rank %d",
                name, seq, mine.root, rank, theirs.root, peer);
  if (theirs.seq != mine.seq)
    return fail(Status::InvalidUsage, "%s mismatch: rank %d is at collective #%lu but rank %d at #%lu", name, rank, seq,
                peer, (unsigned long)theirs.seq);
  return Status::Success;
}

}  // namespace

uint64_t Communicator::prependFingerprint(engine::Op& op) {
  if (!checkMismatch_) return 0;
  using algo::absolute;
  algo::FingerprintLocs locs;
  locs.mine = absolute(op.fingerprint.data());
  locs.leadOut = absolute(op.leadOut.data());
  locs.leadIn = absolute(op.leadIn.data());
  locs.theirs = absolute(op.peerFingerprints[0].data());
  locs.bytes = sizeof(Fingerprint);
  return algo::prependFingerprint(op.plan, rank_, nranks_, kFingerprintMsg, locs);
}

void Communicator::writeFingerprint(engine::Op& op, const CollArgs& a) {
  if (!checkMismatch_) return;
  Fingerprint f;
  f.coll = uint8_t(a.coll);
  f.type = uint8_t(a.type);
  const bool reduces = a.coll == engine::CollKind::AllReduce || a.coll == engine::CollKind::Reduce ||
                       a.coll == engine::CollKind::ReduceScatter;
  f.op = !reduces ? 0 : a.scalar ? kPreMulSumCode : uint8_t(a.op);
  f.root = a.root;
  f.seq = engine_->nextSeq();
  f.count = a.coll == engine::CollKind::AllToAllv ? 0 : a.count;  // v-counts differ by design
  memcpy(op.fingerprint.data(), &f, sizeof f);
  f.carried = uint32_t(op.carriedOut);
  if (f.carried) memcpy(op.leadOut.data(), &f, sizeof f);
  op.verify = verifyFingerprint;
  op.fingerprintRounds = algo::fingerprintRounds(nranks_);
}

Result<engine::Op*> Communicator::prepareP2p(std::span<const CollArgs> calls) {
  CollArgs first = calls.front();
  first.send = first.recv = nullptr;
  uint64_t total = 0;
  for (const CollArgs& a : calls) total += a.count * dataTypeSize(a.type);
  engine::Op* op = takeOp(first, total);
  op->planKey = {};
  op->plan.clear();
  if (p2pSent_.empty()) {
    p2pSent_.assign(size_t(nranks_), 0);
    p2pReceived_.assign(size_t(nranks_), 0);
  }
  using algo::absolute;
  // Sends to self pair with receives from self in call order and become copies.
  size_t selfSends = 0, selfRecvs = 0;
  for (const CollArgs& a : calls) {
    const uint64_t bytes = a.count * dataTypeSize(a.type);
    if (a.peer == rank_) {
      size_t& mine = a.p2p == P2p::Send ? selfSends : selfRecvs;
      size_t k = mine++;
      if (a.p2p == P2p::Recv || bytes == 0) continue;
      // Find the k-th receive from self.
      const CollArgs* match = nullptr;
      for (size_t seen = 0; const CollArgs& b : calls)
        if (b.peer == rank_ && b.p2p == P2p::Recv && seen++ == k) match = &b;
      if (!match) break;  // reported below
      const uint64_t want = match->count * dataTypeSize(match->type);
      if (want != bytes) {
        release(op);
        return fail(Status::InvalidUsage, "ncclSend to self of %lu bytes meets an ncclRecv from self of %lu bytes",
                    (unsigned long)bytes, (unsigned long)want);
      }
      algo::Step s;
      s.kind = algo::StepKind::Copy;
      s.bytes = bytes;
      s.src = absolute(a.send);
      s.dst = absolute(match->recv);
      op->plan.add(s);
      continue;
    }
    // A zero-byte message still travels: NCCL matches sends and receives by order, and
    // the counters of both sides must stay in step.
    algo::Step s;
    s.peer = a.peer;
    s.bytes = bytes;
    if (a.p2p == P2p::Send) {
      s.kind = algo::StepKind::Send;
      s.src = absolute(a.send);
      s.msg = p2pSent_[size_t(a.peer)]++;
    } else {
      s.kind = algo::StepKind::Recv;
      s.dst = absolute(a.recv);
      s.msg = p2pReceived_[size_t(a.peer)]++;
    }
    op->plan.add(s);
  }
  if (selfSends != selfRecvs) {
    release(op);
    return fail(Status::InvalidUsage,
                "%zu ncclSend(s) to self but %zu ncclRecv(s) from self in one group on rank %d; each needs its partner",
                selfSends, selfRecvs, rank_);
  }
  op->plan.window = uint32_t(std::max<size_t>(1, op->plan.steps.size()));
  for (const CollArgs& a : calls) logCall(a, engine_->nextSeq());
  return op;
}

Result<int> Communicator::createPreMulSum(const void* scalar, DataType type, bool deviceResident) {
  size_t slot = 0;
  while (slot < userOps_.size() && userOps_[slot].live) ++slot;
  if (slot == userOps_.size()) {
    if (slot >= size_t(INT32_MAX) - kNumRedOps)
      return fail(Status::InvalidUsage, "ncclRedOpCreatePreMulSum: too many reduction operators on comm %p",
                  static_cast<void*>(this));
    userOps_.emplace_back();
  }
  PreMulSumOp& u = userOps_[slot];
  u = PreMulSumOp{};
  u.live = true;
  u.type = type;
  u.deviceResident = deviceResident;
  if (deviceResident) u.ptr = scalar;
  else memcpy(u.value, scalar, dataTypeSize(type));
  return kNumRedOps + int(slot);
}

const PreMulSumOp* Communicator::preMulSum(int op) const {
  if (op < kNumRedOps || size_t(op - kNumRedOps) >= userOps_.size()) return nullptr;
  const PreMulSumOp& u = userOps_[size_t(op - kNumRedOps)];
  return u.live ? &u : nullptr;
}

Status Communicator::destroyRedOp(int op) {
  if (op >= 0 && op < kNumRedOps)
    return fail(Status::InvalidArgument, "ncclRedOpDestroy: %s is a built-in operator", redOpName(RedOp(op)));
  if (!preMulSum(op))
    return fail(Status::InvalidArgument, "ncclRedOpDestroy: op %d was not created on comm %p (or already destroyed)",
                op, static_cast<void*>(this));
  userOps_[size_t(op - kNumRedOps)].live = false;
  return Status::Success;
}

void Communicator::release(engine::Op* op) { freeOps_.push_back(op); }

void Communicator::logCall(const CollArgs& a, uint64_t seq) const {
  TEMPO_INFO(log::Coll, "%s: opCount %lx sendbuff %p recvbuff %p count %zu datatype %d op %d root %d comm %p [nranks=%d] stream %p",
             engine::collName(a.coll), (unsigned long)seq, a.send, a.recv, a.count, int(a.type), int(a.op), a.root,
             static_cast<const void*>(this), nranks_, a.stream);
}

void Communicator::recordError(Status s) {
  if (ok(s) || s == Status::InProgress) return;
  int expected = 0;
  if (asyncError_.compare_exchange_strong(expected, int(s), std::memory_order_acq_rel)) {
    std::string why;
    {
      std::lock_guard<std::mutex> lock(errMu_);
      why = lastErrorMessage();
      if (why.empty()) why = std::string(statusName(s)) + " on rank " + std::to_string(rank_);
      errMsg_ = why;
    }
    // The other ranks may be waiting on this one inside the same collective: tell them,
    // around the ring, rather than leave them to their timeouts.
    if (boot_) boot_->notifyNeighbours(s, why);
  }
}

Status Communicator::explainFailure(Status s, bool isCause) {
  if (isCause || !boot_) return s;
  std::string why;
  // The cause travels around the bootstrap ring, one hop per forwarding rank's liveness
  // check (20 ms); a second covers rings of dozens of ranks, and a real fault with no notice
  // to wait for is reported a second late at most (sooner when a ring neighbour is gone).
  const Deadline deadline = Deadline::after(1000 * 1000 * 1000);
  while (!deadline.expired()) {
    Status notice = boot_->pollNotice(&why);
    if (!ok(notice)) return fail(notice, "%s", why.c_str());
    if (boot_->neighbourGone()) break;
    usleep(2000);
  }
  return s;
}

std::string Communicator::errorMessage() const {
  std::lock_guard<std::mutex> lock(errMu_);
  return errMsg_;
}

Status Communicator::check(bool closedIsFatal) {
  std::string why;
  if (boot_) {
    Status notice = boot_->pollNotice(&why);
    if (!ok(notice)) return fail(notice, "%s", why.empty() ? "a ring neighbour failed" : why.c_str());
  }
  if (closedIsFatal && boot_ && boot_->neighbourGone())
    return fail(Status::RemoteError,
                "rank %d: a ring neighbour closed its connection (the peer process exited or aborted)", rank_);
  return Status::Success;
}

void Communicator::runAsync(std::function<Status()> job) {
  worker_.post([this, job = std::move(job)] { endAsync(job()); });
}

void Communicator::endAsync(Status s) {
  recordError(s);
  {
    std::lock_guard<std::mutex> lock(asyncMu_);
    inProgress_.store(false, std::memory_order_release);
  }
  asyncCv_.notify_all();
}

bool Communicator::waitAsyncFor(int64_t ns) {
  std::unique_lock<std::mutex> lock(asyncMu_);
  return asyncCv_.wait_for(lock, std::chrono::nanoseconds(ns),
                           [this] { return !inProgress_.load(std::memory_order_acquire); });
}

void Communicator::waitAsync() {
  std::unique_lock<std::mutex> lock(asyncMu_);
  asyncCv_.wait(lock, [this] { return !inProgress_.load(std::memory_order_acquire); });
}

Status Communicator::finalize() {
  if (!engine_) return asyncError();  // never joined
  if (!engine_->idle()) {
    engine::Engine* e = engine_.get();
    TEMPO_TRY(engine::waitAll(std::span(&e, 1)));
  }
  finalized_ = true;
  return asyncError();
}

bool Communicator::waitForDriverToLeave(const char* fn, std::unique_lock<std::timed_mutex>& drive) {
  // The operation in flight notices the stop flag within one pass of its wait (a
  // collective) or one bootstrap poll interval (an init or split), and leaves.
  constexpr int64_t kAbortWaitNs = 10'000'000'000;
  const int64_t start = nowNs();
  if (!waitAsyncFor(kAbortWaitNs)) {
    TEMPO_WARN("comm %p rank %d: %s: the nonblocking operation in flight did not stop within 10 s",
               static_cast<void*>(this), rank_, fn);
    return false;
  }
  drive = std::unique_lock<std::timed_mutex>(driveMu_, std::chrono::nanoseconds(kAbortWaitNs - (nowNs() - start)));
  if (!drive.owns_lock()) {
    TEMPO_WARN("comm %p rank %d: %s: the call in flight on another thread did not stop within 10 s",
               static_cast<void*>(this), rank_, fn);
    return false;
  }
  return true;
}

bool Communicator::abort() {
  aborting_.store(true, std::memory_order_release);
  std::unique_lock<std::timed_mutex> drive;
  if (!waitForDriverToLeave("ncclCommAbort", drive)) return false;
  // Nobody drives the engine now. Cancel, and tell the neighbours why.
  setLastErrorMessage(("rank " + std::to_string(rank_) + " aborted its communicator (ncclCommAbort)").c_str());
  recordError(Status::RemoteError);
  if (engine_) engine_->abort(Status::InvalidUsage);
  for (auto& ep : endpoints_) ep->cancelAll();
  if (boot_) boot_->shutdown();
  return true;
}

Status Communicator::revoke() {
  if (revoked_.exchange(true, std::memory_order_acq_rel))
    return fail(Status::InvalidArgument, "ncclCommRevoke: comm %p rank %d is already revoked",
                static_cast<void*>(this), rank_);
  std::unique_lock<std::timed_mutex> drive;
  if (!waitForDriverToLeave("ncclCommRevoke", drive))
    return fail(Status::InternalError, "ncclCommRevoke: comm %p rank %d: the operation in flight did not stop within 10 s",
                static_cast<void*>(this), rank_);
  // Cancel what is in flight and tell the neighbours (who forward it), but record no error
  // here and keep the bootstrap listener: a revoked communicator can still be shrunk.
  if (engine_) engine_->abort(Status::InvalidUsage);
  for (auto& ep : endpoints_) ep->cancelAll();
  if (boot_)
    boot_->notifyNeighbours(Status::RemoteError,
                            "rank " + std::to_string(rank_) + " revoked the communicator (ncclCommRevoke)");
  TEMPO_INFO(log::Init, "comm %p rank %d nranks %d - Revoke COMPLETE", static_cast<void*>(this), rank_, nranks_);
  return Status::Success;
}

Status Communicator::suspend() {
  if (suspended_.exchange(true, std::memory_order_acq_rel))
    return fail(Status::InvalidUsage, "ncclCommSuspend: comm %p rank %d is already suspended",
                static_cast<void*>(this), rank_);
  return Status::Success;
}

Status Communicator::resume() {
  if (!suspended_.exchange(false, std::memory_order_acq_rel))
    return fail(Status::InvalidUsage, "ncclCommResume: comm %p rank %d is not suspended", static_cast<void*>(this),
                rank_);
  return Status::Success;
}

Status Communicator::usable() {
  const void* self = static_cast<void*>(this);
  if (aborting()) return fail(Status::InvalidUsage, "communicator %p rank %d was aborted (ncclCommAbort)", self, rank_);
  if (revoked()) return fail(Status::InvalidUsage, "communicator %p rank %d was revoked (ncclCommRevoke)", self, rank_);
  if (suspended())
    return fail(Status::InvalidUsage, "communicator %p rank %d is suspended (call ncclCommResume first)", self, rank_);
  Status s = asyncError();
  if (!ok(s))
    return fail(s, "communicator %p rank %d is unusable after an earlier error: %s", self, rank_,
                errorMessage().c_str());
  return Status::Success;
}

}  // namespace tempo::comm
