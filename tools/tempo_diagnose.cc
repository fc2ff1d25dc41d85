// tempo-diagnose: reads every rank's TEMPO_TRACE JSON lines and says which failure mode
// is hurting the job (src/pacing/diagnose.h), with the evidence; optionally writes a
// self-contained HTML report (inline SVG: rank timeline, rank x iteration lateness heat
// map, skew histogram; no external assets).
//
//   tempo-diagnose [--html report.html] [--chrome merged.json] [--comm HASH] trace.jsonl...
//
// --chrome writes every rank's collectives into one Chrome trace (opens in Perfetto), one
// process per rank and communicator, on rank 0's clock when every trace carries its
// offset.
// Traces of several communicators may be given together; each is diagnosed on its own
// (--comm picks one). Exit status: 0 healthy, 1 a failure mode found, 2 bad input.
#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "src/pacing/diagnose.h"

namespace {

using tempo::pacing::Diagnosis;
using tempo::pacing::RankTrace;
using tempo::pacing::TraceRecord;

// The value of "key" in one flat JSON object line: a string (unquoted here) or a number.
bool field(const std::string& line, const char* key, std::string* out) {
  const std::string pat = std::string("\"") + key + "\":";
  size_t at = line.find(pat);
  if (at == std::string::npos) return false;
  at += pat.size();
  if (at < line.size() && line[at] == '"') {
    size_t end = line.find('"', at + 1);
    if (end == std::string::npos) return false;
    *out = line.substr(at + 1, end - at - 1);
    return true;
  }
  size_t end = line.find_first_of(",}", at);
  if (end == std::string::npos) return false;
  *out = line.substr(at, end - at);
  return true;
}

int64_t num(const std::string& line, const char* key, bool* ok) {
  std::string v;
  if (!field(line, key, &v)) {
    *ok = false;
    return 0;
  }
  char* end = nullptr;
  long long x = strtoll(v.c_str(), &end, 10);
  if (!end || *end) *ok = false;
  return x;
}

// An optional "key":[a,b,c,d,e] of integers (a TEMPO_TRACE rx_<tier> flow) into `f`;
// false when the key is present but malformed.
bool flow(const std::string& line, const char* key, tempo::pacing::Flow* f) {
  const std::string pat = std::string("\"") + key + "\":[";
  size_t at = line.find(pat);
  if (at == std::string::npos) return true;
  const char* p = line.c_str() + at + pat.size();
  long long v[5];
  for (int i = 0; i < 5; ++i) {
    char* end = nullptr;
    v[i] = strtoll(p, &end, 10);
    if (end == p || *end != (i < 4 ? ',' : ']') || v[i] < 0) return false;
    p = end + 1;
  }
  *f = {uint64_t(v[0]), uint64_t(v[1]), uint32_t(v[2]), v[3], v[4]};
  return true;
}

// An optional "rx_peers":[[peer,"tier",bytes,paced,msgs,first,last],...] into `peers`;
// false when present but malformed.
bool peerFlows(const std::string& line, std::vector<tempo::pacing::PeerFlow>* peers) {
  const std::string pat = "\"rx_peers\":[";
  size_t at = line.find(pat);
  if (at == std::string::npos) return true;
  const char* p = line.c_str() + at + pat.size();
  for (;;) {
    if (*p++ != '[') return false;
    tempo::pacing::PeerFlow f;
    char* end = nullptr;
    const long long peer = strtoll(p, &end, 10);
    if (end == p || peer < 0 || peer > INT32_MAX || end[0] != ',' || end[1] != '"') return false;
    p = end + 2;
    const char* close = strchr(p, '"');
    if (!close) return false;
    const std::string tier(p, close);
    size_t k = 0;
    while (k < tempo::pacing::kTiers && tier != tempo::pacing::kTierNames[k]) ++k;
    if (k == tempo::pacing::kTiers || close[1] != ',') return false;
    p = close + 2;
    long long v[5];
    for (int i = 0; i < 5; ++i) {
      v[i] = strtoll(p, &end, 10);
      if (end == p || *end != (i < 4 ? ',' : ']') || v[i] < 0) return false;
      p = end + 1;
    }
    f.peer = int32_t(peer);
    f.tier = tempo::pacing::Tier(k);
    f.flow = {uint64_t(v[0]), uint64_t(v[1]), uint32_t(v[2]), v[3], v[4]};
    peers->push_back(f);
    if (*p == ']') return true;
    if (*p++ != ',') return false;
  }
}

struct Comm {
  int nranks = 0;
  std::map<int, RankTrace> ranks;
};

// Reads one trace file into `comms`; false (after a message) on a malformed file.
bool readTrace(const char* path, std::map<std::string, Comm>& comms) {
  std::ifstream in(path);
  if (!in) {
    fprintf(stderr, "tempo-diagnose: cannot read %s: %s\n", path, strerror(errno));
    return false;
  }
  std::string line, comm;
  RankTrace* rank = nullptr;
  for (size_t no = 1; std::getline(in, line); ++no) {
    std::string type;
    if (line.empty()) continue;
    bool ok = field(line, "type", &type);
    if (ok && type == "comm") {
      field(line, "comm", &comm);
      const int r = int(num(line, "rank", &ok)), n = int(num(line, "nranks", &ok));
      if (!ok || r < 0 || n <= r) {
        fprintf(stderr, "tempo-diagnose: %s:%zu: a comm line without a valid rank and nranks\n", path, no);
        return false;
      }
      Comm& c = comms[comm];
      if (c.nranks && c.nranks != n) {
        fprintf(stderr, "tempo-diagnose: %s:%zu: communicator %s has %d ranks here, %d elsewhere\n", path, no,
                comm.c_str(), n, c.nranks);
        return false;
      }
      c.nranks = n;
      if (c.ranks.count(r)) {
        fprintf(stderr, "tempo-diagnose: %s:%zu: rank %d of communicator %s is traced twice\n", path, no, r,
                comm.c_str());
        return false;
      }
      rank = &c.ranks[r];
      rank->rank = r;
      field(line, "host", &rank->host);
    } else if (ok && type == "coll") {
      if (!rank) {
        fprintf(stderr, "tempo-diagnose: %s:%zu: a collective before any comm line\n", path, no);
        return false;
      }
      TraceRecord t;
      t.seq = uint64_t(num(line, "seq", &ok));
      field(line, "coll", &t.coll);
      t.bytes = uint64_t(num(line, "bytes", &ok));
      t.arrival = num(line, "t_arr", &ok);
      t.firstData = num(line, "t_first", &ok);
      t.exit = num(line, "t_exit", &ok);
      t.delay = num(line, "delay", &ok);
      t.status = int(num(line, "status", &ok));
      t.injected = line.find("\"inject\":1") != std::string::npos;
      for (size_t k = 0; k < tempo::pacing::kTiers; ++k)
        ok = flow(line, ("rx_" + std::string(tempo::pacing::kTierNames[k])).c_str(), &t.flows[k]) && ok;
      ok = peerFlows(line, &t.peers) && ok;
      if (!ok) {
        fprintf(stderr, "tempo-diagnose: %s:%zu: a malformed coll line\n", path, no);
        return false;
      }
      rank->records.push_back(t);
    } else if (ok && type == "clock") {  // this rank's offset to rank 0's clock
      const int64_t off = num(line, "offset", &ok), err = num(line, "error", &ok);
      if (!rank || !ok || err < 0) {
        fprintf(stderr, "tempo-diagnose: %s:%zu: a malformed clock line\n", path, no);
        return false;
      }
      rank->clockKnown = true;
      rank->clockOffsetNs = off;
      rank->clockErrorNs = err;
    } else if (ok && type == "hint") {  // tempoCommSetIterationPeriod; the latest holds
      const int64_t p = num(line, "period", &ok);
      if (!rank || !ok || p < 0 || p > INT32_MAX) {
        fprintf(stderr, "tempo-diagnose: %s:%zu: a malformed hint line\n", path, no);
        return false;
      }
      rank->periodHint = uint32_t(p);
    } else if (!ok) {
      fprintf(stderr, "tempo-diagnose: %s:%zu: not a Tempo trace line (no \"type\")\n", path, no);
      return false;
    }
  }
  return true;
}

void printReport(const std::string& comm, const Diagnosis& d, const std::vector<RankTrace>& ranks) {
  printf("communicator %s: %d ranks, %zu collectives, %zu measured across every rank\n", comm.c_str(), d.nranks,
         d.collectives, d.measured);
  if (d.period)
    printf("  iterations: %zu of %u collectives; time mean %.1f us, CoV %.3f, p50 %.1f us, p99 %.1f us\n",
           d.iterationUs.size(), d.period, d.iterMeanUs, d.iterCoV, d.iterP50Us, d.iterP99Us);
  else
    printf("  iterations: no repeating pattern of collectives found\n");
  int64_t worst = -1;
  for (const RankTrace& r : ranks) worst = r.clockKnown ? std::max(worst, r.clockErrorNs) : INT64_MAX;
  double drift = 0, error = 0;
  size_t top = 0;
  for (size_t r = 0; r < d.driftPpm.size(); ++r)
    if (std::abs(d.driftPpm[r]) >= drift) {
      drift = std::abs(d.driftPpm[r]);
      error = d.driftErrorPpm[r];
      top = r;
    }
  if (worst >= 0 && worst != INT64_MAX)
    printf("  clocks: every rank's offset to rank 0 known within %.1f us (timelines are aligned)", double(worst) / 1e3);
  else
    printf("  clocks: offsets not traced for every rank (timelines use each rank's own clock)");
  if (d.driftKnown)
    printf("; drift against rank 0 at most %.2f +- %.2f ppm over %.1f s (from the collectives' exits; %s)", drift,
           error, d.driftSpanS,
           d.driftSpanS < Diagnosis::kDriftMinSpanS ? "too short to resolve, not applied"
           : d.resolvedDriftPpm(top) != 0           ? "applied"
                                                    : "within the exits' scatter, not applied");
  printf("\n");
  if (d.asymmetric && d.clocksAligned)
    printf("  asymmetric collectives (broadcast, reduce, ...): %zu; arrival skew on rank 0's clock p50 %.1f us, p99 %.1f us\n",
           d.asymmetric, d.asymSkewP50Us, d.asymSkewP99Us);
  else if (d.asymmetric)
    printf("  asymmetric collectives (broadcast, reduce, ...): %zu; no skew without every rank's clock offset\n",
           d.asymmetric);
  printf("  skew p50 %.1f us, p99 %.1f us; transfer p50 %.1f us, p99 %.1f us\n", d.skewP50Us, d.skewP99Us,
         d.transferP50Us, d.transferP99Us);
  printf("  %-5s %-16s %10s %12s %10s\n", "rank", "host", "last %", "lead us", "gap x");
  for (size_t r = 0; r < ranks.size() && r < d.lastShare.size(); ++r)
    printf("  %-5d %-16s %10.1f %12.1f %10.2f\n", ranks[r].rank, ranks[r].host.c_str(), 100 * d.lastShare[r],
           d.meanLeadUs[r], d.gapExcess[r]);
  if (!d.tiers.empty()) {
    printf("  %-14s %10s %10s %14s %14s\n", "data from tier", "samples", "MB/s p50", "slowdown p50", "slowdown p99");
    for (const tempo::pacing::TierPace& p : d.tiers)
      printf("  %-14s %10zu %10.1f %14.2f %14.2f\n", p.tier, p.samples, p.p50MBps, p.slowdownP50, p.slowdownP99);
  }
  if (!d.links.empty()) {  // the slowest few, against their tier's typical link
    printf("  %-14s %-8s %10s %10s %14s\n", "slowest links", "tier", "samples", "MB/s p50", "x typical");
    for (size_t i = 0; i < d.links.size() && i < 4; ++i) {
      const tempo::pacing::LinkPace& l = d.links[i];
      char name[32];
      snprintf(name, sizeof name, "%d -> %d", l.from, l.to);
      printf("  %-14s %-8s %10zu %10.1f %14.2f\n", name, l.tier, l.samples, l.p50MBps, l.slowdown);
    }
  }
  printf("  diagnosis: %s\n", tempo::pacing::failureModeName(d.mode));
  for (const std::string& e : d.evidence) printf("    - %s\n", e.c_str());
}

// ---- HTML report: inline SVG only ----

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) o += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
  return o;
}

