#include "transports/ofi/ofi.h"

#include <dirent.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "src/core/log.h"
#include "src/core/param.h"

namespace tempo::transport::ofi {
namespace {

constexpr uint32_t kApiVersion = FI_VERSION(1, 9);
constexpr int kRankBits = 64 - kWireTagBits;
static_assert(sizeof(fi_context2) <= sizeof(Request::internal));

template <class T>
struct FidClose {
  void operator()(T* p) const {
    if (p) fi_close(&p->fid);
  }
};
template <class T>
using FidPtr = std::unique_ptr<T, FidClose<T>>;
struct InfoFree {
  void operator()(fi_info* p) const { fi_freeinfo(p); }
};
using InfoPtr = std::unique_ptr<fi_info, InfoFree>;

Status ofiFail(const char* what, int rc) {
  return fail(Status::SystemError, "ofi: %s failed: %s (%d)", what, fi_strerror(-rc), rc);
}

// "tcp" means the RDM stack over it; any other name is passed through as given.
std::string canonicalProvider(const std::string& p) { return p == "tcp" ? "tcp;ofi_rxm" : p; }

// libfabric reads its own variables from the environment when a provider initialises;
// Tempo's defaults for them are put there first, never overriding what the user set.
void applyProviderDefaults() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (!param::isSet(param::Id::FiShmDisableCma)) setenv("FI_SHM_DISABLE_CMA", param::FiShmDisableCma(), 0);
    if (!param::isSet(param::Id::FiOfiRxmUseSrx)) setenv("FI_OFI_RXM_USE_SRX", param::FiOfiRxmUseSrx(), 0);
  });
}

// libfabric's shm provider names its region /dev/shm/<pid>:<endpoint>:<domain>. A process
// that was killed leaves its regions behind, and a later process that is given the same
// pid then fails fi_enable with EBUSY. No live process in this pid namespace can own a
// region named after our pid, so before this process opens its first shm endpoint, any such
// region is a leftover and is removed.
void removeStaleShmRegions() {
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string prefix = std::to_string(getpid()) + ":";
    DIR* dir = opendir("/dev/shm");
    if (!dir) return;
    while (dirent* e = readdir(dir)) {
      if (strncmp(e->d_name, prefix.c_str(), prefix.size()) != 0) continue;
      const std::string path = std::string("/dev/shm/") + e->d_name;
      if (unlink(path.c_str()) == 0)
        TEMPO_INFO(log::Net, "ofi: removed %s, left behind by an earlier process with this pid", path.c_str());
    }
    closedir(dir);
  });
}

InfoPtr query(const std::string& provider, int* rcOut) {
  applyProviderDefaults();
  if (canonicalProvider(provider) == "shm") removeStaleShmRegions();
  InfoPtr hints(fi_allocinfo());
  if (!hints) return nullptr;
  hints->caps = FI_TAGGED;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->ep_attr->type = FI_EP_RDM;
  hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  hints->fabric_attr->prov_name = strdup(canonicalProvider(provider).c_str());
  // Connection management progressed by our own calls, not a provider thread, where the
  // provider allows it: an abandoned endpoint (cancelAll) then has nothing running inside
  // libfabric, and nothing moves data for it.
  hints->domain_attr->control_progress = FI_PROGRESS_MANUAL;
  fi_info* info = nullptr;
  int rc = fi_getinfo(kApiVersion, nullptr, nullptr, 0, hints.get(), &info);
  if (rc == -FI_ENODATA) {
    hints->domain_attr->control_progress = FI_PROGRESS_UNSPEC;
    rc = fi_getinfo(kApiVersion, nullptr, nullptr, 0, hints.get(), &info);
  }
  if (rcOut) *rcOut = rc;
  return rc == 0 ? InfoPtr(info) : nullptr;
}

Kind kindOf(const char* prov) {
  if (!strcmp(prov, "shm")) return Kind::OfiShm;
  if (!strncmp(prov, "tcp", 3)) return Kind::OfiTcp;
  return Kind::OfiOther;
}

