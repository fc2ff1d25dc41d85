#include "src/pacing/diagnose.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <random>
#include <tuple>

#include "src/pacing/clock.h"
#include "src/pacing/iteration.h"

namespace tempo::pacing {
namespace {

// Point-to-point and one-sided records carry the next collective's seq, and no rank
// outside the pair takes part: they are no collectives to match across ranks.
bool collective(const std::string& c) { return c != "SendRecv" && c != "PutSignal" && c != "WaitSignal"; }

bool symmetric(const std::string& c) {
  return c == "AllReduce" || c == "AllGather" || c == "ReduceScatter" || c == "AllToAll";
}

uint8_t collCode(const std::string& c) {
  static const char* names[] = {"AllReduce", "Broadcast", "Reduce", "AllGather", "ReduceScatter",
                                "AllToAll",  "AllToAllv", "Gather", "Scatter",   "SendRecv"};
  for (uint8_t i = 0; i < 10; ++i)
    if (c == names[i]) return i;
  return 255;
}

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::clamp<size_t>(size_t(std::ceil(q * double(v.size()))), 1, v.size()) - 1];
}

double meanOf(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / double(v.size());
}

// A robust coefficient of variation: the interquartile range over the median, scaled so
// that it equals the CoV for a normal distribution (IQR = 1.349 sigma); tails from an
// occasional descheduled rank do not dominate it.
double robustCov(const std::vector<double>& v) {
  if (v.size() < 4) return 0;
  const double med = quantile(v, 0.5);
  return med > 0 ? (quantile(v, 0.75) - quantile(v, 0.25)) / 1.349 / med : 0;
}

double covOf(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = meanOf(v);
  double var = 0;
  for (double x : v) var += (x - m) * (x - m);
  return m > 0 ? std::sqrt(var / double(v.size() - 1)) / m : 0;
}

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return buf;
}

}  // namespace

const char* failureModeName(FailureMode m) {
  switch (m) {
    case FailureMode::Healthy: return "healthy";
    case FailureMode::SyncAmplification: return "synchronization amplification";
    case FailureMode::FabricContention: return "fabric contention";
    case FailureMode::LocalityVariance: return "locality variance";
  }
  return "?";
}

