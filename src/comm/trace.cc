#include "src/comm/trace.h"

#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdarg>
#include <cstring>

#include "src/core/log.h"

namespace tempo::comm {
namespace {

constexpr size_t kFlushBytes = 64 << 10;

void appendf(std::string& out, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void appendf(std::string& out, const char* fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (n > 0) out.append(line, std::min(size_t(n), sizeof line - 1));
}

// Host names are [A-Za-z0-9.-] in practice; anything JSON would need escaped becomes '_'.
std::string jsonSafe(const std::string& s) {
  std::string out = s;
  for (char& c : out)
    if (c == '"' || c == '\\' || (unsigned char)c < 0x20) c = '_';
  return out;
}

}  // namespace

std::string TraceWriter::expand(const char* pattern, const TraceIdentity& who) {
  std::string out;
  for (const char* p = pattern; *p; ++p) {
    if (*p != '%' || !p[1]) {
      out += *p;
      continue;
    }
    switch (*++p) {
      case 'r': out += std::to_string(who.rank); break;
      case 'h': out += who.host; break;
      case 'p': out += std::to_string(getpid()); break;
      case 'c': {
        char hex[17];
        snprintf(hex, sizeof hex, "%016" PRIx64, who.commHash);
        out += hex;
        break;
      }
      case '%': out += '%'; break;
      default: out += '%'; out += *p;
    }
  }
  if (out.size() > 5 && out.compare(out.size() - 5, 5, ".json") == 0) out.resize(out.size() - 5);
  return out;
}

std::unique_ptr<TraceWriter> TraceWriter::open(const char* pattern, const TraceIdentity& who) {
  if (!pattern || !*pattern) return nullptr;
  std::unique_ptr<TraceWriter> w(new TraceWriter());
  w->who_ = who;
  w->path_ = expand(pattern, who);
  w->json_ = fopen((w->path_ + ".json").c_str(), "w");
  w->jsonl_ = w->json_ ? fopen((w->path_ + ".jsonl").c_str(), "w") : nullptr;
  if (!w->json_ || !w->jsonl_) {
    TEMPO_WARN("TEMPO_TRACE: cannot write %s.json(l): %s; rank %d is not traced", w->path_.c_str(), strerror(errno),
               who.rank);
    return nullptr;  // the destructor closes whichever opened
  }
  const std::string host = jsonSafe(who.host);
  appendf(w->jsonlBuf_,
          "{\"type\":\"comm\",\"version\":1,\"comm\":\"%016" PRIx64
          "\",\"rank\":%d,\"nranks\":%d,\"host\":\"%s\",\"pid\":%d,\"clock\":\"CLOCK_MONOTONIC\"}\n",
          who.commHash, who.rank, who.nranks, host.c_str(), int(getpid()));
  w->jsonBuf_ = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  appendf(w->jsonBuf_,
          "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"rank %d (%s)\"}}", who.rank,
          who.rank, host.c_str());
  TEMPO_INFO(log::Init, "rank %d traces to %s.json and %s.jsonl", who.rank, w->path_.c_str(), w->path_.c_str());
  return w;
}

TraceWriter::~TraceWriter() {
  if (json_ && !broken_) {
    jsonBuf_ += "\n]}\n";
    flush();
  }
  if (json_) fclose(json_);
  if (jsonl_) fclose(jsonl_);
}

void TraceWriter::onRecord(const engine::OpRecord& r, const engine::PeerFlows& peers) {
  if (broken_) return;
  const char* name = engine::collName(r.coll);
  const int64_t gate = r.delayNs;
  if (const uint32_t hint = hint_.load(std::memory_order_relaxed); hint != hintWritten_) {
    appendf(jsonlBuf_, "{\"type\":\"hint\",\"period\":%u,\"seq\":%" PRIu64 "}\n", hint, r.seq);
    hintWritten_ = hint;
  }
  appendf(jsonlBuf_,
          "{\"type\":\"coll\",\"seq\":%" PRIu64 ",\"coll\":\"%s\",\"algo\":\"%s\",\"bytes\":%" PRIu64 ",\"t_arr\":%" PRId64
          ",\"t_first\":%" PRId64 ",\"t_exit\":%" PRId64 ",\"delay\":%" PRId64 ",\"status\":%d",
          r.seq, name, r.algorithm, r.bytes, r.tEnter, r.tFirstData, r.tExit, gate, int(r.status));
  if (r.injected) jsonlBuf_ += ",\"inject\":1";  // the delay spread the sends; no gate held the op
  for (size_t t = 0; t < engine::kTiers; ++t) {
    const engine::Flow& f = r.flows[t];
    if (f.msgs)
      appendf(jsonlBuf_, ",\"rx_%s\":[%" PRIu64 ",%" PRIu64 ",%u,%" PRId64 ",%" PRId64 "]",
              engine::tierName(engine::Tier(t)), f.bytes, f.paced, f.msgs, f.first, f.last);
  }
  if (peers.count) {
    jsonlBuf_ += ",\"rx_peers\":[";
    for (size_t i = 0; i < peers.count; ++i) {
      const engine::PeerFlow& p = peers.flows[i];
      appendf(jsonlBuf_, "%s[%d,\"%s\",%" PRIu64 ",%" PRIu64 ",%u,%" PRId64 ",%" PRId64 "]", i ? "," : "", p.peer,
              engine::tierName(p.tier), p.flow.bytes, p.flow.paced, p.flow.msgs, p.flow.first, p.flow.last);
    }
    jsonlBuf_ += "]";
    if (peers.unkept) appendf(jsonlBuf_, ",\"rx_peers_unkept\":%u", peers.unkept);
  }
  jsonlBuf_ += "}\n";
  // Chrome trace timestamps are in microseconds (fractions allowed).
  appendf(jsonBuf_,
          ",\n{\"name\":\"%s\",\"cat\":\"coll\",\"ph\":\"X\",\"pid\":%d,\"tid\":0,\"ts\":%.3f,\"dur\":%.3f,"
          "\"args\":{\"seq\":%" PRIu64 ",\"algo\":\"%s\",\"bytes\":%" PRIu64 ",\"gate_us\":%.3f,\"status\":%d}}",
          name, who_.rank, double(r.tEnter) / 1e3, double(r.tExit - r.tEnter) / 1e3, r.seq, r.algorithm, r.bytes,
          double(gate) / 1e3, int(r.status));
  if (gate > 0)
    appendf(jsonBuf_, ",\n{\"name\":\"%s\",\"cat\":\"pacing\",\"ph\":\"X\",\"pid\":%d,\"tid\":0,\"ts\":%.3f,\"dur\":%.3f}",
            r.injected ? "pacing spread" : "pacing gate", who_.rank, double(r.tEnter) / 1e3, double(gate) / 1e3);
  if (jsonBuf_.size() + jsonlBuf_.size() >= kFlushBytes) flush();
}

void TraceWriter::setClock(const pacing::ClockOffset& c) {
  if (c.valid)
    appendf(jsonlBuf_, "{\"type\":\"clock\",\"offset\":%" PRId64 ",\"error\":%" PRId64 ",\"probes\":%u}\n", c.offsetNs,
            c.errorNs, c.probes);
}

void TraceWriter::write(FILE* f, std::string& buf) {
  if (!broken_ && !buf.empty() && fwrite(buf.data(), 1, buf.size(), f) != buf.size()) {
    TEMPO_WARN("TEMPO_TRACE: writing %s failed: %s; rank %d stops tracing", path_.c_str(), strerror(errno), who_.rank);
    broken_ = true;
  }
  buf.clear();
}

void TraceWriter::flush() {
  write(json_, jsonBuf_);
  write(jsonl_, jsonlBuf_);
  if (!broken_ && (fflush(json_) != 0 || fflush(jsonl_) != 0)) {
    TEMPO_WARN("TEMPO_TRACE: writing %s failed: %s; rank %d stops tracing", path_.c_str(), strerror(errno), who_.rank);
    broken_ = true;
  }
}

}  // namespace tempo::comm
