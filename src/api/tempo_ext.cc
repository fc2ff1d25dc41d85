// include/tempo/tempo.h: Tempo's own entry points (skew statistics and pacing control).
// Plain strong exports: RCCL has no such calls, so there is nothing to interpose.
#include <algorithm>

#include "src/api/checks.h"
#include "src/api/entry.h"
#include "src/comm/registry.h"
#include "tempo/tempo.h"

namespace {

namespace comm = tempo::comm;
namespace pacing = tempo::pacing;
using tempo::Status;
using tempo::api::guarded;

// The communicator's skew monitor; any thread, collectives in flight or not.
tempo::Result<pacing::SkewMonitor*> monitorOf(ncclComm_t handle, const char* fn, comm::Pin* pin) {
  TEMPO_ASSIGN(*pin, tempo::api::anyComm(handle, fn));
  pacing::SkewMonitor* m = (*pin)->skewMonitor();
  if (!m)
    return tempo::fail(Status::InvalidUsage,
                       "%s: comm %p has no skew telemetry (TEMPO_PACING=off, a single rank, or not initialised yet)",
                       fn, static_cast<void*>(handle));
  return m;
}

double us(double ns) { return ns / 1000.0; }

}  // namespace

extern "C" __attribute__((visibility("default"))) ncclResult_t tempoCommGetSkewStats(ncclComm_t handle,
                                                                                    tempoSkewStats_t* out,
                                                                                    float* rankLeadUs) {
  return guarded([&]() -> Status {
    comm::Pin pin;
    TEMPO_ASSIGN(pacing::SkewMonitor * m, monitorOf(handle, "tempoCommGetSkewStats", &pin));
    if (!out) return tempo::fail(Status::InvalidArgument, "tempoCommGetSkewStats: stats is NULL");
    const pacing::SkewSnapshot s = m->snapshot();
    tempoSkewStats_t t{};
    t.nranks = pin->nranks();
    t.mode = tempoPacingMode_t(s.mode);
    t.collectives = s.collectives;
    t.windows = s.windows;
    t.measured = s.measured;
    t.window = s.window;
    t.skewP50Us = us(double(s.skewP50));
    t.skewP99Us = us(double(s.skewP99));
    t.transferP50Us = us(double(s.commP50));
    t.transferP99Us = us(double(s.commP99));
    t.relativeSkew = s.rho;
    t.iterationPeriod = int(s.iteration.period);
    t.iterations = int(s.iteration.samples);
    t.iterationMeanUs = us(s.iteration.meanNs);
    t.iterationCoV = s.iteration.cov;
    t.iterationP50Us = us(s.iteration.p50Ns);
    t.iterationP99Us = us(s.iteration.p99Ns);
    t.lastArriverEntropy = s.lastEntropy;
    t.topLastArriver = s.topLast;
    t.topLastArriverShare = s.topLastShare;
    t.state = tempoControllerState_t(s.decision.state);
    t.gain = s.decision.kappa;
    t.probing = s.decision.probe;
    t.wouldPace = s.decision.wouldPace;
    t.delayCapUs = us(double(s.decision.capNs));
    t.delayUs = us(double(s.delayNs));
    t.delayTotalUs = us(double(s.delayTotalNs));
    t.pacedCollectives = s.pacedCollectives;
    *out = t;
    if (rankLeadUs)
      for (int r = 0; r < t.nranks; ++r)
        rankLeadUs[r] = size_t(r) < s.rankLeadNs.size() ? float(us(s.rankLeadNs[size_t(r)])) : 0.0f;
    return Status::Success;
  });
}

extern "C" __attribute__((visibility("default"))) ncclResult_t tempoCommSetPacing(ncclComm_t handle,
                                                                                 tempoPacingMode_t mode) {
  return guarded([&]() -> Status {
    if (mode != tempoPacingOff && mode != tempoPacingObserve && mode != tempoPacingOn)
      return tempo::fail(Status::InvalidArgument, "tempoCommSetPacing: mode %d is none of off (0), observe (1), on (2)",
                         int(mode));
    comm::Pin pin;
    TEMPO_ASSIGN(pacing::SkewMonitor * m, monitorOf(handle, "tempoCommSetPacing", &pin));
    m->setMode(pacing::Mode(mode));
    return Status::Success;
  });
}

extern "C" __attribute__((visibility("default"))) ncclResult_t tempoCommSetIterationPeriod(ncclComm_t handle,
                                                                                          int collectives) {
  return guarded([&]() -> Status {
    if (collectives < 0)
      return tempo::fail(Status::InvalidArgument, "tempoCommSetIterationPeriod: %d collectives per iteration",
                         collectives);
    comm::Pin pin;
    TEMPO_TRY(monitorOf(handle, "tempoCommSetIterationPeriod", &pin).status());
    pin->setIterationPeriod(uint32_t(collectives));
    return Status::Success;
  });
}