// Memory registered with fi_mr_reg; its descriptor goes with each transfer that names it.
class OfiRegion final : public MemRegion {
 public:
  explicit OfiRegion(fid_mr* mr) : mr_(mr) {}
  void* desc() const { return fi_mr_desc(mr_.get()); }

 private:
  FidPtr<fid_mr> mr_;
};

void* descOf(const Request* r) {
  const auto* region = dynamic_cast<const OfiRegion*>(r->region);
  return region ? region->desc() : nullptr;
}

class OfiEndpoint final : public Endpoint {
 public:
  OfiEndpoint(int rank, int nranks) : rank_(rank), dest_(size_t(nranks), FI_ADDR_NOTAVAIL) {}
  ~OfiEndpoint() override;
  Status open(const std::string& provider, const std::string& nic);

  Kind kind() const override { return kind_; }
  const char* name() const override { return provName_.c_str(); }
  std::string describePeer(int) const override { return provName_ + " domain " + info_->domain_attr->name; }
  std::span<const std::byte> address() const override { return {address_, addressLen_}; }
  Status connect(int peer, std::span<const std::byte> address) override;
  Status isend(int peer, uint64_t tag, const void* buf, size_t len, Request* req) override;
  Status irecv(int peer, uint64_t tag, void* buf, size_t len, Request* req) override;
  int progress() override;
  int maxOutstanding() const override { return maxOutstanding_; }
  void cancelAll() override;
  Result<std::unique_ptr<MemRegion>> registerMemory(void* buf, size_t len) override;

 private:
  static Request* fromContext(void* ctx) {
    return reinterpret_cast<Request*>(static_cast<char*>(ctx) - offsetof(Request, internal));
  }
  static void* context(Request* r) { return r->internal; }
  uint64_t wireTag(int fromRank, uint64_t tag) const { return (uint64_t(fromRank) << kWireTagBits) | tag; }
  // Posts; if the provider is out of resources, progresses once and retries once, then
  // reports InProgress so the engine can progress other endpoints before trying again.
  template <class Post>
  Status post(const char* what, Post&& fn);

  bool usable() const { return ep_ && !abandoned_; }

  int rank_;
  Kind kind_ = Kind::OfiOther;
  // cancelAll() on tcp: the endpoint is left open and never touched again (see there).
  bool abandoned_ = false;
  std::string provName_;
  InfoPtr info_;
  // Declaration order is teardown order reversed: the endpoint closes first.
  FidPtr<fid_fabric> fabric_;
  FidPtr<fid_domain> domain_;
  // Providers that do not choose keys themselves (no FI_MR_PROV_KEY, as tcp and shm in
  // libfabric 1.17) refuse a requested key already in use (-FI_ENOKEY): each
  // registration asks for a fresh one.
  std::atomic<uint64_t> nextMrKey_{1};
  FidPtr<fid_av> av_;
  FidPtr<fid_cq> cq_;
  FidPtr<fid_ep> ep_;
  std::vector<fi_addr_t> dest_;
  std::byte address_[kMaxAddressBytes] = {};
  size_t addressLen_ = 0;
  int maxOutstanding_ = 64;
  size_t maxMsg_ = SIZE_MAX;
};

