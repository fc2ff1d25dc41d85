// The parameter API (NCCL 2.30): ncclParamBind and the typed getters, the key-based
// ncclParamGetParameter and ncclParamGetAllParameterKeys, and ncclParamDumpAll.
//
// Every key is a variable of Tempo's one parameter table (src/core/param_table.h), by the
// name a user sets: "NCCL_DEBUG", "TEMPO_PACING", ... Values are the ones in effect (the
// environment, then NCCL_CONF_FILE, ~/.rccl.conf, /etc/rccl.conf, then the default), read
// once per process as everywhere else in Tempo. Int parameters read through the typed
// getters, which refuse a value that does not fit the type asked for; string parameters
// through ncclParamGetStr, which also gives any Int parameter's text. TEMPO_SECRET's value
// never leaves the table: it reads as "(set, not shown)" or empty.
//
// Strings and tables handed out stay valid until the same function is next called on the
// same thread, as NCCL documents. Handles live as long as the process.
#include "src/api/entry.h"

#include <array>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

#include "src/core/param.h"

// What an ncclParamHandle_t points at: one entry of the table.
struct ncclParamHandle {
  tempo::param::Id id;
};

namespace {

using tempo::Status;
using tempo::api::guarded;
namespace param = tempo::param;

constexpr int kParams = static_cast<int>(param::Id::Count);

constexpr auto kHandles = [] {
  std::array<ncclParamHandle, kParams> h{};
  for (int i = 0; i < kParams; ++i) h[size_t(i)].id = static_cast<param::Id>(i);
  return h;
}();

// The entry a handle names; refuses NULL and anything ncclParamBind did not return.
tempo::Result<param::Entry> entryOf(const char* func, ncclParamHandle_t h) {
  const auto* p = static_cast<const ncclParamHandle*>(h);
  if (p < kHandles.data() || p >= kHandles.data() + kHandles.size())
    return tempo::fail(Status::InvalidArgument, "%s: %s is not a handle from ncclParamBind", func,
                       h ? "the handle" : "the handle (NULL)");
  return param::entry(p->id);
}

// The typed getters: an Int parameter whose value T can hold.
template <class T>
ncclResult_t getTyped(const char* func, const char* typeName, ncclParamHandle_t h, T* out) {
  return guarded([&]() -> Status {
    TEMPO_ASSIGN(param::Entry e, entryOf(func, h));
    if (!out) return tempo::fail(Status::InvalidArgument, "%s: out is NULL", func);
    if (e.kind != param::Kind::Int)
      return tempo::fail(Status::InvalidArgument, "%s: %s is a string parameter (read it with ncclParamGetStr)", func,
                         e.name);
    const int64_t v = e.number;
    const bool fits = std::numeric_limits<T>::is_signed
                          ? v >= int64_t(std::numeric_limits<T>::min()) && v <= int64_t(std::numeric_limits<T>::max())
                          : v >= 0 && uint64_t(v) <= uint64_t(std::numeric_limits<T>::max());
    if (!fits)
      return tempo::fail(Status::InvalidArgument, "%s: %s is %" PRId64 ", which does not fit in %s", func, e.name, v,
                         typeName);
    *out = T(v);
    return Status::Success;
  });
}

}  // namespace

NCCL_API(ncclResult_t, ncclParamBind, ncclParamHandle_t* out, const char* key) {
  return guarded([&]() -> Status {
    if (!out) return tempo::fail(Status::InvalidArgument, "ncclParamBind: out is NULL");
    if (!key) return tempo::fail(Status::InvalidArgument, "ncclParamBind: key is NULL");
    const auto id = param::find(key);
    if (!id)
      return tempo::fail(Status::InvalidArgument,
                         "ncclParamBind: no parameter is named \"%s\" (ncclParamGetAllParameterKeys lists them)", key);
    *out = const_cast<ncclParamHandle*>(&kHandles[size_t(*id)]);
    return Status::Success;
  });
}

