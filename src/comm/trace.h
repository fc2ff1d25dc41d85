// TEMPO_TRACE: one rank's per-collective trace, in two files.
//
// TEMPO_TRACE is a path pattern: %r expands to the rank, %h to the host name, %p to the
// pid, %c to the communicator's hash (so that several communicators of one process write
// files of their own). From the expanded path P (less a trailing ".json"), a communicator
// writes
//   P.json   Chrome trace events (chrome://tracing, Perfetto): one complete event per
//            collective from arrival to exit, with the pacing gate as a nested event;
//   P.jsonl  JSON lines: a "comm" line (rank, nranks, host, communicator hash, clock),
//            then one "coll" line per collective (seq, kind, algorithm, bytes, arrival, first data,
//            exit and pacing delay in ns of CLOCK_MONOTONIC, status, "inject":1 when the
//            delay spread the sends instead of gating the op, and per tier that sent
//            it data "rx_host"/"rx_leaf"/"rx_fabric": [bytes, bytes after the first
//            message, messages, first and last message's completion]) — what tools read;
//            a "hint" line wherever the application set its iteration length, and a
//            "clock" line with this rank's offset to rank 0's clock (setClock).
// Lines are buffered and written every 64 KiB and at close, from the engine's thread; a
// file that cannot be written is reported once (WARN) and tracing stops, the job goes on.
#pragma once

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>

#include "src/engine/engine.h"
#include "src/pacing/clock.h"

namespace tempo::comm {

struct TraceIdentity {
  uint64_t commHash = 0;
  int rank = 0, nranks = 1;
  std::string host;
};

class TraceWriter final : public engine::RecordSink {
 public:
  // Null when `pattern` is empty; a writer whose files failed to open is not made either
  // (after a WARN naming the path and the reason).
  static std::unique_ptr<TraceWriter> open(const char* pattern, const TraceIdentity& who);
  ~TraceWriter() override;
  void onRecord(const engine::OpRecord& r, const engine::PeerFlows& peers) override;
  void flush();
  // The application's iteration length (tempoCommSetIterationPeriod), from any thread:
  // written as a "hint" line {"type":"hint","period":P,"seq":S} before the next
  // collective's line (S: that collective's seq), so tools use it, not their inference.
  void setIterationPeriod(uint32_t collectives) { hint_.store(collectives, std::memory_order_relaxed); }
  // Writes a "clock" line: {"type":"clock","offset":ns,"error":ns} (rank 0's clock minus
  // this rank's, within +- error; no line when the probes gave no estimate). On the
  // engine's thread, before the first collective.
  void setClock(const pacing::ClockOffset& c);

  // The pattern expanded for `who` (exposed for tests).
  static std::string expand(const char* pattern, const TraceIdentity& who);

 private:
  TraceWriter() = default;
  void write(FILE* f, std::string& buf);
  FILE* json_ = nullptr;
  FILE* jsonl_ = nullptr;
  std::string jsonBuf_, jsonlBuf_, path_;
  TraceIdentity who_;
  bool broken_ = false;
  std::atomic<uint32_t> hint_{0};
  uint32_t hintWritten_ = 0;
};

}  // namespace tempo::comm