Status OfiEndpoint::open(const std::string& provider, const std::string& nic) {
  int rc = 0;
  info_ = query(provider, &rc);
  if (!info_)
    return fail(Status::SystemError, "ofi: provider '%s' offers no tagged RDM endpoint here: %s",
                canonicalProvider(provider).c_str(), fi_strerror(-rc));
  // The provider's first offer, unless one of its domains is the NIC asked for (a tcp
  // domain is named by its interface, a verbs one by its device).
  if (!nic.empty()) {
    const fi_info* match = nullptr;
    for (const fi_info* i = info_.get(); i && !match; i = i->next)
      if (i->domain_attr && i->domain_attr->name && nic == i->domain_attr->name) match = i;
    if (match && match != info_.get()) {
      InfoPtr one(fi_dupinfo(match));
      if (!one) return fail(Status::SystemError, "ofi: fi_dupinfo failed");
      info_ = std::move(one);
    } else if (!match) {
      TEMPO_INFO(log::Net, "NET/OFI rank %d: provider %s has no domain on NIC %s; using %s", rank_,
                 info_->fabric_attr->prov_name, nic.c_str(), info_->domain_attr->name);
    }
  }
  provName_ = info_->fabric_attr->prov_name;
  kind_ = kindOf(provName_.c_str());
  maxMsg_ = info_->ep_attr->max_msg_size;
  size_t depth = std::min(info_->tx_attr->size, info_->rx_attr->size);
  maxOutstanding_ = int(std::min<size_t>(depth ? depth : 64, 256));

  fid_fabric* fabric = nullptr;
  if ((rc = fi_fabric(info_->fabric_attr, &fabric, nullptr))) return ofiFail("fi_fabric", rc);
  fabric_.reset(fabric);
  fid_domain* domain = nullptr;
  if ((rc = fi_domain(fabric_.get(), info_.get(), &domain, nullptr))) return ofiFail("fi_domain", rc);
  domain_.reset(domain);

  fi_cq_attr cqAttr{};
  cqAttr.format = FI_CQ_FORMAT_TAGGED;
  cqAttr.wait_obj = FI_WAIT_NONE;
  cqAttr.size = size_t(maxOutstanding_) * 2;
  fid_cq* cq = nullptr;
  if ((rc = fi_cq_open(domain_.get(), &cqAttr, &cq, nullptr))) return ofiFail("fi_cq_open", rc);
  cq_.reset(cq);

  fi_av_attr avAttr{};
  avAttr.type = FI_AV_TABLE;
  avAttr.count = dest_.size();
  fid_av* av = nullptr;
  if ((rc = fi_av_open(domain_.get(), &avAttr, &av, nullptr))) return ofiFail("fi_av_open", rc);
  av_.reset(av);

  fid_ep* ep = nullptr;
  if ((rc = fi_endpoint(domain_.get(), info_.get(), &ep, nullptr))) return ofiFail("fi_endpoint", rc);
  ep_.reset(ep);
  if ((rc = fi_ep_bind(ep_.get(), &cq_->fid, FI_TRANSMIT | FI_RECV))) return ofiFail("fi_ep_bind(cq)", rc);
  if ((rc = fi_ep_bind(ep_.get(), &av_->fid, 0))) return ofiFail("fi_ep_bind(av)", rc);
  if ((rc = fi_enable(ep_.get()))) return ofiFail("fi_enable", rc);

  addressLen_ = sizeof address_;
  if ((rc = fi_getname(&ep_->fid, address_, &addressLen_))) return ofiFail("fi_getname", rc);
  TEMPO_INFO(log::Init | log::Net, "NET/OFI rank %d opened provider %s domain %s", rank_, provName_.c_str(),
             info_->domain_attr->name);
  return Status::Success;
}

Status OfiEndpoint::connect(int peer, std::span<const std::byte> address) {
  if (!usable()) return fail(Status::InternalError, "ofi: connect on a closed endpoint");
  fi_addr_t addr = FI_ADDR_NOTAVAIL;
  int rc = fi_av_insert(av_.get(), address.data(), 1, &addr, 0, nullptr);
  if (rc != 1) return ofiFail("fi_av_insert", rc < 0 ? rc : -FI_EINVAL);
  dest_[size_t(peer)] = addr;
  return Status::Success;
}

template <class Post>
Status OfiEndpoint::post(const char* what, Post&& fn) {
  if (!usable()) return fail(Status::RemoteError, "ofi: %s on an aborted endpoint", what);
  for (int attempt = 0; attempt < 2; ++attempt) {
    ssize_t rc = fn();
    if (rc == 0) return Status::Success;
    if (rc != -FI_EAGAIN) return ofiFail(what, int(rc));
    progress();
  }
  return Status::InProgress;
}

Status OfiEndpoint::isend(int peer, uint64_t tag, const void* buf, size_t len, Request* req) {
  if (len > maxMsg_) return fail(Status::InvalidArgument, "ofi: message of %zu bytes exceeds %s's limit", len, name());
  return post("fi_tsend", [&] {
    return fi_tsend(ep_.get(), buf, len, descOf(req), dest_[size_t(peer)], wireTag(rank_, tag), context(req));
  });
}