#define TEMPO_PARAM_GETTER(suffix, ctype)                                        \
  NCCL_API(ncclResult_t, ncclParamGet##suffix, ncclParamHandle_t h, ctype* out) { \
    return getTyped("ncclParamGet" #suffix, #ctype, h, out);                     \
  }
TEMPO_PARAM_GETTER(I8, int8_t)
TEMPO_PARAM_GETTER(I16, int16_t)
TEMPO_PARAM_GETTER(I32, int32_t)
TEMPO_PARAM_GETTER(I64, int64_t)
TEMPO_PARAM_GETTER(U8, uint8_t)
TEMPO_PARAM_GETTER(U16, uint16_t)
TEMPO_PARAM_GETTER(U32, uint32_t)
TEMPO_PARAM_GETTER(U64, uint64_t)
#undef TEMPO_PARAM_GETTER

NCCL_API(ncclResult_t, ncclParamGetStr, ncclParamHandle_t h, const char** out) {
  return guarded([&]() -> Status {
    TEMPO_ASSIGN(param::Entry e, entryOf("ncclParamGetStr", h));
    if (!out) return tempo::fail(Status::InvalidArgument, "ncclParamGetStr: out is NULL");
    thread_local std::string text;
    text = std::move(e.value);
    *out = text.c_str();
    return Status::Success;
  });
}

// The value's own bytes: an Int parameter's int64_t, a string parameter's characters and
// their terminating NUL.
NCCL_API(ncclResult_t, ncclParamGet, ncclParamHandle_t h, void* out, int maxLen, int* len) {
  return guarded([&]() -> Status {
    TEMPO_ASSIGN(param::Entry e, entryOf("ncclParamGet", h));
    if (!out || !len) return tempo::fail(Status::InvalidArgument, "ncclParamGet: %s is NULL", out ? "len" : "out");
    const bool isInt = e.kind == param::Kind::Int;
    const size_t need = isInt ? sizeof(int64_t) : e.value.size() + 1;
    if (maxLen < 0 || size_t(maxLen) < need) {
      *len = int(need);
      return tempo::fail(Status::InvalidArgument, "ncclParamGet: %s needs %zu bytes, maxLen is %d", e.name, need,
                         maxLen);
    }
    std::memcpy(out, isInt ? static_cast<const void*>(&e.number) : e.value.c_str(), need);
    *len = int(need);
    return Status::Success;
  });
}

NCCL_API(ncclResult_t, ncclParamGetParameter, const char* key, const char** value, int* valueLen) {
  return guarded([&]() -> Status {
    if (!key || !value || !valueLen)
      return tempo::fail(Status::InvalidArgument, "ncclParamGetParameter: %s is NULL",
                         !key ? "key" : !value ? "value" : "valueLen");
    *value = nullptr;
    *valueLen = 0;
    const auto id = param::find(key);
    if (!id) return tempo::fail(Status::InvalidArgument, "ncclParamGetParameter: no parameter is named \"%s\"", key);
    thread_local std::string text;
    text = param::entry(*id).value;
    *value = text.c_str();
    *valueLen = int(text.size());
    return Status::Success;
  });
}

NCCL_API(ncclResult_t, ncclParamGetAllParameterKeys, const char*** table, int* tableLen) {
  return guarded([&]() -> Status {
    if (!table || !tableLen)
      return tempo::fail(Status::InvalidArgument, "ncclParamGetAllParameterKeys: %s is NULL",
                         table ? "tableLen" : "table");
    // The names are static; NCCL's signature hands out a non-const table.
    *table = const_cast<const char**>(param::names());
    *tableLen = kParams;
    return Status::Success;
  });
}

// Every parameter, its value in effect and where that came from, on stdout (as NCCL's).
NCCL_API(void, ncclParamDumpAll, void) {
  (void)guarded([] {
    printf("=== Tempo parameters (%d) ===\n", kParams);
    for (const param::Entry& e : param::snapshot())
      printf("%s=%s (%s)\n", e.name, e.value.c_str(), param::sourceName(e.source));
    fflush(stdout);
    return Status::Success;
  });
}
