// The Communicator's wiring at init: where each rank sits (NUMA node, NICs), the
// transports chosen per peer and connected (once per rail for the network ones), the first
// message each way on every connection, the topology ring, and the tuner's log. Split from
// communicator.cc, which keeps the lifecycle and the collectives.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <optional>

#include "src/comm/communicator.h"
#include "src/core/host.h"
#include "src/core/log.h"
#include "src/core/param.h"
#include "src/pacing/clock.h"
#include "src/topo/dump.h"
#include "src/topo/locality.h"
#include "src/tune/tune.h"
#include "transports/faulty/faulty.h"
#include "transports/framed/framed.h"
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

// Whether a choice reaches peers on other hosts (and is opened once per rail).
bool isNetwork(int c) { return c == kTcp || c == kUserProvider || c == kUcx || c == kRouted; }

constexpr int kMaxRails = 8;  // NICs per rank used at once

// Requests on the stack of a function that fails must not outlive it in the transports:
// unless disarmed, every endpoint's requests are cancelled on the way out.
struct CancelOnFailure {
  std::vector<std::unique_ptr<transport::Endpoint>>& eps;
  bool armed = true;
  ~CancelOnFailure() {
    if (armed)
      for (auto& e : eps) e->cancelAll();
  }
};

// The clock probes' messages: a tag no collective, point-to-point or handshake message
// uses (a telemetry exchange never numbers a message 0x7ffe).
constexpr uint64_t kClockTag = engine::kP2pTagBit | 0xfffe;
constexpr int kClockProbes = 16;

// `users` is how many peers chose this transport; the network transports use `nic`
// (null: their own choice) unless the user's own variables name one.
Result<std::unique_ptr<transport::Endpoint>> openEndpoint(Choice c, uint64_t commHash, int rank, int nranks,
                                                          int users, const std::vector<bool>& sameHost,
                                                          const Nic* nic) {
  if (c == kLoopback) return transport::loopback::create(commHash, rank, nranks);
  if (c == kShm) return transport::shm::create(rank, nranks, users);
  if (c == kUcx) {
#ifdef TEMPO_HAVE_UCX
    const std::string devices = !nic || *param::UcxNetDevices() ? std::string() : ucxDevices(*nic);
    return transport::ucx::create(rank, nranks, {.tls = "", .sameHost = sameHost, .netDevices = devices});
#else
    return fail(Status::InvalidUsage, "this build of Tempo has no UCX transport (TEMPO_WITH_UCX=OFF)");
#endif
  }
  if (c == kRouted) {  // autoNetChoice picks it only where both libraries are built
    TEMPO_ASSIGN(auto small, openEndpoint(kUcx, commHash, rank, nranks, users, sameHost, nic));
    TEMPO_ASSIGN(auto large, openEndpoint(kTcp, commHash, rank, nranks, users, sameHost, nic));
    // Point-to-point lengths are the user's and may disagree between the two sides, so
    // those messages never split across the two (see routed.h).
    return transport::routed::create(std::move(small), std::move(large),
                                     {.largeBytes = uint64_t(param::NetLargeBytes()),
                                      .pinnedTags = engine::kP2pTagBit});
  }
#ifdef TEMPO_HAVE_OFI
  std::string prov = c == kOfiShm ? "shm" : c == kTcp ? "tcp" : param::FiProvider();
  // A tcp domain is named by its interface, other providers' (verbs) by their device.
  const std::string domain = !nic || prov == "shm"          ? std::string()
                             : prov.rfind("tcp", 0) == 0 ? nic->netdev
                                                          : nic->name;
  return transport::ofi::create(prov, rank, nranks, domain);
#else
  return fail(Status::InvalidUsage, "this build of Tempo has no libfabric transport (TEMPO_WITH_OFI=OFF)");
#endif
}