// Rank timeline of the first iterations: one bar per collective from arrival to exit,
// the gate in a darker shade, on rank 0's clock when every trace has its offset (else on
// each rank's own, which on one host is the same clock).
std::string timelineSvg(const std::vector<RankTrace>& ranks, const Diagnosis& d) {
  if (ranks.empty() || ranks[0].records.empty()) return "";
  const size_t shown = std::min<size_t>(ranks[0].records.size(), std::max<uint32_t>(1, d.period) * 4);
  auto at = [&](const RankTrace& r, int64_t t) { return tempo::pacing::onRankZeroClock(r, d, t); };
  int64_t t0 = INT64_MAX, t1 = INT64_MIN;
  for (const RankTrace& r : ranks)
    for (size_t k = 0; k < std::min(shown, r.records.size()); ++k) {
      t0 = std::min(t0, at(r, r.records[k].arrival));
      t1 = std::max(t1, at(r, r.records[k].exit));
    }
  const double W = 900, rowH = 16, scale = W / double(std::max<int64_t>(1, t1 - t0));
  std::string s = "<svg xmlns='http://www.w3.org/2000/svg' width='1000' height='" +
                  std::to_string(int(rowH * double(ranks.size()) + 30)) + "'>";
  for (size_t i = 0; i < ranks.size(); ++i) {
    const double y = 10 + rowH * double(i);
    s += "<text x='0' y='" + std::to_string(y + 11) + "' font-size='10'>rank " + std::to_string(ranks[i].rank) + "</text>";
    for (size_t k = 0; k < std::min(shown, ranks[i].records.size()); ++k) {
      const TraceRecord& t = ranks[i].records[k];
      const double x = 60 + double(at(ranks[i], t.arrival) - t0) * scale;
      const double w = std::max(1.0, double(t.exit - t.arrival) * scale);
      char buf[256];
      snprintf(buf, sizeof buf, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='#4a90d9'><title>%s #%" PRIu64
               " %.1f us</title></rect>", x, y, w, rowH - 3, t.coll.c_str(), t.seq, double(t.exit - t.arrival) / 1e3);
      s += buf;
      if (t.delay > 0 && !t.injected) {
        snprintf(buf, sizeof buf, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='#1d4f80'/>", x, y,
                 std::max(1.0, double(t.delay) * scale), rowH - 3);
        s += buf;
      }
    }
  }
  return s + "</svg>";
}

