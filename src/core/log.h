// NCCL-compatible logging: NCCL_DEBUG picks the level, NCCL_DEBUG_SUBSYS the INFO
// subsystems, NCCL_DEBUG_FILE the destination. Lines look like NCCL's
//   host:pid:tid [dev] NCCL INFO message
// so users' grep habits and log parsers keep working. The macros test the level before
// formatting anything; the _RATELIMITED variant is for progress loops.
#pragma once

#include <atomic>
#include <cstdint>

#include "src/core/clock.h"

namespace tempo::log {

enum class Level : int { None = 0, Version = 1, Warn = 2, Info = 3, Abort = 4, Trace = 5 };

enum Subsys : uint64_t {
  Init = 0x1, Coll = 0x2, P2p = 0x4, Shm = 0x8, Net = 0x10, Graph = 0x20, Tuning = 0x40,
  Env = 0x80, Alloc = 0x100, Call = 0x200, Proxy = 0x400, Nvls = 0x800, Bootstrap = 0x1000,
  Reg = 0x2000, Profile = 0x4000, Ras = 0x8000, Destroy = 0x10000, AllocHost = 0x20000,
  All = ~uint64_t{0},
};

extern std::atomic<int> g_level;  // -1 until initialised
extern std::atomic<uint64_t> g_mask;
extern std::atomic<bool> g_errorsOnly;  // NCCL_DEBUG=ERROR (the default): WARN lines only
void init();                      // reads the parameters once; idempotent
inline bool enabled(Level l, uint64_t subsys) {
  int lv = g_level.load(std::memory_order_relaxed);
  if (lv < 0) {
    init();
    lv = g_level.load(std::memory_order_relaxed);
  }
  if (l == Level::Version && g_errorsOnly.load(std::memory_order_relaxed)) return false;
  return lv >= static_cast<int>(l) && (l != Level::Info || (g_mask.load(std::memory_order_relaxed) & subsys));
}

void message(Level l, uint64_t subsys, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));

// Device index printed in the "[dev]" field for the calling thread.
void setThreadDevice(int dev);
// Parses a NCCL_DEBUG_SUBSYS-style list into a mask (exposed for tests).
uint64_t parseSubsysMask(const char* list);
// Re-reads the parameters (tests).
void reinit();

}  // namespace tempo::log

#define TEMPO_LOG(level, subsys, ...)                                                   \
  do {                                                                                  \
    if (::tempo::log::enabled(level, subsys))                                           \
      ::tempo::log::message(level, subsys, __FILE__, __LINE__, __VA_ARGS__);            \
  } while (0)
#define TEMPO_WARN(...) TEMPO_LOG(::tempo::log::Level::Warn, ::tempo::log::All, __VA_ARGS__)
#define TEMPO_INFO(subsys, ...) TEMPO_LOG(::tempo::log::Level::Info, subsys, __VA_ARGS__)
#define TEMPO_TRACE(subsys, ...) TEMPO_LOG(::tempo::log::Level::Trace, subsys, __VA_ARGS__)
// At most one line per `ms` milliseconds from this call site.
#define TEMPO_WARN_RATELIMITED(ms, ...)                                                 \
  do {                                                                                  \
    static std::atomic<int64_t> tempo_last_ns_{0};                                      \
    int64_t tempo_now_ = ::tempo::nowNs();                                              \
    int64_t tempo_prev_ = tempo_last_ns_.load(std::memory_order_relaxed);               \
    if (tempo_now_ - tempo_prev_ >= int64_t(ms) * 1000000 &&                            \
        tempo_last_ns_.compare_exchange_strong(tempo_prev_, tempo_now_))                \
      TEMPO_WARN(__VA_ARGS__);                                                          \
  } while (0)
