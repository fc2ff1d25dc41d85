#include "src/core/param.h"

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>

#include "src/core/log.h"

namespace tempo::param {
namespace {

struct Def {
  const char* name;
  Kind kind;
  const char* defaultValue;
  const char* description;
};

constexpr Def kDefs[] = {
#define TEMPO_PARAM(ident, env, kind, def, desc) {env, Kind::kind, def, desc},
#include "src/core/param_table.h"
#undef TEMPO_PARAM
};
constexpr int kCount = static_cast<int>(Id::Count);
static_assert(sizeof(kDefs) / sizeof(kDefs[0]) == kCount);

constexpr auto kNames = [] {
  std::array<const char*, kCount> n{};
  for (int i = 0; i < kCount; ++i) n[size_t(i)] = kDefs[i].name;
  return n;
}();

struct Value {
  std::string text;
  int64_t number = 0;
  Source source = Source::Default;
  bool valid = true;
};

Value g_values[kCount];
std::once_flag g_once;

bool parseInt(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 0);
  while (end && (*end == ' ' || *end == '\t')) ++end;
  if (errno != 0 || end == s.c_str() || *end != '\0') return false;
  *out = v;
  return true;
}

void assign(int i, std::string text, Source src) {
  Value& v = g_values[i];
  v.text = std::move(text);
  v.source = src;
  v.valid = true;
  if (kDefs[i].kind == Kind::Int) {
    int64_t n = 0;
    if (parseInt(v.text, &n)) {
      v.number = n;
    } else {
      v.valid = false;
      parseInt(kDefs[i].defaultValue, &v.number);
    }
  }
}

int findByName(std::string_view name) {
  for (int i = 0; i < kCount; ++i)
    if (name == kDefs[i].name) return i;
  return -1;
}

std::string trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(" \t\r\n");
  return std::string(s.substr(b, e - b + 1));
}

// KEY=VALUE lines; '#' starts a comment. Earlier files win over later ones.
void readConfFile(const std::string& path, bool fromConf[]) {
  if (path.empty()) return;
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return;
  char line[4096];
  while (std::fgets(line, sizeof line, f)) {
    std::string_view l(line);
    if (auto hash = l.find('#'); hash != std::string_view::npos) l = l.substr(0, hash);
    auto eq = l.find('=');
    if (eq == std::string_view::npos) continue;
    int i = findByName(trim(l.substr(0, eq)));
    if (i < 0 || fromConf[i]) continue;
    assign(i, trim(l.substr(eq + 1)), Source::ConfFile);
    fromConf[i] = true;
  }
  std::fclose(f);
}

void load() {
  for (int i = 0; i < kCount; ++i) assign(i, kDefs[i].defaultValue, Source::Default);
  bool fromConf[kCount] = {};
  const char* conf = std::getenv("NCCL_CONF_FILE");
  if (conf) readConfFile(conf, fromConf);
  if (const char* home = std::getenv("HOME")) readConfFile(std::string(home) + "/.rccl.conf", fromConf);
  readConfFile("/etc/rccl.conf", fromConf);
  for (int i = 0; i < kCount; ++i) {
    if (const char* env = std::getenv(kDefs[i].name)) assign(i, env, Source::Environment);
  }
}

const Value& get(Id id) {
  std::call_once(g_once, load);
  return g_values[static_cast<int>(id)];
}

}  // namespace

#define TEMPO_PARAM_Int(ident) \
  int64_t ident() { return get(Id::ident).number; }
#define TEMPO_PARAM_Str(ident) \
  const char* ident() { return get(Id::ident).text.c_str(); }
#define TEMPO_PARAM(ident, env, kind, def, desc) TEMPO_PARAM_##kind(ident)
#include "src/core/param_table.h"
#undef TEMPO_PARAM
#undef TEMPO_PARAM_Int
#undef TEMPO_PARAM_Str

bool isSet(Id id) { return get(id).source != Source::Default; }

Entry entry(Id id) {
  const int i = static_cast<int>(id);
  const Value& v = get(id);
  // A secret's value is not for listings, logs or the parameter API, only whether it is set.
  const bool hidden = id == Id::Secret && !v.text.empty();
  return {kDefs[i].name, kDefs[i].kind,  kDefs[i].defaultValue, kDefs[i].description,
          hidden ? std::string("(set, not shown)") : v.text, v.source, v.valid, v.number};
}

std::vector<Entry> snapshot() {
  std::vector<Entry> out;
  out.reserve(kCount);
  for (int i = 0; i < kCount; ++i) out.push_back(entry(static_cast<Id>(i)));
  return out;
}

std::optional<Id> find(std::string_view name) {
  const int i = findByName(name);
  if (i < 0) return std::nullopt;
  return static_cast<Id>(i);
}

const char* const* names() { return kNames.data(); }

const char* sourceName(Source s) {
  switch (s) {
    case Source::Default: return "default";
    case Source::ConfFile: return "config file";
    case Source::Environment: return "environment";
    case Source::Override: return "override";
  }
  return "?";
}

void logNonDefault() {
  for (const Entry& e : snapshot()) {
    if (e.source == Source::Default) continue;
    if (!e.valid) {
      TEMPO_WARN("%s=%s is not an integer, using the default %s", e.name, e.value.c_str(),
                 e.defaultValue);
    } else {
      TEMPO_INFO(log::Env, "%s set by %s to %s", e.name, sourceName(e.source), e.value.c_str());
    }
  }
}

void overrideForTest(Id id, const char* value) {
  std::call_once(g_once, load);
  int i = static_cast<int>(id);
  if (value) {
    assign(i, value, Source::Override);
    return;
  }
  const char* env = std::getenv(kDefs[i].name);
  if (env)
    assign(i, env, Source::Environment);
  else
    assign(i, kDefs[i].defaultValue, Source::Default);
}

}  // namespace tempo::param
