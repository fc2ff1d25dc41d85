// Parameter table access. Values come from, in order of precedence: the environment,
// NCCL_CONF_FILE, ~/.rccl.conf, /etc/rccl.conf, and the default in param_table.h.
// They are read once, on first use, and are immutable afterwards (thread-safe), except
// through the test-only override below.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tempo::param {

enum class Kind { Int, Str };
enum class Source { Default, ConfFile, Environment, Override };

enum class Id : int {
#define TEMPO_PARAM(ident, env, kind, def, desc) ident,
#include "src/core/param_table.h"
#undef TEMPO_PARAM
  Count
};

// Accessors, one per table entry: int64_t Ident() or const char* Ident().
#define TEMPO_PARAM_Int int64_t
#define TEMPO_PARAM_Str const char*
#define TEMPO_PARAM(ident, env, kind, def, desc) TEMPO_PARAM_##kind ident();
#include "src/core/param_table.h"
#undef TEMPO_PARAM
#undef TEMPO_PARAM_Int
#undef TEMPO_PARAM_Str

struct Entry {
  const char* name;
  Kind kind;
  const char* defaultValue;
  const char* description;
  std::string value;  // effective value as text (TEMPO_SECRET's masked when set)
  Source source;
  bool valid;         // false when an Int value did not parse (the default is used)
  int64_t number;     // Int: the value in effect (the default where `value` did not parse)

  // The default as a user reads it: "(unset)" for an empty string and for the INT_MIN
  // sentinel of Int parameters that only override a config field when set.
  const char* shownDefault() const {
    return (!*defaultValue || std::string_view(defaultValue) == "-2147483648") ? "(unset)" : defaultValue;
  }
};

bool isSet(Id id);  // true unless the value is the table default
// One parameter with its effective value and source.
Entry entry(Id id);
// A snapshot of every parameter, in table order.
std::vector<Entry> snapshot();
// The parameter whose variable name is `name` (exactly, e.g. "NCCL_DEBUG"), if any.
std::optional<Id> find(std::string_view name);
// Every variable name, in table order: static strings, Id::Count of them.
const char* const* names();
const char* sourceName(Source s);
// Logs every parameter that is not at its default (INFO ENV), as NCCL does at init.
void logNonDefault();

// Test-only: replace a value (nullptr restores the environment/default). Not safe while
// other threads read parameters.
void overrideForTest(Id id, const char* value);

}  // namespace tempo::param