// The endpoint every data message of `ep` then goes through: faults injected on the wire
// (TEMPO_FAULT), and above them end-to-end checks that turn every injected fault into a
// clean error or a bit-exact result (TEMPO_CHECKSUM, forced on under TEMPO_FAULT).
Result<std::unique_ptr<transport::Endpoint>> decorate(std::unique_ptr<transport::Endpoint> ep, int rank) {
  TEMPO_ASSIGN(const transport::faulty::Faults faults, transport::faulty::parse(param::Fault()));
  if (faults.any()) {
    TEMPO_INFO(log::Init | log::Net, "rank %d: TEMPO_FAULT injects %s on %s", rank, faults.describe().c_str(),
               ep->name());
    ep = transport::faulty::create(std::move(ep), faults, rank);
  }
  if (faults.any() || param::Checksum() != 0) ep = transport::framed::create(std::move(ep));
  return ep;
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

Status Communicator::exchangePlaces(Deadline deadline) {
  // Fixed-size records: the NUMA node, how many NICs (rails) the rank names, the first's name.
  struct PlaceRecord {
    int32_t numa;
    int32_t nics;
    char nic[56];
  };
  std::vector<PlaceRecord> places(static_cast<size_t>(nranks_));
  PlaceRecord& self = places[size_t(rank_)];
  self.numa = place_.numa;
  self.nics = int32_t(place_.nics.size());
  snprintf(self.nic, sizeof self.nic, "%s", place_.nics.empty() ? "" : place_.nics[0].name.c_str());
  TEMPO_TRY(boot_->allGather(std::as_writable_bytes(std::span(places)), sizeof(PlaceRecord), deadline));
  numaOf_.clear();
  rails_ = kMaxRails;
  for (const PlaceRecord& p : places) {
    numaOf_.push_back(p.numa >= -1 && p.numa < 4096 ? p.numa : -1);
    rails_ = std::min(rails_, std::max(1, int(p.nics)));
  }
  channels_ = tune::channelCount(rails_);
  std::string nics;
  for (const Nic& n : place_.nics) nics += (nics.empty() ? "" : ",") + n.name;
  TEMPO_INFO(log::Graph | log::Net, "comm %p rank %d: host %s, cpus on numa node %d, NIC %s (%s)%s",
             static_cast<void*>(this), rank_, boot_->peers()[size_t(rank_)].hostname, place_.numa,
             nics.empty() ? "chosen by the transports" : nics.c_str(), place_.why.empty() ? "no NIC found" : place_.why.c_str(),
             int(place_.nics.size()) > rails_ ? "; some rank has fewer NICs, so only the first ones are used" : "");
  if (rank_ == 0)
    TEMPO_INFO(log::Graph | log::Tuning, "comm %p %d rail(s), %d channel(s) for the ring collectives",
               static_cast<void*>(this), rails_, channels_);
  return Status::Success;
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
  const topo::Locality loc = topo::placeRanks(hosts, map ? &*map : nullptr, numaOf_);
  if (rank_ == 0 && *param::TopoDumpFile()) {
    TEMPO_TRY(topo::writeTopology(param::TopoDumpFile(), map ? *map : topo::SwitchMap{}, hosts, numaOf_));
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
  hostOf_ = loc.hosts();
  // Tiers: the same host, else the same leaf switch (the level above the host, when a
  // switch map names one), else the fabric.
  const int leafLevel = map && loc.levels() > loc.hostLevel + 1 ? loc.hostLevel + 1 : -1;
  peerTier_.assign(size_t(nranks_), engine::Tier::Fabric);
  for (int p = 0; p < nranks_; ++p) {
    if (hostOf_[size_t(p)] == hostOf_[size_t(rank_)]) peerTier_[size_t(p)] = engine::Tier::Host;
    else if (leafLevel >= 0 && loc.group[size_t(leafLevel)][size_t(p)] == loc.group[size_t(leafLevel)][size_t(rank_)])
      peerTier_[size_t(p)] = engine::Tier::Leaf;
  }
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
  shared.push_back(channels_);
  const uint64_t mine = fnv1a(shared.data(), shared.size() * sizeof(int64_t));
  std::vector<uint64_t> all(static_cast<size_t>(nranks_));
  all[size_t(rank_)] = mine;
  TEMPO_TRY(boot_->allGather(std::as_writable_bytes(std::span(all)), sizeof(uint64_t), deadline));
  for (int r = 0; r < nranks_; ++r)
    if (all[size_t(r)] != mine)
      return fail(Status::InvalidUsage,
                  "rank %d laid out a different ring, cost model or channel count than rank %d (do their "
                  "TEMPO_TOPO_FILE, TEMPO_RING_ORDER, TEMPO_NET_ALPHA_US, TEMPO_NET_MBITS or NCCL_MIN_NCHANNELS/"
                  "NCCL_MAX_NCHANNELS settings differ?)",
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
  // each rail and each choice in order (slot rail * kChoices + choice), a 16-bit length
  // and that many address bytes (0: not opened); the network choices are opened once per
  // rail, each on that rail's NIC. Records are as long as the longest rank's, learnt by a
  // first exchange of lengths.
  const int slots = rails_ * kChoices;
  std::vector<transport::Endpoint*> bySlot(static_cast<size_t>(slots), nullptr);
  std::vector<std::byte> record;
  for (int slot = 0; slot < slots; ++slot) {
    const int rail = slot / kChoices, ch = slot % kChoices;
    std::span<const std::byte> addr;
    if (needed[ch] && (rail == 0 || isNetwork(ch))) {
      const Nic* nic = place_.nics.empty() ? nullptr : &place_.nics[size_t(rail)];
      TEMPO_ASSIGN(std::unique_ptr<transport::Endpoint> ep,
                   openEndpoint(Choice(ch), commHash_, rank_, nranks_, needed[ch], sameHost, nic));
      TEMPO_ASSIGN(ep, decorate(std::move(ep), rank_));
      addr = ep->address();
      if (addr.empty() || addr.size() > transport::kMaxAddressBytes)
        return fail(Status::InternalError, "%s address of %zu bytes is empty or too long", ep->name(), addr.size());
      bySlot[size_t(slot)] = ep.get();
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
    if (len < 2u * uint32_t(slots) || len > uint32_t(slots) * (2 + transport::kMaxAddressBytes))
      return fail(Status::InvalidUsage, "rank %d published a transport record of %u bytes", p, len);
    blockBytes = std::max<size_t>(blockBytes, len);
  }
  std::vector<std::byte> blocks(blockBytes * size_t(nranks_));
  memcpy(blocks.data() + blockBytes * size_t(rank_), record.data(), record.size());
  TEMPO_TRY(boot_->allGather(blocks, blockBytes, deadline));

  // Phase 3: connect every peer with the address it published for our shared choice, on
  // every rail its choice has.
  peerEndpoint_.assign(size_t(nranks_), nullptr);
  extraRails_.assign(size_t(rails_ - 1), std::vector<transport::Endpoint*>(size_t(nranks_), nullptr));
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_) continue;
    const int ch = choice[size_t(p)];
    std::span<const std::byte> rec(blocks.data() + blockBytes * size_t(p), blockBytes);
    for (int rail = 0; rail < (isNetwork(ch) ? rails_ : 1); ++rail) {
      const int slot = rail * kChoices + ch;
      size_t at = 0, len = 0;
      for (int k = 0; k <= slot && at + 2 <= rec.size(); ++k) {
        len = size_t(rec[at]) | (size_t(rec[at + 1]) << 8);
        if (k < slot) at += 2 + len;
      }
      transport::Endpoint* ep = bySlot[size_t(slot)];
      if (len == 0 || at + 2 + len > rec.size())
        return fail(Status::InvalidUsage, "rank %d did not open the %s transport that rank %d chose for it (rail %d)",
                    p, ep->name(), rank_, rail);
      TEMPO_TRY(ep->connect(p, rec.subspan(at + 2, len)));
      (rail == 0 ? peerEndpoint_ : extraRails_[size_t(rail - 1)])[size_t(p)] = ep;
    }
    for (auto& r : extraRails_)
      if (!r[size_t(p)]) r[size_t(p)] = peerEndpoint_[size_t(p)];  // one endpoint serves every rail
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
  for (size_t rail = 0; rail < size_t(rails_); ++rail) TEMPO_TRY(handshakeRail(rail, deadline));
  return Status::Success;
}

// Rail 0 covers every peer; a later rail only the peers it reaches through an endpoint of
// its own (the others have no lanes there).
Status Communicator::handshakeRail(size_t rail, Deadline deadline) {
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
  auto lanesTo = [&](int peer) {
    transport::Endpoint* ep = rail == 0 ? peerEndpoint_[size_t(peer)] : extraRails_[rail - 1][size_t(peer)];
    return rail > 0 && ep == peerEndpoint_[size_t(peer)] ? std::vector<transport::Endpoint*>{} : ep->lanes();
  };
  auto post = [&](int from, int to, Pair& pr) -> Status {
    const std::vector<transport::Endpoint*> in = lanesTo(from);
    const std::vector<transport::Endpoint*> out = lanesTo(to);
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
  CancelOnFailure guard{endpoints_};
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
          return fail(ok(sent) ? got : sent, "rank %d: the first messages with ranks %d and %d failed (rail %zu)",
                      rank_, (rank_ + done) % n, from, rail);
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

// Clock offsets to rank 0's clock (pacing.md 1.4). One CLOCK_MONOTONIC per host, so the
// lowest rank of each host probes rank 0 and its estimate serves the whole host: rank 0
// answers every host's probes at once (each reply carries the time the probe was seen and
// the time the reply left), and an all-gather hands every rank its host's estimate.
Status Communicator::syncClocks(Deadline deadline) {
  const size_t n = size_t(nranks_);
  std::vector<int> leader(n, -1);  // by host id
  std::vector<int> clients;         // every host's leader but rank 0's host's
  for (int r = 0; r < nranks_; ++r) {
    int& l = leader[size_t(hostOf_[size_t(r)])];
    if (l < 0) {
      l = r;
      if (hostOf_[size_t(r)] != hostOf_[0]) clients.push_back(r);
    }
  }
  auto progressAll = [&] {
    for (auto& e : endpoints_) e->progress();
  };
  auto timedOut = [&](int peer) {
    return fail(Status::SystemError, "rank %d: clock probes with rank %d did not finish within the init timeout",
                rank_, peer);
  };
  // Posts a send or a receive, retrying while the transport is momentarily full.
  auto post = [&](bool send, int peer, void* buf, size_t len, transport::Request* req) -> Status {
    req->reset();
    transport::Endpoint* ep = peerEndpoint_[size_t(peer)];
    for (;;) {
      Status st = send ? ep->isend(peer, kClockTag, buf, len, req) : ep->irecv(peer, kClockTag, buf, len, req);
      if (st != Status::InProgress) return st;
      progressAll();
      if (deadline.expired()) return timedOut(peer);
    }
  };
  CancelOnFailure guard{endpoints_};
  pacing::ClockOffset mine{true, 0, 0, 0};  // rank 0's host: the reference itself
  if (rank_ == 0) {
    // Serve every client's kClockProbes probes; a probe is answered once the previous
    // answer to that client has left (the client waits for it anyway).
    struct Client {
      int rank;
      transport::Request recv, send;
      uint64_t probe = 0;
      int64_t reply[2] = {};
      int served = 0;
      bool replying = false;
    };
    std::vector<Client> cs;
    for (int c : clients) cs.push_back(Client{c, {}, {}});
    for (Client& c : cs) TEMPO_TRY(post(false, c.rank, &c.probe, sizeof c.probe, &c.recv));
    for (size_t pending = cs.size(); pending > 0;) {
      progressAll();
      for (Client& c : cs) {
        if (c.replying && c.send.done) {
          TEMPO_TRY(c.send.status);
          c.replying = false;
          if (++c.served == kClockProbes) --pending;
          else TEMPO_TRY(post(false, c.rank, &c.probe, sizeof c.probe, &c.recv));
        }
        if (!c.replying && c.served < kClockProbes && c.recv.done) {
          c.reply[0] = nowNs();  // seen no earlier than it arrived
          TEMPO_TRY(c.recv.status);
          c.recv.done = false;  // consumed; the next one is posted once this reply has left
          c.replying = true;
          c.reply[1] = nowNs();  // stamped no later than it leaves
          TEMPO_TRY(post(true, c.rank, c.reply, sizeof c.reply, &c.send));
        }
        if (deadline.expired() && (c.served < kClockProbes)) return timedOut(c.rank);
      }
    }
  } else if (leader[size_t(hostOf_[size_t(rank_)])] == rank_ && hostOf_[size_t(rank_)] != hostOf_[0]) {
    std::array<pacing::ClockProbe, kClockProbes> probes;
    for (pacing::ClockProbe& p : probes) {
      transport::Request send, recv;
      uint64_t probe = 0;
      int64_t reply[2] = {};
      TEMPO_TRY(post(false, 0, reply, sizeof reply, &recv));
      p.t1 = nowNs();
      TEMPO_TRY(post(true, 0, &probe, sizeof probe, &send));
      while (!recv.done || !send.done) {
        progressAll();
        if (deadline.expired()) return timedOut(0);
      }
      p.t4 = nowNs();
      TEMPO_TRY(send.status);
      TEMPO_TRY(recv.status);
      p.t2 = reply[0];
      p.t3 = reply[1];
    }
    mine = pacing::estimateOffset(probes);
  }
  guard.armed = false;
  // Every rank's estimate; each takes its host leader's.
  struct Shared {
    int64_t offsetNs, errorNs;
    int32_t valid;
    uint32_t probes;
  };
  std::vector<Shared> all(n);
  all[size_t(rank_)] = {mine.offsetNs, mine.errorNs, mine.valid, mine.probes};
  TEMPO_TRY(boot_->allGather(std::as_writable_bytes(std::span(all)), sizeof(Shared), deadline));
  const Shared& ours = all[size_t(leader[size_t(hostOf_[size_t(rank_)])])];
  clock_ = {ours.valid != 0, ours.offsetNs, ours.errorNs, ours.probes};
  clocksAllValid_ = std::all_of(all.begin(), all.end(), [&](const Shared& s) { return s.valid != 0; });
  if (!clock_.valid)
    TEMPO_WARN("comm %p rank %d: the clock probes to rank 0 disagree (a clock stepped?); traces carry no offset",
               static_cast<void*>(this), rank_);
  else
    TEMPO_INFO(log::Init, "comm %p rank %d: clock offset to rank 0 %+ld ns, within %ld ns", static_cast<void*>(this),
               rank_, long(clock_.offsetNs), long(clock_.errorNs));
  return Status::Success;
}

}  // namespace tempo::comm