// Rank x iteration heat map of each rank's lead at the iteration's first collective:
// white is the last arriver (lead 0), red the longest wait.
std::string heatMapSvg(const Diagnosis& d) {
  if (d.leadByIteration.empty()) return "";
  const size_t iters = std::min<size_t>(d.leadByIteration.size(), 300), n = size_t(d.nranks);
  double maxLead = 1;
  for (size_t i = 0; i < iters; ++i)
    for (double v : d.leadByIteration[i]) maxLead = std::max(maxLead, v);
  const double cw = 900.0 / double(iters), ch = 12;
  std::string s = "<svg xmlns='http://www.w3.org/2000/svg' width='1000' height='" +
                  std::to_string(int(ch * double(n) + 20)) + "'>";
  for (size_t r = 0; r < n; ++r) {
    s += "<text x='0' y='" + std::to_string(int(ch * double(r) + 10)) + "' font-size='9'>rank " + std::to_string(r) + "</text>";
    for (size_t i = 0; i < iters; ++i) {
      const double v = d.leadByIteration[i][r] / maxLead;
      const int g = int(255 * (1 - std::clamp(v, 0.0, 1.0)));
      char buf[160];
      snprintf(buf, sizeof buf, "<rect x='%.2f' y='%.1f' width='%.2f' height='%.1f' fill='rgb(255,%d,%d)'/>",
               60 + cw * double(i), ch * double(r), cw + 0.05, ch - 1, g, g);
      s += buf;
    }
  }
  return s + "</svg>";
}

