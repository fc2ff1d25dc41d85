#include "transports/ucx/ucx.h"

#include <ucp/api/ucp.h>

#include <cstring>
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

class UcxEndpoint final : public Endpoint {
 public:
  UcxEndpoint(int rank, int nranks) : rank_(rank), eps_(size_t(nranks), nullptr), peerFailed_(size_t(nranks)) {}
  ~UcxEndpoint() override { close(); }
  Status open(const std::string& tls);

  // Ranked with the other network transports until communicators select UCX and the
  // tuner learns its own costs.
  Kind kind() const override { return Kind::OfiOther; }
  const char* name() const override { return name_.c_str(); }
  std::span<const std::byte> address() const override { return {address_.data(), address_.size()}; }
  Status connect(int peer, std::span<const std::byte> address) override;
  Status isend(int peer, uint64_t tag, const void* buf, size_t len, Request* req) override;
  Status irecv(int peer, uint64_t tag, void* buf, size_t len, Request* req) override;
  int progress() override;
  int maxOutstanding() const override { return 1024; }
  void cancelAll() override;

 private:
  static void sent(void* handle, ucs_status_t s, void* user);
  static void received(void* handle, ucs_status_t s, const ucp_tag_recv_info_t* info, void* user);
  static void peerError(void* arg, ucp_ep_h ep, ucs_status_t s);
  void finish(Request* r, ucs_status_t s, size_t bytes);
  Status track(Request* r, ucs_status_ptr_t p, int peer, const char* what);
  uint64_t wireTag(int fromRank, uint64_t tag) const { return (uint64_t(fromRank) << kTagBits) | tag; }
  void close();

  int rank_;
  std::string name_ = "ucx";
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  std::vector<ucp_ep_h> eps_;
  std::vector<ucs_status_t> peerFailed_;
  std::vector<std::byte> address_;
  std::vector<Request*> outstanding_;  // posted and not yet completed
  std::vector<Request*> finished_;     // completed, to be marked done by progress()
  bool closed_ = false;
};

Status UcxEndpoint::open(const std::string& tls) {
  ucp_config_t* config = nullptr;
  ucs_status_t s = ucp_config_read(nullptr, nullptr, &config);
  if (s != UCS_OK) return ucxFail("ucp_config_read", s);
  if (!tls.empty()) ucp_config_modify(config, "TLS", tls.c_str());
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG;
  s = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  if (s != UCS_OK) return ucxFail("ucp_init", s);
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;  // one thread at a time drives an Endpoint
  if ((s = ucp_worker_create(context_, &wp, &worker_)) != UCS_OK) return ucxFail("ucp_worker_create", s);
  ucp_address_t* addr = nullptr;
  size_t len = 0;
  if ((s = ucp_worker_get_address(worker_, &addr, &len)) != UCS_OK) return ucxFail("ucp_worker_get_address", s);
  address_.assign(reinterpret_cast<const std::byte*>(addr), reinterpret_cast<const std::byte*>(addr) + len);
  ucp_worker_release_address(worker_, addr);
  if (!tls.empty()) name_ = "ucx/" + tls;
  TEMPO_INFO(log::Init | log::Net, "NET/UCX rank %d opened a worker (%zu-byte address%s%s)", rank_, len,
             tls.empty() ? "" : ", UCX_TLS ", tls.c_str());
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
  ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                  UCP_EP_PARAM_FIELD_ERR_HANDLER;
  ep.address = reinterpret_cast<const ucp_address_t*>(address.data());
  ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;  // a dead peer fails its requests
  ep.err_handler.cb = peerError;
  ep.err_handler.arg = this;
  ucs_status_t s = ucp_ep_create(worker_, &ep, &eps_[size_t(peer)]);
  if (s == UCS_ERR_UNREACHABLE) {
    // UCX 1.13's shared-memory transports (posix, sysv) offer no peer failure handling:
    // without it, a dead peer is found by the communicator's own liveness checks.
    ep.field_mask &= ~uint64_t(UCP_EP_PARAM_FIELD_ERR_HANDLER);
    ep.err_mode = UCP_ERR_HANDLING_MODE_NONE;
    s = ucp_ep_create(worker_, &ep, &eps_[size_t(peer)]);
    if (s == UCS_OK)
      TEMPO_INFO(log::Net, "NET/UCX rank %d -> %d: the transports UCX chose have no peer failure handling", rank_,
                 peer);
  }
  if (s != UCS_OK) return ucxFail("ucp_ep_create", s);
  return Status::Success;
}

void UcxEndpoint::finish(Request* r, ucs_status_t s, size_t bytes) {
  state(r).handle = nullptr;
  state(r).completed = true;
  r->bytes = bytes;
  if (s == UCS_OK) {
    r->status = Status::Success;
  } else if (s == UCS_ERR_MESSAGE_TRUNCATED) {
    r->status = fail(Status::InvalidUsage, "ucx: a message from rank %d is longer than the receive (%zu bytes)",
                     state(r).peer, bytes);
  } else if (peerFailed_[size_t(state(r).peer)] != UCS_OK) {
    r->status = fail(Status::RemoteError, "ucx: rank %d failed: %s", state(r).peer,
                     ucs_status_string(peerFailed_[size_t(state(r).peer)]));
  } else {
    r->status = ucxFail("transfer", s);
  }
  finished_.push_back(r);
}

void UcxEndpoint::sent(void* handle, ucs_status_t s, void* user) {
  auto* r = static_cast<Request*>(user);
  state(r).owner->finish(r, s, 0);
  ucp_request_free(handle);
}

void UcxEndpoint::received(void* handle, ucs_status_t s, const ucp_tag_recv_info_t* info, void* user) {
  auto* r = static_cast<Request*>(user);
  state(r).owner->finish(r, s, s == UCS_OK && info ? info->length : 0);
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

Status UcxEndpoint::isend(int peer, uint64_t tag, const void* buf, size_t len, Request* req) {
  if (closed_) return fail(Status::RemoteError, "ucx: send on an aborted endpoint");
  if (peer < 0 || size_t(peer) >= eps_.size() || !eps_[size_t(peer)])
    return fail(Status::InvalidArgument, "ucx: send to peer %d, which is not connected", peer);
  if (peerFailed_[size_t(peer)] != UCS_OK) return ucxFail("send to a failed peer", peerFailed_[size_t(peer)]);
  state(req) = ReqState{nullptr, this, peer, false, false};
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  p.cb.send = sent;
  p.user_data = req;
  return track(req, ucp_tag_send_nbx(eps_[size_t(peer)], buf, len, wireTag(rank_, tag), &p), peer, "send");
}

Status UcxEndpoint::irecv(int peer, uint64_t tag, void* buf, size_t len, Request* req) {
  if (closed_) return fail(Status::RemoteError, "ucx: receive on an aborted endpoint");
  if (peer < 0 || size_t(peer) >= eps_.size() || !eps_[size_t(peer)])
    return fail(Status::InvalidArgument, "ucx: receive from peer %d, which is not connected", peer);
  state(req) = ReqState{nullptr, this, peer, false, false};
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  p.cb.recv = received;
  p.user_data = req;
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

Result<std::unique_ptr<Endpoint>> create(int rank, int nranks, const std::string& tls) {
  auto ep = std::make_unique<UcxEndpoint>(rank, nranks);
  TEMPO_TRY(ep->open(tls));
  return std::unique_ptr<Endpoint>(std::move(ep));
}

}  // namespace tempo::transport::ucx
