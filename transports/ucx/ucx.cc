#include "transports/ucx/ucx.h"

#include <poll.h>
#include <ucp/api/ucp.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>
#include <utility>
#include <vector>

#include "src/core/clock.h"
#include "src/core/log.h"

namespace tempo::transport::ucx {
namespace {

Status ucxFail(const char* what, ucs_status_t s) {
  return fail(s == UCS_ERR_CONNECTION_RESET || s == UCS_ERR_ENDPOINT_TIMEOUT || s == UCS_ERR_UNREACHABLE
                  ? Status::RemoteError
                  : Status::SystemError,
              "ucx: %s: %s", what, ucs_status_string(s));
}

// The UCT transports of `ep`'s lanes ("sysv/memory", "tcp/eth0"), from UCP's own report of
// its configuration (UCX 1.13 has no query for them): "lane[0]:  3:sysv/memory.0 md[2] ...".
std::vector<std::string> laneTransports(ucp_ep_h ep) {
  char* text = nullptr;
  size_t size = 0;
  FILE* f = open_memstream(&text, &size);
  if (!f) return {};
  ucp_ep_print_info(ep, f);
  fclose(f);
  std::vector<std::string> tls;
  for (const char* line = text; line && *line;) {
    const char* end = strchr(line, '\n');
    std::string l(line, end ? size_t(end - line) : strlen(line));
    line = end ? end + 1 : nullptr;
    size_t lane = l.find("lane[");
    size_t colon = lane == std::string::npos ? lane : l.find(':', l.find(':', lane) + 1);
    if (colon == std::string::npos) continue;
    size_t dot = l.find_first_of(". ", colon + 1);
    std::string tl = l.substr(colon + 1, dot == std::string::npos ? std::string::npos : dot - colon - 1);
    if (!tl.empty() && std::find(tls.begin(), tls.end(), tl) == tls.end()) tls.push_back(tl);
  }
  free(text);
  return tls;
}

// UCT transports that stay inside the host's memory system.
bool sharedMemoryTransport(const std::string& tl) {
  static const std::set<std::string> kShm = {"posix", "sysv", "cma", "knem", "xpmem", "self"};
  return kShm.count(tl.substr(0, tl.find('/'))) > 0;
}

// Memory mapped with ucp_mem_map: its handle lets a transfer skip UCX's own registration
// (and its registration cache's lookup).
class UcxRegion final : public MemRegion {
 public:
  UcxRegion(ucp_context_h context, ucp_mem_h memh) : context_(context), memh_(memh) {}
  ~UcxRegion() override { ucp_mem_unmap(context_, memh_); }
  ucp_mem_h memh() const { return memh_; }

 private:
  ucp_context_h context_;
  ucp_mem_h memh_;
};

// Adds the region's memory handle to a post's parameters, when the request names one.
void useRegion(const Request* r, ucp_request_param_t* p) {
  if (const auto* region = dynamic_cast<const UcxRegion*>(r->region)) {
    p->op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
    p->memh = region->memh();
  }
}

// What a Request's internal scratch holds while UCX owns it.
struct ReqState {
  void* handle;  // the UCP request, null once completed
  class UcxEndpoint* owner;
  int peer;
  bool cancelled;
  bool completed;  // its callback has run (UCX may run it before the post returns)
};
static_assert(sizeof(ReqState) <= sizeof(Request::internal));
ReqState& state(Request* r) { return *reinterpret_cast<ReqState*>(r->internal); }

// What UCX reserves in each of its requests for us (the request handle points at it):
// `orphaned` is set when the Request it was posted for may no longer exist, because
// cancelAll() gave up waiting for its callback; the callback, which UCX may still run as
// late as ucp_worker_destroy, then frees the UCP request and touches nothing else. UCX
// initialises a request's space once, when it first allocates it, so the callback clears
// the flag before the request goes back to UCX's pool.
struct HandleSlot {
  bool orphaned;
};
void initSlot(void* request) { static_cast<HandleSlot*>(request)->orphaned = false; }
bool takeOrphaned(void* handle) { return std::exchange(static_cast<HandleSlot*>(handle)->orphaned, false); }

class UcxEndpoint final : public Endpoint {
 public:
  UcxEndpoint(int rank, int nranks, std::vector<bool> sameHost)
      : rank_(rank),
        sameHost_(std::move(sameHost)),
        eps_(size_t(nranks), nullptr),
        peerFailed_(size_t(nranks)),
        peerTransports_(size_t(nranks)) {
    sameHost_.resize(size_t(nranks), false);
  }
  ~UcxEndpoint() override { close(); }
  Status open(const Options& options);