// Histogram of skew, in log2 buckets of microseconds.
std::string histogramSvg(const Diagnosis& d) {
  std::vector<int> bins(24, 0);
  for (double v : d.skewUs) ++bins[size_t(std::clamp(int(std::log2(std::max(1.0, v))), 0, 23))];
  const int top = std::max(1, *std::max_element(bins.begin(), bins.end()));
  std::string s = "<svg xmlns='http://www.w3.org/2000/svg' width='1000' height='160'>";
  for (size_t b = 0; b < bins.size(); ++b) {
    const double h = 120.0 * bins[b] / top;
    char buf[256];
    snprintf(buf, sizeof buf, "<rect x='%zu' y='%.1f' width='36' height='%.1f' fill='#d9822b'><title>%d collectives</title></rect>"
             "<text x='%zu' y='150' font-size='9'>%d us</text>", 40 * b + 10, 130 - h, h, bins[b], 40 * b + 10, 1 << b);
    s += buf;
  }
  return s + "</svg>";
}

bool writeHtml(const char* path, const std::map<std::string, std::pair<Diagnosis, std::vector<RankTrace>>>& results) {
  std::ofstream out(path);
  if (!out) {
    fprintf(stderr, "tempo-diagnose: cannot write %s: %s\n", path, strerror(errno));
    return false;
  }
  out << "<!DOCTYPE html><html><head><meta charset='utf-8'><title>Tempo diagnosis</title>"
         "<style>body{font-family:sans-serif;margin:20px}td,th{padding:2px 8px;text-align:right}</style></head><body>";
  for (const auto& [comm, r] : results) {
    const Diagnosis& d = r.first;
    out << "<h1>Communicator " << esc(comm) << ": " << esc(tempo::pacing::failureModeName(d.mode)) << "</h1><ul>";
    for (const std::string& e : d.evidence) out << "<li>" << esc(e) << "</li>";
    char buf[256];
    snprintf(buf, sizeof buf, "<li>%zu iterations, mean %.1f us, CoV %.3f, p50 %.1f us, p99 %.1f us</li></ul>",
             d.iterationUs.size(), d.iterMeanUs, d.iterCoV, d.iterP50Us, d.iterP99Us);
    out << buf << "<h2>Timeline (first iterations)</h2>" << timelineSvg(r.second, d)
        << "<h2>Lateness: each rank's wait at each iteration's first collective</h2>" << heatMapSvg(d)
        << "<h2>Skew histogram</h2>" << histogramSvg(d) << "<h2>Ranks</h2><table><tr><th>rank</th><th>host</th>"
        << "<th>last %</th><th>mean lead us</th><th>compute gap x</th></tr>";
    for (size_t i = 0; i < r.second.size() && i < d.lastShare.size(); ++i) {
      snprintf(buf, sizeof buf, "<tr><td>%d</td><td>%s</td><td>%.1f</td><td>%.1f</td><td>%.2f</td></tr>",
               r.second[i].rank, esc(r.second[i].host).c_str(), 100 * d.lastShare[i], d.meanLeadUs[i], d.gapExcess[i]);
      out << buf;
    }
    out << "</table>";
    if (!d.tiers.empty()) {
      out << "<h2>Data from peers, by topology tier</h2><table><tr><th>tier</th><th>samples</th><th>MB/s p50</th>"
             "<th>slowdown p50</th><th>slowdown p99</th></tr>";
      for (const tempo::pacing::TierPace& p : d.tiers) {
        snprintf(buf, sizeof buf, "<tr><td>%s</td><td>%zu</td><td>%.1f</td><td>%.2f</td><td>%.2f</td></tr>", p.tier,
                 p.samples, p.p50MBps, p.slowdownP50, p.slowdownP99);
        out << buf;
      }
      out << "</table>";
    }
    if (!d.links.empty()) {
      out << "<h2>Links, slowest first</h2><table><tr><th>from</th><th>to</th><th>tier</th><th>samples</th>"
             "<th>MB/s p50</th><th>slowdown against the tier's typical link</th></tr>";
      for (size_t i = 0; i < d.links.size() && i < 16; ++i) {
        const tempo::pacing::LinkPace& l = d.links[i];
        snprintf(buf, sizeof buf, "<tr><td>%d</td><td>%d</td><td>%s</td><td>%zu</td><td>%.1f</td><td>%.2f</td></tr>",
                 l.from, l.to, l.tier, l.samples, l.p50MBps, l.slowdown);
        out << buf;
      }
      out << "</table>";
    }
  }
  out << "</body></html>\n";
  return bool(out);
}

