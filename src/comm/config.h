// ncclConfig_t parsing with NCCL's compatibility rules.
//
// A binary built against an older header passes a smaller struct with an older
// `version`: only `size` bytes are read, fields newer than `version` are treated as
// unset, and a struct whose magic is not NCCL_API_MAGIC is rejected. NCCL_* environment
// overrides apply after that, then defaults fill what is still unset.
#pragma once

#include <string>

#include "rccl/rccl.h"
#include "src/core/status.h"

namespace tempo::comm {

struct Config {
  ncclConfig_t raw;     // every field resolved (no NCCL_CONFIG_UNDEF_* left, except pointers)
  bool blocking = true;
  std::string netName;  // copies: the user's strings need not outlive the call
  std::string commName;
};

// `user` may be null (defaults).
Result<Config> parseConfig(const ncclConfig_t* user);

}  // namespace tempo::comm