  // UcxShm while every connected peer is reached over shared memory, else UcxNet.
  Kind kind() const override { return kind_; }
  const char* name() const override { return name_.c_str(); }
  std::string describePeer(int peer) const override { return peerTransports_[size_t(peer)]; }
  std::span<const std::byte> address() const override { return {address_.data(), address_.size()}; }
  Status connect(int peer, std::span<const std::byte> address) override;
  Status isend(int peer, uint64_t tag, const void* buf, size_t len, Request* req) override;
  Status irecv(int peer, uint64_t tag, void* buf, size_t len, Request* req) override;
  int progress() override;
  // Sleeps until UCX signals activity on the worker's event descriptor, or `ns` pass.
  void wait(int64_t ns) override;
  int maxOutstanding() const override { return 1024; }
  void cancelAll() override;
  Result<std::unique_ptr<MemRegion>> registerMemory(void* buf, size_t len) override;

 private:
  static void sent(void* handle, ucs_status_t s, void* user);
  static void received(void* handle, ucs_status_t s, const ucp_tag_recv_info_t* info, void* user);
  static void peerError(void* arg, ucp_ep_h ep, ucs_status_t s);
  void finish(Request* r, ucs_status_t s, size_t bytes);
  // Checks a post to `peer` and fills the parameters every post shares.
  Status prepare(int peer, const char* what, Request* req, ucp_request_param_t* p);
  Status track(Request* r, ucs_status_ptr_t p, int peer, const char* what);
  uint64_t wireTag(int fromRank, uint64_t tag) const { return (uint64_t(fromRank) << kWireTagBits) | tag; }
  void close();