// Every rank's collectives in one Chrome trace: process id = communicator index x 100000 +
// rank, named after the rank, host and communicator; timestamps in us on rank 0's clock
// where every rank's offset is known.
bool writeChrome(const char* path, const std::map<std::string, std::pair<Diagnosis, std::vector<RankTrace>>>& results) {
  FILE* f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "tempo-diagnose: cannot write %s: %s\n", path, strerror(errno));
    return false;
  }
  fprintf(f, "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
  const char* sep = "";
  int index = 0;
  for (const auto& [comm, r] : results) {
    for (const RankTrace& t : r.second) {
      const long pid = long(index) * 100000 + t.rank;
      fprintf(f, "%s{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%ld,\"args\":{\"name\":\"rank %d (%s) comm %s\"}}",
              sep, pid, t.rank, esc(t.host).c_str(), comm.c_str());
      fprintf(f, ",\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%ld,\"args\":{\"sort_index\":%ld}}", pid,
              pid);
      sep = ",\n";
      for (const TraceRecord& c : t.records) {
        fprintf(f, ",\n{\"name\":\"%s\",\"cat\":\"coll\",\"ph\":\"X\",\"pid\":%ld,\"tid\":0,\"ts\":%.3f,\"dur\":%.3f,"
                "\"args\":{\"seq\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"status\":%d}}",
                esc(c.coll).c_str(), pid, double(tempo::pacing::onRankZeroClock(t, r.first, c.arrival)) / 1e3,
                double(c.exit - c.arrival) / 1e3, c.seq,
                c.bytes, c.status);
        if (c.delay > 0)
          fprintf(f, ",\n{\"name\":\"%s\",\"cat\":\"pacing\",\"ph\":\"X\",\"pid\":%ld,\"tid\":0,\"ts\":%.3f,"
                  "\"dur\":%.3f}",
                  c.injected ? "pacing spread" : "pacing gate", pid,
                  double(tempo::pacing::onRankZeroClock(t, r.first, c.arrival)) / 1e3,
                  double(c.delay) / 1e3);
      }
    }
    ++index;
  }
  fprintf(f, "\n]}\n");
  if (fclose(f) != 0) {
    fprintf(stderr, "tempo-diagnose: writing %s failed: %s\n", path, strerror(errno));
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const char* html = nullptr;
  const char* chrome = nullptr;
  std::string only;
  std::vector<const char*> files;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--html") && i + 1 < argc) html = argv[++i];
    else if (!strcmp(argv[i], "--chrome") && i + 1 < argc) chrome = argv[++i];
    else if (!strcmp(argv[i], "--comm") && i + 1 < argc) only = argv[++i];
    else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      printf("usage: tempo-diagnose [--html report.html] [--chrome merged.json] [--comm HASH] trace.jsonl...\n");
      return 0;
    } else if (argv[i][0] == '-') {
      fprintf(stderr, "tempo-diagnose: unknown option %s\n", argv[i]);
      return 2;
    } else files.push_back(argv[i]);
  }
  if (files.empty()) {
    fprintf(stderr, "usage: tempo-diagnose [--html report.html] [--chrome merged.json] [--comm HASH] trace.jsonl...\n");
    return 2;
  }
  std::map<std::string, Comm> comms;
  for (const char* f : files)
    if (!readTrace(f, comms)) return 2;
  std::map<std::string, std::pair<Diagnosis, std::vector<RankTrace>>> results;
  int found = 0;
  for (auto& [hash, c] : comms) {
    if (!only.empty() && hash != only) continue;
    if (int(c.ranks.size()) != c.nranks) {
      fprintf(stderr, "tempo-diagnose: communicator %s has %d ranks but %zu are traced; give every rank's file\n",
              hash.c_str(), c.nranks, c.ranks.size());
      return 2;
    }
    std::vector<RankTrace> ranks;
    for (auto& [r, t] : c.ranks) ranks.push_back(std::move(t));
    Diagnosis d = tempo::pacing::diagnose(ranks);
    printReport(hash, d, ranks);
    found += d.mode != tempo::pacing::FailureMode::Healthy;
    results[hash] = {std::move(d), std::move(ranks)};
  }
  if (results.empty()) {
    fprintf(stderr, "tempo-diagnose: no communicator%s%s in the traces\n", only.empty() ? "" : " ", only.c_str());
    return 2;
  }
  if (html && !writeHtml(html, results)) return 2;
  if (chrome && !writeChrome(chrome, results)) return 2;
  return found ? 1 : 0;
}
