// Slurm hostlist expressions: "node[01-04,10]", "gpu[000-063]", "a[1-2]-b[1-2]", "n1,n[3-4]".
//
// Grammar: a comma-separated list of items (commas inside brackets belong to the
// bracket); an item is literal text with any number of bracket groups, each a comma list
// of numbers or lo-hi ranges; several groups expand as their cartesian product, left to
// right. A range keeps the width of its lower bound ("01-10" gives 01 .. 10), as Slurm
// does. Expansion order is the written order.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "src/core/status.h"

namespace tempo::topo {

// A hostlist may name at most this many hosts (a typo such as node[1-999999999] is
// refused instead of exhausting memory).
inline constexpr size_t kMaxHostlistHosts = 1 << 20;

// InvalidArgument, naming the expression and the problem, for unbalanced brackets, an
// empty item or range, a range whose bounds are not numbers or run backwards, or more
// than kMaxHostlistHosts names.
Result<std::vector<std::string>> expandHostlist(std::string_view expr);

}  // namespace tempo::topo