  int rank_;
  std::vector<bool> sameHost_;
  std::string name_ = "ucx";
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  std::vector<ucp_ep_h> eps_;
  std::vector<ucs_status_t> peerFailed_;
  std::vector<std::string> peerTransports_;  // "sysv/memory,cma/memory"
  Kind kind_ = Kind::UcxShm;
  std::vector<std::byte> address_;
  int efd_ = -1;  // the worker's wakeup descriptor (owned by UCX)
  std::vector<Request*> outstanding_;  // posted and not yet completed
  std::vector<Request*> finished_;     // completed, to be marked done by progress()
  bool closed_ = false;
};

Status UcxEndpoint::open(const Options& options) {
  const std::string& tls = options.tls;
  ucp_config_t* config = nullptr;
  ucs_status_t s = ucp_config_read(nullptr, nullptr, &config);
  if (s != UCS_OK) return ucxFail("ucp_config_read", s);
  if (!tls.empty()) ucp_config_modify(config, "TLS", tls.c_str());
  const bool pickDevices = !options.netDevices.empty();
  if (pickDevices && (s = ucp_config_modify(config, "NET_DEVICES", options.netDevices.c_str())) != UCS_OK) {
    ucp_config_release(config);
    return ucxFail("ucp_config_modify(NET_DEVICES)", s);
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_REQUEST_SIZE | UCP_PARAM_FIELD_REQUEST_INIT;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  params.request_size = sizeof(HandleSlot);
  params.request_init = initSlot;
  s = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  if (s != UCS_OK) return ucxFail("ucp_init", s);
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;  // one thread at a time drives an Endpoint
  if ((s = ucp_worker_create(context_, &wp, &worker_)) != UCS_OK) return ucxFail("ucp_worker_create", s);
  if (ucp_worker_get_efd(worker_, &efd_) != UCS_OK) efd_ = -1;  // then wait() sleeps
  ucp_address_t* addr = nullptr;
  size_t len = 0;
  if ((s = ucp_worker_get_address(worker_, &addr, &len)) != UCS_OK) return ucxFail("ucp_worker_get_address", s);
  address_.assign(reinterpret_cast<const std::byte*>(addr), reinterpret_cast<const std::byte*>(addr) + len);
  ucp_worker_release_address(worker_, addr);
  if (!tls.empty()) name_ = "ucx/" + tls;
  TEMPO_INFO(log::Init | log::Net, "NET/UCX rank %d opened a worker (%zu-byte address%s%s%s%s)", rank_, len,
             tls.empty() ? "" : ", UCX_TLS ", tls.c_str(), pickDevices ? ", network devices " : "",
             pickDevices ? options.netDevices.c_str() : "");
  return Status::Success;
}

void UcxEndpoint::peerError(void* arg, ucp_ep_h ep, ucs_status_t s) {
  auto* self = static_cast<UcxEndpoint*>(arg);
  for (size_t p = 0; p < self->eps_.size(); ++p)
    if (self->eps_[p] == ep) self->peerFailed_[p] = s;
}

Status UcxEndpoint::connect(int peer, std::span<const std::byte> address) {
  if (closed_ || !worker_) return fail(Status::InternalError, "ucx: connect on a closed endpoint");
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  ep.address = reinterpret_cast<const ucp_address_t*>(address.data());
  ep.err_mode = UCP_ERR_HANDLING_MODE_NONE;
  ucs_status_t s = UCS_ERR_UNREACHABLE;
  if (!sameHost_[size_t(peer)]) {
    ep.field_mask |= UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;  // a dead peer fails its requests
    ep.err_handler.cb = peerError;
    ep.err_handler.arg = this;
    s = ucp_ep_create(worker_, &ep, &eps_[size_t(peer)]);
  }
  if (s == UCS_ERR_UNREACHABLE) {
    // A peer on this host, or transports (UCX_TLS) none of which handles peer failure.
    ep.field_mask &= ~uint64_t(UCP_EP_PARAM_FIELD_ERR_HANDLER);
    ep.err_mode = UCP_ERR_HANDLING_MODE_NONE;
    s = ucp_ep_create(worker_, &ep, &eps_[size_t(peer)]);
    if (s == UCS_OK && !sameHost_[size_t(peer)])
      TEMPO_INFO(log::Net, "NET/UCX rank %d -> %d: the transports UCX chose have no peer failure handling", rank_,
                 peer);
  }
  if (s != UCS_OK) return ucxFail("ucp_ep_create", s);
  std::string& desc = peerTransports_[size_t(peer)];
  for (const std::string& tl : laneTransports(eps_[size_t(peer)])) {
    desc += (desc.empty() ? "" : ",") + tl;
    if (!sharedMemoryTransport(tl)) kind_ = Kind::UcxNet;
  }
  if (desc.empty()) desc = "ucx";
  return Status::Success;
}

void UcxEndpoint::finish(Request* r, ucs_status_t s, size_t bytes) {
  state(r).handle = nullptr;
  state(r).completed = true;
  r->bytes = bytes;
  if (s == UCS_OK) {
    r->status = Status::Success;
  } else if (closed_) {
    r->status = Status::RemoteError;  // cancelled by cancelAll(): its caller knows why, and never looks
  } else if (s == UCS_ERR_MESSAGE_TRUNCATED) {
    r->status = fail(Status::InvalidUsage, "ucx: a message from rank %d is longer than the receive (%zu bytes)",
                     state(r).peer, bytes);
  } else {
    const ucs_status_t why = peerFailed_[size_t(state(r).peer)] != UCS_OK ? peerFailed_[size_t(state(r).peer)] : s;
    r->status = ucxFail(("a transfer with rank " + std::to_string(state(r).peer) + " failed").c_str(), why);
  }
  finished_.push_back(r);
}

void UcxEndpoint::sent(void* handle, ucs_status_t s, void* user) {
  auto* r = static_cast<Request*>(user);
  if (!takeOrphaned(handle)) state(r).owner->finish(r, s, 0);
  ucp_request_free(handle);
}

void UcxEndpoint::received(void* handle, ucs_status_t s, const ucp_tag_recv_info_t* info, void* user) {
  auto* r = static_cast<Request*>(user);
  if (!takeOrphaned(handle)) state(r).owner->finish(r, s, s == UCS_OK && info ? info->length : 0);
  ucp_request_free(handle);
}

Status UcxEndpoint::track(Request* r, ucs_status_ptr_t p, int peer, const char* what) {
  if (UCS_PTR_IS_ERR(p)) return ucxFail(what, UCS_PTR_STATUS(p));
  // UCP_OP_ATTR_FLAG_NO_IMM_CMPL: every post returns a request, completed by its callback,
  // which may already have run (and freed it).
  if (state(r).completed) return Status::Success;
  state(r).handle = p;
  state(r).peer = peer;
  outstanding_.push_back(r);
  return Status::Success;
}

Status UcxEndpoint::prepare(int peer, const char* what, Request* req, ucp_request_param_t* p) {
  if (closed_) return fail(Status::RemoteError, "ucx: %s on an aborted endpoint", what);
  if (peer < 0 || size_t(peer) >= eps_.size() || !eps_[size_t(peer)])
    return fail(Status::InvalidArgument, "ucx: %s with peer %d, which is not connected", what, peer);
  state(req) = ReqState{nullptr, this, peer, false, false};
  *p = ucp_request_param_t{};
  p->op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  p->user_data = req;
  useRegion(req, p);
  return Status::Success;
}

Status UcxEndpoint::isend(int peer, uint64_t tag, const void* buf, size_t len, Request* req) {
  ucp_request_param_t p;
  TEMPO_TRY(prepare(peer, "send", req, &p));
  if (peerFailed_[size_t(peer)] != UCS_OK) return ucxFail("send to a failed peer", peerFailed_[size_t(peer)]);
  p.cb.send = sent;
  return track(req, ucp_tag_send_nbx(eps_[size_t(peer)], buf, len, wireTag(rank_, tag), &p), peer, "send");
}

Status UcxEndpoint::irecv(int peer, uint64_t tag, void* buf, size_t len, Request* req) {
  ucp_request_param_t p;
  TEMPO_TRY(prepare(peer, "receive", req, &p));
  p.cb.recv = received;
  return track(req, ucp_tag_recv_nbx(worker_, buf, len, wireTag(peer, tag), ~uint64_t(0), &p), peer, "receive");
}

int UcxEndpoint::progress() {
  if (closed_) return 0;
  while (ucp_worker_progress(worker_)) {
  }
  // A receive from a peer that failed would never match: cancel it, and its callback
  // (next pass) reports the peer's failure.
  for (Request* r : outstanding_) {
    ReqState& st = state(r);
    if (st.handle && !st.cancelled && peerFailed_[size_t(st.peer)] != UCS_OK) {
      st.cancelled = true;
      ucp_request_cancel(worker_, st.handle);
    }
  }
  const int completed = int(finished_.size());
  for (Request* r : finished_) r->done = true;
  if (completed) {
    std::erase_if(outstanding_, [](Request* r) { return state(r).completed; });
    finished_.clear();
  }
  return completed;
}

Result<std::unique_ptr<MemRegion>> UcxEndpoint::registerMemory(void* buf, size_t len) {
  if (!context_) return fail(Status::InternalError, "ucx: registration on a closed endpoint");
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  mp.address = buf;
  mp.length = len;
  ucp_mem_h memh = nullptr;
  ucs_status_t s = ucp_mem_map(context_, &mp, &memh);
  if (s != UCS_OK) return ucxFail("ucp_mem_map", s);
  return std::unique_ptr<MemRegion>(std::make_unique<UcxRegion>(context_, memh));
}

void UcxEndpoint::wait(int64_t ns) {
  if (closed_ || efd_ < 0) return Endpoint::wait(ns);
  // Arming fails with BUSY while events are pending: then there is work to progress now.
  if (ucp_worker_arm(worker_) != UCS_OK) return;
  pollfd p{efd_, POLLIN, 0};
  const timespec t{time_t(ns / 1000000000), long(ns % 1000000000)};
  ppoll(&p, 1, &t, nullptr);
}

void UcxEndpoint::cancelAll() {
  if (closed_ || !worker_) return;
  closed_ = true;
  // Cancel everything posted, then progress until UCX has called back for every request
  // (bounded): only then are the buffers free.
  for (Request* r : outstanding_)
    if (state(r).handle && !state(r).cancelled) ucp_request_cancel(worker_, state(r).handle);
  const Deadline d = Deadline::afterSeconds(5);
  auto pending = [&] {
    for (Request* r : outstanding_)
      if (!state(r).completed) return true;
    return false;
  };
  while (pending() && !d.expired()) ucp_worker_progress(worker_);
  // A send queued to a peer that never answered is not cancellable: UCX completes it when
  // the worker is destroyed, after the Request is gone. Its callback must not touch it.
  int orphaned = 0;
  for (Request* r : outstanding_)
    if (!state(r).completed && state(r).handle) {
      static_cast<HandleSlot*>(state(r).handle)->orphaned = true;
      ++orphaned;
    }
  if (orphaned)
    TEMPO_INFO(log::Net, "ucx rank %d: %d transfers still pending 5 s after the abort are left to UCX", rank_, orphaned);
  outstanding_.clear();
  finished_.clear();
}

void UcxEndpoint::close() {
  cancelAll();
  for (ucp_ep_h& ep : eps_) {
    if (!ep) continue;
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = UCP_EP_CLOSE_FLAG_FORCE;
    ucs_status_ptr_t req = ucp_ep_close_nbx(ep, &p);
    const Deadline d = Deadline::afterSeconds(2);
    if (UCS_PTR_IS_PTR(req)) {
      while (ucp_request_check_status(req) == UCS_INPROGRESS && !d.expired()) ucp_worker_progress(worker_);
      ucp_request_free(req);
    }
    ep = nullptr;
  }
  if (worker_) ucp_worker_destroy(worker_);
  if (context_) ucp_cleanup(context_);
  worker_ = nullptr;
  context_ = nullptr;
}

}  // namespace

Result<std::unique_ptr<Endpoint>> create(int rank, int nranks, const Options& options) {
  auto ep = std::make_unique<UcxEndpoint>(rank, nranks, options.sameHost);
  TEMPO_TRY(ep->open(options));
  return std::unique_ptr<Endpoint>(std::move(ep));
}

}  // namespace tempo::transport::ucx