Diagnosis diagnose(std::vector<RankTrace> ranks) {
  Diagnosis d;
  std::sort(ranks.begin(), ranks.end(), [](const RankTrace& a, const RankTrace& b) { return a.rank < b.rank; });
  const size_t N = ranks.size();
  d.nranks = int(N);
  if (N == 0) return d;
  // Each rank's collectives by seq (point-to-point and one-sided records carry the next
  // collective's seq and are left out).
  std::vector<std::map<uint64_t, const TraceRecord*>> bySeq(N);
  for (size_t r = 0; r < N; ++r)
    for (const TraceRecord& t : ranks[r].records)
      if (collective(t.coll)) bySeq[r][t.seq] = &t;
  const std::vector<TraceRecord>& base = ranks[0].records;
  d.collectives = bySeq[0].size();

  // Iterations: the period of rank 0's pattern, the phase after the longest compute
  // gap, and the time between successive starts.
  std::vector<const TraceRecord*> own;
  for (const TraceRecord& t : base)
    if (collective(t.coll)) own.push_back(&t);
  // The period: the most common one found in consecutive slices of the trace (its ends,
  // warm-up and shutdown, may not repeat).
  std::map<uint32_t, int> periods;
  const size_t slice = 128;
  for (size_t from = 0; from < own.size(); from += slice / 4) {
    IterationTracker tracker;
    for (size_t i = from; i < std::min(own.size(), from + slice); ++i)
      tracker.push(signatureOf(collCode(own[i]->coll), own[i]->bytes), own[i]->arrival, own[i]->exit);
    tracker.update();
    if (uint32_t p = tracker.summary().period) ++periods[p];
    if (from + slice >= own.size()) break;
  }
  for (const auto& [p, n] : periods)
    if (d.period == 0 || n > periods[d.period]) d.period = p;
  // The application knows better (equal buckets after equal compute slices repeat every
  // bucket): its declared period wins.
  if (ranks[0].periodHint) d.period = ranks[0].periodHint;
  std::vector<size_t> starts;  // indices into `own`
  if (d.period > 0 && own.size() > d.period) {
    std::vector<double> gap(d.period, 0);
    for (size_t i = 1; i < own.size(); ++i) gap[i % d.period] += double(own[i]->arrival - own[i - 1]->exit);
    const size_t phase = size_t(std::max_element(gap.begin(), gap.end()) - gap.begin());
    for (size_t i = phase; i < own.size(); i += d.period) starts.push_back(i);
    for (size_t k = 1; k < starts.size(); ++k)
      d.iterationUs.push_back(double(own[starts[k]]->arrival - own[starts[k - 1]]->arrival) / 1e3);
  }
  d.iterMeanUs = meanOf(d.iterationUs);
  d.iterCoV = covOf(d.iterationUs);
  d.iterP50Us = quantile(d.iterationUs, 0.5);
  d.iterP99Us = quantile(d.iterationUs, 0.99);

  // Per symmetric collective: durations on every rank, transfer, skew, last arriver.
  struct Measured {
    uint64_t seq;
    double transfer, skew;
    int last;
    std::vector<double> lead;
    bool iterationStart;
  };
  std::vector<Measured> all;
  std::vector<bool> isStart(own.size(), false);
  for (size_t s : starts) isStart[s] = true;
  std::map<std::pair<std::string, uint64_t>, std::vector<double>> transferBySize;
  for (size_t i = 0; i < own.size(); ++i) {
    const TraceRecord& t0 = *own[i];
    if (!symmetric(t0.coll) || t0.status != 0) continue;
    std::vector<double> dur(N);
    bool complete = true;
    for (size_t r = 0; r < N && complete; ++r) {
      auto it = bySeq[r].find(t0.seq);
      complete = it != bySeq[r].end() && it->second->status == 0;
      if (complete) dur[r] = double(it->second->exit - it->second->arrival) / 1e3;
    }
    if (!complete) continue;
    Measured m{t0.seq, 0, 0, 0, std::vector<double>(N), isStart[i]};
    const size_t last = size_t(std::min_element(dur.begin(), dur.end()) - dur.begin());
    m.transfer = dur[last];
    m.skew = *std::max_element(dur.begin(), dur.end()) - m.transfer;
    m.last = int(last);
    for (size_t r = 0; r < N; ++r) m.lead[r] = dur[r] - m.transfer;
    transferBySize[{t0.coll, t0.bytes}].push_back(m.transfer);
    all.push_back(std::move(m));
  }
  d.measured = all.size();
  for (const Measured& m : all) {
    d.skewUs.push_back(m.skew);
    d.transferUs.push_back(m.transfer);
  }
  d.skewP50Us = quantile(d.skewUs, 0.5);
  d.skewP99Us = quantile(d.skewUs, 0.99);
  d.transferP50Us = quantile(d.transferUs, 0.5);
  d.transferP99Us = quantile(d.transferUs, 0.99);

  // Clock drift: per rank, rank 0's exit minus its own over the measured collectives.
  d.driftPpm.assign(N, 0);
  d.driftErrorPpm.assign(N, 0);
  d.driftScatterUs.assign(N, 0);
  if (N > 1 && all.size() >= kDriftMinSamples) {
    d.driftKnown = true;
    d.driftSpanS = double(bySeq[0].at(all.back().seq)->exit - bySeq[0].at(all.front().seq)->exit) / 1e9;
    DriftScratch scratch;
    for (size_t r = 1; r < N; ++r) {
      std::vector<double> ts, os;
      for (const Measured& m : all) {
        const int64_t mine = bySeq[r].at(m.seq)->exit, zero = bySeq[0].at(m.seq)->exit;
        ts.push_back(double(mine));
        os.push_back(double(zero - mine));
      }
      const DriftFit f = fitDrift(ts, os, scratch);
      d.driftScatterUs[r] = f.scatterUs;
      d.driftPpm[r] = f.ppm;
      d.driftErrorPpm[r] = f.errorPpm;
    }
  }

  // Asymmetric collectives: arrival spread on rank 0's clock.
  d.clocksAligned = true;
  for (const RankTrace& r : ranks) d.clocksAligned &= r.clockKnown;
  for (const TraceRecord* t0 : own) {
    if (symmetric(t0->coll) || t0->status != 0) continue;
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    bool complete = true;
    for (size_t r = 0; r < N && complete; ++r) {
      auto it = bySeq[r].find(t0->seq);
      complete = it != bySeq[r].end() && it->second->status == 0 && it->second->coll == t0->coll;
      if (!complete) break;
      const int64_t a = onRankZeroClock(ranks[r], d, it->second->arrival);
      lo = std::min(lo, a);
      hi = std::max(hi, a);
    }
    if (!complete) continue;
    ++d.asymmetric;
    if (d.clocksAligned) d.asymSkewUs.push_back(double(hi - lo) / 1e3);
  }
  d.asymSkewP50Us = quantile(d.asymSkewUs, 0.5);
  d.asymSkewP99Us = quantile(d.asymSkewUs, 0.99);

  // F3: transfer-time inflation and variability, per (collective, size), weighted by count.
  double inflation = 0, cov = 0, weight = 0;
  for (auto& [key, v] : transferBySize) {
    if (v.size() < 8) continue;
    const double best = quantile(v, 0.05);
    inflation += double(v.size()) * (best > 0 ? quantile(v, 0.5) / best : 1);
    cov += double(v.size()) * robustCov(v);
    weight += double(v.size());
  }
  d.transferInflation = weight > 0 ? inflation / weight : 1;
  d.transferCoV = weight > 0 ? cov / weight : 0;

  // Lateness is judged where compute happens: at each iteration's first collective when
  // the pattern is known (later ones in an iteration are ordered by the algorithm's own
  // exits), else at every collective.
  std::vector<const Measured*> judged;
  for (const Measured& m : all)
    if (m.iterationStart || starts.size() < 8) judged.push_back(&m);
  std::vector<double> jskew, jtransfer;
  d.lastShare.assign(N, 0);
  d.meanLeadUs.assign(N, 0);
  for (const Measured* m : judged) {
    jskew.push_back(m->skew);
    jtransfer.push_back(m->transfer);
    d.lastShare[size_t(m->last)] += 1;
    for (size_t r = 0; r < N; ++r) d.meanLeadUs[r] += m->lead[r];
  }
  for (size_t r = 0; r < N && !judged.empty(); ++r) {
    d.lastShare[r] /= double(judged.size());
    d.meanLeadUs[r] /= double(judged.size());
  }
  const double jt = quantile(jtransfer, 0.5);
  d.rho = jt > 0 ? quantile(jskew, 0.5) / jt : 0;
  d.topLast = int(std::max_element(d.lastShare.begin(), d.lastShare.end()) - d.lastShare.begin());
  d.topLastShare = d.lastShare[size_t(d.topLast)];
  for (double p : d.lastShare)
    if (p > 0) d.lastEntropy -= p * std::log(p);
  if (N > 1) d.lastEntropy /= std::log(double(N));
  // Windows of 32 judged collectives: how often the same rank tops them.
  size_t windows = 0, same = 0;
  for (size_t w = 0; w + 32 <= judged.size(); w += 32, ++windows) {
    std::vector<int> count(N, 0);
    for (size_t k = w; k < w + 32; ++k) ++count[size_t(judged[k]->last)];
    same += int(std::max_element(count.begin(), count.end()) - count.begin()) == d.topLast;
  }
  d.topStability = windows ? double(same) / double(windows) : 0;

  // F8: each rank's median compute gap (arrival - previous exit) before the judged
  // collectives, against all ranks'.
  std::map<uint64_t, bool> judgedSeq;
  for (const Measured* m : judged) judgedSeq[m->seq] = true;
  std::vector<double> medians(N, 0);
  for (size_t r = 0; r < N; ++r) {
    std::vector<double> gaps;
    const auto& recs = ranks[r].records;
    for (size_t k = 1; k < recs.size(); ++k)
      if (judgedSeq.count(recs[k].seq) && collective(recs[k].coll))
        gaps.push_back(double(std::max<int64_t>(0, recs[k].arrival - recs[k - 1].exit)));
    medians[r] = quantile(gaps, 0.5);
  }
  const double typical = quantile(medians, 0.5);
  d.gapExcess.assign(N, 1);
  for (size_t r = 0; r < N; ++r) d.gapExcess[r] = typical > 0 ? medians[r] / typical : 1;

  // F4: arrival spread within random subsets of n ranks, against sqrt(2 ln n).
  if (N >= 4 && !judged.empty()) {
    std::vector<int> sizes;
    for (size_t n = 2; n < N; n = n < 4 ? n + 1 : 2 * n) sizes.push_back(int(n));  // 2, 3, 4, 8, ...
    sizes.push_back(int(N));
    std::mt19937_64 rng(1);  // deterministic: the same traces give the same report
    std::vector<size_t> order(N);
    for (int n : sizes) {
      double sum = 0;
      size_t count = 0;
      for (const Measured* m : judged)
        for (int draw = 0; draw < (size_t(n) == N ? 1 : 8); ++draw) {
          for (size_t i = 0; i < N; ++i) order[i] = i;
          // A partial Fisher-Yates shuffle picks the subset.
          double lo = 1e300, hi = -1e300;
          for (size_t i = 0; i < size_t(n); ++i) {
            std::swap(order[i], order[i + rng() % (N - i)]);
            lo = std::min(lo, m->lead[order[i]]);
            hi = std::max(hi, m->lead[order[i]]);
          }
          sum += hi - lo;
          ++count;
        }
      d.skewBySize.emplace_back(n, sum / double(count));
    }
    // Least squares on x = sqrt(2 ln n).
    double sx = 0, sy = 0, sxx = 0, sxy = 0, syy = 0;
    const double k = double(d.skewBySize.size());
    for (const auto& [n, y] : d.skewBySize) {
      const double x = std::sqrt(2 * std::log(double(n)));
      sx += x, sy += y, sxx += x * x, sxy += x * y, syy += y * y;
    }
    const double vx = sxx - sx * sx / k, vy = syy - sy * sy / k, cxy = sxy - sx * sy / k;
    if (vx > 0) {
      d.growthSlopeUs = cxy / vx;
      d.growthInterceptUs = (sy - d.growthSlopeUs * sx) / k;
      d.growthR2 = vy > 0 ? cxy * cxy / (vx * vy) : 1;
      auto at = [&](double n) { return d.growthInterceptUs + d.growthSlopeUs * std::sqrt(2 * std::log(n)); };
      d.skewAt2NUs = at(2.0 * double(N));
      d.skewAt4NUs = at(4.0 * double(N));
    }
  }

  // Heat map: each rank's lead at each iteration's first collective.
  for (const Measured* m : judged) d.leadByIteration.push_back(m->lead);

  // F5: per tier, the rate each rank's peers of that tier delivered at in each collective,
  // against the best seen for the same (collective, size).
  for (size_t t = 0; t < kTiers; ++t) {
    std::map<std::pair<std::string, uint64_t>, std::vector<double>> nsPerByte;
    for (const RankTrace& rt : ranks)
      for (const TraceRecord& rec : rt.records) {
        const Flow& f = rec.flows[t];
        if (rec.status == 0 && f.msgs >= 2 && f.paced > 0 && f.last > f.first)
          nsPerByte[{rec.coll, rec.bytes}].push_back(double(f.last - f.first) / double(f.paced));
      }
    std::vector<double> pooled, slowdown;
    for (const auto& [key, v] : nsPerByte) {
      pooled.insert(pooled.end(), v.begin(), v.end());
      if (v.size() < 8) continue;
      const double best = quantile(v, 0.05);
      for (double x : v) slowdown.push_back(x / best);
    }
    if (pooled.empty()) continue;
    TierPace p;
    p.tier = kTierNames[t];
    p.samples = pooled.size();
    p.p50MBps = 1e3 / quantile(pooled, 0.5);
    if (!slowdown.empty()) {
      p.slowdownP50 = quantile(slowdown, 0.5);
      p.slowdownP99 = quantile(slowdown, 0.99);
    }
    d.tiers.push_back(p);
  }

  // F5 per link: each sample's time per byte against the median of its tier's links in
  // the same (collective, size), so that links are compared with what their own tier does.
  {
    struct Sample {
      int from, to;
      Tier tier;
      double nsPerByte;
    };
    std::map<std::tuple<std::string, uint64_t, Tier>, std::vector<Sample>> groups;
    for (const RankTrace& rt : ranks)
      for (const TraceRecord& rec : rt.records)
        for (const PeerFlow& p : rec.peers) {
          const Flow& f = p.flow;
          if (rec.status == 0 && f.msgs >= 2 && f.paced > 0 && f.last > f.first)
            groups[{rec.coll, rec.bytes, p.tier}].push_back(
                {p.peer, rt.rank, p.tier, double(f.last - f.first) / double(f.paced)});
        }
    std::map<std::pair<int, int>, std::vector<double>> slowdowns, rates;
    std::map<std::pair<int, int>, Tier> tierOf;
    for (const auto& [key, samples] : groups) {
      std::vector<double> v;
      for (const Sample& x : samples) v.push_back(x.nsPerByte);
      const double typical = quantile(v, 0.5);
      for (const Sample& x : samples) {
        slowdowns[{x.from, x.to}].push_back(x.nsPerByte / typical);
        rates[{x.from, x.to}].push_back(x.nsPerByte);
        tierOf[{x.from, x.to}] = x.tier;
      }
    }
    for (const auto& [link, v] : slowdowns) {
      if (v.size() < 8) continue;
      LinkPace l;
      l.from = link.first;
      l.to = link.second;
      l.tier = tierName(tierOf[link]);
      l.samples = v.size();
      l.slowdown = quantile(v, 0.5);
      l.p50MBps = 1e3 / quantile(rates[link], 0.5);
      d.links.push_back(l);
    }
    std::sort(d.links.begin(), d.links.end(),
              [](const LinkPace& a, const LinkPace& b) { return a.slowdown > b.slowdown; });
  }

  // Classification (v0 thresholds of pacing.md 1.8).
  const double fair = 1.0 / double(N);
  const double lastThreshold = std::min(3 * fair, 0.75);
  const bool locality = N > 1 && d.topLastShare > lastThreshold && d.topStability >= 0.75 &&
                        d.gapExcess[size_t(d.topLast)] > 1.05;
  const bool fabric = d.transferInflation > 1.3 || d.transferCoV > 0.2;
  const bool sync = d.rho > 0.5 && d.lastEntropy > 0.8 && d.transferInflation < 1.2;
  const std::string host = ranks[size_t(d.topLast)].host;
  d.evidence.push_back(format("relative skew %.2f (skew p50 %.0f us over transfer p50 %.0f us)", d.rho,
                              quantile(jskew, 0.5), jt));
  d.evidence.push_back(format("rank %d (%s) was last in %.0f%% of the %s (fair share %.0f%%); top in %.0f%% of windows; "
                              "last-arriver entropy %.2f",
                              d.topLast, host.c_str(), 100 * d.topLastShare,
                              starts.size() >= 8 ? "iterations' first collectives" : "collectives", 100 * fair,
                              100 * d.topStability, d.lastEntropy));
  d.evidence.push_back(format("its compute gap is %.2fx the ranks' median", d.gapExcess[size_t(d.topLast)]));
  d.evidence.push_back(format("transfer time p50 / best %.2f, CoV %.2f", d.transferInflation, d.transferCoV));
  d.mode = locality ? FailureMode::LocalityVariance
           : fabric ? FailureMode::FabricContention
           : sync   ? FailureMode::SyncAmplification
                    : FailureMode::Healthy;
  if (!d.skewBySize.empty()) {
    std::string bySize;
    for (const auto& [n, y] : d.skewBySize) bySize += format("%s%d: %.0f", bySize.empty() ? "" : ", ", n, y);
    d.evidence.push_back(format("skew by group size (us) %s; against sqrt(2 ln n): slope %.0f us, R^2 %.2f, so about "
                                "%.0f us at %d ranks and %.0f us at %d if the noise stays the same%s",
                                bySize.c_str(), d.growthSlopeUs, d.growthR2, d.skewAt2NUs, 2 * d.nranks, d.skewAt4NUs,
                                4 * d.nranks,
                                d.mode == FailureMode::LocalityVariance
                                    ? " (a persistent straggler's lead does not follow that law)"
                                    : ""));
  }
  if (!d.tiers.empty()) {
    std::string rates;
    const TierPace* slowest = &d.tiers[0];
    for (const TierPace& p : d.tiers) {
      rates += format("%s%s %.0f MB/s, %.2fx/%.2fx", rates.empty() ? "" : "; ", p.tier, p.p50MBps, p.slowdownP50,
                      p.slowdownP99);
      if (p.slowdownP50 > slowest->slowdownP50) slowest = &p;
    }
    d.evidence.push_back("data from peers by tier (p50 rate; slowdown p50/p99 against its best): " + rates);
    // Place contention on a tier when one stands out from the others.
    double others = 0;
    for (const TierPace& p : d.tiers)
      if (&p != slowest) others = std::max(others, p.slowdownP50);
    if (d.mode == FailureMode::FabricContention && d.tiers.size() > 1 && slowest->slowdownP50 > 1.3 &&
        slowest->slowdownP50 > 1.25 * others)
      d.evidence.push_back(format("the %s tier's peers deliver %.2fx slower than their best, the other tiers' at most "
                                  "%.2fx: the slowdown is on that tier",
                                  slowest->tier, slowest->slowdownP50, others));
  }
  // A link at least twice as slow as its tier's typical one: a bad cable, a NIC or a
  // PCIe path, which tier averages hide.
  std::string slow;
  size_t nslow = 0;
  for (const LinkPace& l : d.links) {
    if (l.slowdown < 2) break;
    if (nslow++ < 3)
      slow += format("%srank %d -> rank %d (%s) %.1fx, %.0f MB/s over %zu collectives", slow.empty() ? "" : "; ", l.from,
                     l.to, l.tier, l.slowdown, l.p50MBps, l.samples);
  }
  if (nslow)
    d.evidence.push_back(format("%zu link%s deliver%s at least 2x slower than the typical link of %s tier in the same "
                                "collectives: %s%s",
                                nslow, nslow > 1 ? "s" : "", nslow > 1 ? "" : "s", nslow > 1 ? "their" : "its",
                                slow.c_str(), nslow > 3 ? "; ..." : ""));
  return d;
}

int64_t onRankZeroClock(const RankTrace& r, const Diagnosis& d, int64_t t) {
  if (!d.clocksAligned) return t;
  const int64_t anchor = r.records.empty() ? t : r.records.front().arrival;
  return t + r.clockOffsetNs + int64_t(d.resolvedDriftPpm(size_t(r.rank)) * 1e-6 * double(t - anchor));
}

}  // namespace tempo::pacing
