#include "src/pacing/clock.h"

#include <algorithm>
#include <climits>
#include <cmath>

namespace tempo::pacing {

ClockOffset estimateOffset(std::span<const ClockProbe> probes) {
  ClockOffset o;
  int64_t lo = INT64_MIN, hi = INT64_MAX;
  for (const ClockProbe& p : probes) {
    if (p.t4 < p.t1 || p.t3 < p.t2) return o;  // a clock went backwards: not a probe
    lo = std::max(lo, p.t3 - p.t4);
    hi = std::min(hi, p.t2 - p.t1);
  }
  if (probes.empty() || lo > hi) return o;
  o.valid = true;
  o.offsetNs = lo + (hi - lo) / 2;
  o.errorNs = hi - o.offsetNs;  // >= o.offsetNs - lo
  o.probes = uint32_t(probes.size());
  return o;
}

namespace {
// The nearest-rank median (the ceil(n/2)-th smallest), as tempo-diagnose's quantiles.
double medianInPlace(std::vector<double>& v, size_t from, size_t to) {
  auto mid = v.begin() + ptrdiff_t(from + (to - from + 1) / 2 - 1);
  std::nth_element(v.begin() + ptrdiff_t(from), mid, v.begin() + ptrdiff_t(to));
  return *mid;
}
}  // namespace

DriftFit fitDrift(std::span<const double> t, std::span<const double> o, DriftScratch& s) {
  DriftFit f;
  const size_t n = std::min(t.size(), o.size());
  if (n < kDriftMinSamples) return f;
  f.known = true;
  f.spanS = (t[n - 1] - t[0]) / 1e9;
  // Slice medians of time and offset.
  constexpr size_t kSlices = 8;
  const size_t per = n / kSlices;
  s.sliceT.assign(kSlices, 0);
  s.sliceO.assign(kSlices, 0);
  for (size_t k = 0; k < kSlices; ++k) {
    s.slice.assign(t.begin() + ptrdiff_t(k * per), t.begin() + ptrdiff_t((k + 1) * per));
    s.sliceT[k] = medianInPlace(s.slice, 0, per);
    s.slice.assign(o.begin() + ptrdiff_t(k * per), o.begin() + ptrdiff_t((k + 1) * per));
    s.sliceO[k] = medianInPlace(s.slice, 0, per);
  }
  // Least squares through the slice medians.
  double mt = 0, mo = 0;
  for (size_t k = 0; k < kSlices; ++k) mt += s.sliceT[k] / kSlices, mo += s.sliceO[k] / kSlices;
  double sto = 0, stt = 0;
  for (size_t k = 0; k < kSlices; ++k) {
    sto += (s.sliceT[k] - mt) * (s.sliceO[k] - mo);
    stt += (s.sliceT[k] - mt) * (s.sliceT[k] - mt);
  }
  const double slope = stt > 0 ? sto / stt : 0;
  double residual = 0;
  for (size_t k = 0; k < kSlices; ++k) {
    const double e = s.sliceO[k] - (mo + slope * (s.sliceT[k] - mt));
    residual += e * e;
  }
  // Every sample's distance from the fit: its interquartile range, as a sigma.
  s.spread.resize(n);
  for (size_t i = 0; i < n; ++i) s.spread[i] = o[i] - (mo + slope * (t[i] - mt));
  std::sort(s.spread.begin(), s.spread.end());
  auto at = [&](double q) { return s.spread[std::clamp<size_t>(size_t(std::ceil(q * double(n))), 1, n) - 1]; };
  f.scatterUs = (at(0.75) - at(0.25)) / 1.349 / 1e3;
  f.ppm = slope * 1e6;
  f.errorPpm = stt > 0 ? std::sqrt(residual / double(kSlices - 2) / stt) * 1e6 : 0;
  return f;
}

double DriftFit::resolvedPpm() const {
  if (!known || spanS < kDriftMinSpanS) return 0;
  const double moved = std::abs(ppm) * spanS;  // us over the span
  return std::abs(ppm) > 3 * errorPpm && moved > scatterUs ? ppm : 0;
}

}  // namespace tempo::pacing