Status OfiEndpoint::irecv(int peer, uint64_t tag, void* buf, size_t len, Request* req) {
  return post("fi_trecv", [&] {
    return fi_trecv(ep_.get(), buf, len, descOf(req), FI_ADDR_UNSPEC, wireTag(peer, tag), 0, context(req));
  });
}

int OfiEndpoint::progress() {
  if (!usable()) return 0;
  int completed = 0;
  fi_cq_tagged_entry entries[16];
  for (;;) {
    ssize_t n = fi_cq_read(cq_.get(), entries, 16);
    if (n > 0) {
      for (ssize_t i = 0; i < n; ++i) {
        Request* r = fromContext(entries[i].op_context);
        r->bytes = entries[i].len;
        r->done = true;
      }
      completed += int(n);
      if (n < 16) return completed;
      continue;
    }
    if (n == -FI_EAGAIN) return completed;
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      if (fi_cq_readerr(cq_.get(), &err, 0) == 1) {
        Request* r = fromContext(err.op_context);
        const char* cause = fi_cq_strerror(cq_.get(), err.prov_errno, err.err_data, nullptr, 0);
        if (err.err == FI_ETRUNC)  // (tcp;ofi_rxm leaves olen and len 0)
          r->status = fail(Status::InvalidUsage, "ofi/%s: a message longer than the receive posted for it arrived",
                           name());
        else
          r->status = fail(Status::RemoteError, "ofi/%s: operation failed: %s (%s)", name(), fi_strerror(err.err),
                           cause ? cause : "");
        r->done = true;
        ++completed;
      }
      continue;
    }
    TEMPO_WARN_RATELIMITED(1000, "ofi/%s: fi_cq_read failed: %s", name(), fi_strerror(int(-n)));
    return completed;
  }
}

Result<std::unique_ptr<MemRegion>> OfiEndpoint::registerMemory(void* buf, size_t len) {
  if (!domain_) return fail(Status::InternalError, "ofi: registration on a closed endpoint");
  fid_mr* mr = nullptr;
  const uint64_t key = nextMrKey_.fetch_add(1, std::memory_order_relaxed);
  int rc = fi_mr_reg(domain_.get(), buf, len, FI_SEND | FI_RECV, 0, key, 0, &mr, nullptr);
  if (rc) return ofiFail("fi_mr_reg", rc);
  return std::unique_ptr<MemRegion>(std::make_unique<OfiRegion>(mr));
}

// tcp;ofi_rxm (libfabric 1.17) crashed inside fi_close (a null dereference) when a peer
// had died, in about 1 of 5 runs of MultiProcessShrink, whether or not the completion queue
// was first progressed dry, and with or without a shared receive pool (FI_OFI_RXM_USE_SRX).
// So an aborted tcp endpoint is abandoned instead: never posted to or progressed again,
// which with its manual progress means no transfer touches the abandoned requests'
// buffers, and never closed, its descriptors and buffers kept until the process exits
// (what that costs: FI_OFI_RXM_USE_SRX). Other providers close it, which cancels every
// posted operation.
void OfiEndpoint::cancelAll() {
  if (kind_ == Kind::OfiTcp) abandoned_ = true;
  else ep_.reset();
}

OfiEndpoint::~OfiEndpoint() {
  if (!abandoned_) return;  // the members close in reverse order, the endpoint first
  (void)ep_.release();
  (void)cq_.release();
  (void)av_.release();
  (void)domain_.release();
  (void)fabric_.release();
}

}  // namespace

Result<std::unique_ptr<Endpoint>> create(const std::string& provider, int rank, int nranks, const std::string& nic) {
  auto ep = std::make_unique<OfiEndpoint>(rank, nranks);
  TEMPO_TRY(ep->open(provider, nic));
  return std::unique_ptr<Endpoint>(std::move(ep));
}

bool available(const std::string& provider) { return query(provider, nullptr) != nullptr; }

}  // namespace tempo::transport::ofi
