// Reading the topology inputs (switch maps, dumps, hwloc XML) whole.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "src/core/status.h"

namespace tempo::topo {

// The file's bytes; SystemError naming `what` and `path` when it cannot be read.
Result<std::string> readTextFile(const std::string& path, const char* what);

// Calls `fn(line, number)` for every line of `text` (numbered from 1, without its '\n'),
// stopping at and returning the first failure.
Status forEachLine(std::string_view text, const std::function<Status(std::string_view, int)>& fn);

}  // namespace tempo::topo
