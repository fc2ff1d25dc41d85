#include "src/comm/config.h"

#include <climits>
#include <cstddef>
#include <cstring>

#include "src/core/param.h"

namespace tempo::comm {
namespace {

constexpr int kUndef = NCCL_CONFIG_UNDEF_INT;

// Fields introduced after the 2.14 original, by the version that introduced them.
void resetNewerThan(ncclConfig_t& c, unsigned version) {
  if (version < NCCL_VERSION(2, 17, 0)) {
    c.cgaClusterSize = c.minCTAs = c.maxCTAs = kUndef;
    c.netName = NCCL_CONFIG_UNDEF_PTR;
  }
  if (version < NCCL_VERSION(2, 18, 0)) c.splitShare = kUndef;
  if (version < NCCL_VERSION(2, 25, 0)) c.trafficClass = kUndef;
  if (version < NCCL_VERSION(2, 27, 0)) {
    c.commName = NCCL_CONFIG_UNDEF_PTR;
    c.collnetEnable = c.CTAPolicy = c.shrinkShare = c.nvlsCTAs = kUndef;
  }
  if (version < NCCL_VERSION(2, 28, 0)) c.nChannelsPerNetPeer = c.nvlinkCentricSched = kUndef;
  if (version < NCCL_VERSION(2, 29, 0)) c.graphUsageMode = c.numRmaCtx = kUndef;
  if (version < NCCL_VERSION(2, 30, 0)) c.maxP2pPeers = c.graphStreamOrdering = kUndef;
}

void envOverride(int& field, int64_t env) {
  if (env != kUndef) field = int(env);
}

Status checkFlag(int v, const char* name) {
  if (v != 0 && v != 1)
    return fail(Status::InvalidArgument, "ncclConfig_t.%s is %d; it must be 0 or 1", name, v);
  return Status::Success;
}

}  // namespace

Result<Config> parseConfig(const ncclConfig_t* user) {
  Config out;
  out.raw = NCCL_CONFIG_INITIALIZER;
  if (user) {
    size_t size = user->size;
    if (size < offsetof(ncclConfig_t, blocking))
      return fail(Status::InvalidArgument,
                  "ncclConfig_t.size is %zu: the struct was not initialized with NCCL_CONFIG_INITIALIZER",
                  size);
    memcpy(&out.raw, user, size < sizeof(ncclConfig_t) ? size : sizeof(ncclConfig_t));
    if (out.raw.magic != NCCL_API_MAGIC)
      return fail(Status::InvalidArgument,
                  "ncclConfig_t magic is %#x, not %#x: the struct was not initialized with "
                  "NCCL_CONFIG_INITIALIZER",
                  out.raw.magic, NCCL_API_MAGIC);
    if (out.raw.version < NCCL_VERSION(2, 14, 0))
      return fail(Status::InvalidArgument, "ncclConfig_t version %u predates configs (2.14)", out.raw.version);
    resetNewerThan(out.raw, out.raw.version);
    // Bytes the caller's struct did not have are ours, not theirs.
    out.raw.size = sizeof(ncclConfig_t);
    out.raw.version = NCCL_VERSION_CODE;
  }
  ncclConfig_t& c = out.raw;
  envOverride(c.blocking, param::CommBlocking());
  envOverride(c.cgaClusterSize, param::CgaClusterSize());
  envOverride(c.minCTAs, param::MinCtas());
  envOverride(c.maxCTAs, param::MaxCtas());

  if (c.blocking == kUndef) c.blocking = 1;
  if (c.cgaClusterSize == kUndef) c.cgaClusterSize = 4;
  if (c.minCTAs == kUndef) c.minCTAs = 1;
  if (c.maxCTAs == kUndef) c.maxCTAs = 64;
  if (c.splitShare == kUndef) c.splitShare = 0;
  if (c.trafficClass == kUndef) c.trafficClass = 0;
  if (c.collnetEnable == kUndef) c.collnetEnable = 0;
  if (c.CTAPolicy == kUndef) c.CTAPolicy = NCCL_CTA_POLICY_DEFAULT;
  if (c.shrinkShare == kUndef) c.shrinkShare = 0;

  TEMPO_TRY(checkFlag(c.blocking, "blocking"));
  TEMPO_TRY(checkFlag(c.splitShare, "splitShare"));
  TEMPO_TRY(checkFlag(c.collnetEnable, "collnetEnable"));
  TEMPO_TRY(checkFlag(c.shrinkShare, "shrinkShare"));
  if (c.cgaClusterSize < 0 || c.cgaClusterSize > 8)
    return fail(Status::InvalidArgument, "ncclConfig_t.cgaClusterSize %d is outside [0, 8]", c.cgaClusterSize);
  if (c.minCTAs < 1 || c.maxCTAs < 1 || c.minCTAs > c.maxCTAs)
    return fail(Status::InvalidArgument, "ncclConfig_t.minCTAs %d / maxCTAs %d: need 1 <= minCTAs <= maxCTAs",
                c.minCTAs, c.maxCTAs);
  if (c.CTAPolicy < 0 || c.CTAPolicy > NCCL_CTA_POLICY_ZERO)
    return fail(Status::InvalidArgument, "ncclConfig_t.CTAPolicy %d is not a NCCL_CTA_POLICY_* value", c.CTAPolicy);

  out.blocking = c.blocking == 1;
  if (*param::NetName()) out.netName = param::NetName();
  else if (c.netName) out.netName = c.netName;
  if (c.commName) out.commName = c.commName;
  c.netName = nullptr;
  c.commName = nullptr;
  return out;
}

}  // namespace tempo::comm
