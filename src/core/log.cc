#include "src/core/log.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>

#include "src/core/host.h"
#include "src/core/param.h"

namespace tempo::log {

std::atomic<int> g_level{-1};
std::atomic<uint64_t> g_mask{0};
std::atomic<bool> g_errorsOnly{false};

namespace {

std::mutex g_mutex;
FILE* g_file = nullptr;  // stderr unless NCCL_DEBUG_FILE
uint32_t g_timestampLevels = 0;
thread_local int t_device = 0;

struct Name {
  const char* name;
  uint64_t bit;
};
constexpr Name kSubsys[] = {
    {"INIT", Init},   {"COLL", Coll},     {"P2P", P2p},          {"SHM", Shm},
    {"NET", Net},     {"GRAPH", Graph},   {"TUNING", Tuning},    {"ENV", Env},
    {"ALLOC", Alloc}, {"CALL", Call},     {"PROXY", Proxy},      {"NVLS", Nvls},
    {"BOOTSTRAP", Bootstrap}, {"REG", Reg}, {"PROFILE", Profile}, {"RAS", Ras},
    {"DESTROY", Destroy}, {"ALLOC_HOST", AllocHost}, {"VERBS", Net}, {"ALL", All},
};

Level parseLevel(const char* s) {
  if (!strcasecmp(s, "NONE")) return Level::None;
  if (!strcasecmp(s, "VERSION")) return Level::Version;
  if (!strcasecmp(s, "ERROR") || !strcasecmp(s, "WARN")) return Level::Warn;
  if (!strcasecmp(s, "INFO")) return Level::Info;
  if (!strcasecmp(s, "ABORT")) return Level::Abort;
  if (!strcasecmp(s, "TRACE")) return Level::Trace;
  return Level::Warn;
}

// A comma list of level names, "ALL", or "^" + list to invert.
uint32_t parseLevelSet(const char* s) {
  bool invert = *s == '^';
  if (invert) ++s;
  uint32_t set = 0;
  std::string list(s);
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    std::string tok = list.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (!strcasecmp(tok.c_str(), "ALL")) set = ~0u;
    else if (!tok.empty()) set |= 1u << static_cast<int>(parseLevel(tok.c_str()));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return invert ? ~set : set;
}

std::string expandPath(const char* pattern) {
  std::string out;
  for (const char* p = pattern; *p; ++p) {
    if (p[0] == '%' && p[1] == 'h') {
      out += hostName();
      ++p;
    } else if (p[0] == '%' && p[1] == 'p') {
      out += std::to_string(getpid());
      ++p;
    } else {
      out += *p;
    }
  }
  return out;
}

void initLocked() {
  g_mask.store(parseSubsysMask(param::DebugSubsys()), std::memory_order_relaxed);
  g_timestampLevels = parseLevelSet(param::DebugTimestampLevels());
  g_file = stderr;
  if (*param::DebugFile()) {
    std::string path = expandPath(param::DebugFile());
    if (FILE* f = std::fopen(path.c_str(), "w")) {
      setvbuf(f, nullptr, _IOLBF, 0);
      g_file = f;
    }
  }
  g_errorsOnly.store(!strcasecmp(param::Debug(), "ERROR"), std::memory_order_relaxed);
  g_level.store(static_cast<int>(parseLevel(param::Debug())), std::memory_order_release);
}

}  // namespace

uint64_t parseSubsysMask(const char* list) {
  bool invert = *list == '^';
  if (invert) ++list;
  uint64_t mask = 0;
  std::string s(list);
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    std::string tok = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    for (const Name& n : kSubsys)
      if (!strcasecmp(tok.c_str(), n.name)) mask |= n.bit;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return invert ? ~mask : mask;
}

void init() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_level.load(std::memory_order_acquire) >= 0) return;
  initLocked();
}

void reinit() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_file && g_file != stderr) std::fclose(g_file);
  initLocked();
}

void setThreadDevice(int dev) { t_device = dev; }

void message(Level l, uint64_t subsys, const char* file, int line, const char* fmt, ...) {
  char buf[2048];
  int n = 0;
  if (g_timestampLevels & (1u << static_cast<int>(l))) {
    time_t now = time(nullptr);
    struct tm tmv;
    localtime_r(&now, &tmv);
    n += int(strftime(buf, sizeof buf, param::DebugTimestampFormat(), &tmv));
  }
  const char* tag = l == Level::Warn ? "WARN" : l == Level::Trace ? "TRACE" : "INFO";
  long tid = syscall(SYS_gettid);
  if (l == Level::Warn && file) {
    const char* base = strrchr(file, '/');
    n += snprintf(buf + n, sizeof buf - n, "%s:%d:%ld [%d] %s:%d NCCL %s ", hostName(), int(getpid()),
                  tid, t_device, base ? base + 1 : file, line, tag);
  } else {
    n += snprintf(buf + n, sizeof buf - n, "%s:%d:%ld [%d] NCCL %s ", hostName(), int(getpid()), tid,
                  t_device, tag);
  }
  if (n < 0 || n >= int(sizeof buf)) n = int(sizeof buf) - 1;
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(buf + n, sizeof buf - n, fmt, ap);
  va_end(ap);
  n = m < 0 ? n : (n + m >= int(sizeof buf) - 1 ? int(sizeof buf) - 2 : n + m);
  buf[n++] = '\n';
  std::lock_guard<std::mutex> lock(g_mutex);
  fwrite(buf, 1, size_t(n), g_file ? g_file : stderr);
  fflush(g_file ? g_file : stderr);
}

}  // namespace tempo::log
