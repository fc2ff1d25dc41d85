#include "src/topo/hostlist.h"

#include <cstdio>

namespace tempo::topo {
namespace {

Status bad(std::string_view expr, const char* why) {
  return fail(Status::InvalidArgument, "hostlist '%.*s': %s", int(expr.size()), expr.data(), why);
}

// Splits on commas outside brackets.
std::vector<std::string_view> topLevelItems(std::string_view s) {
  std::vector<std::string_view> out;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || (s[i] == ',' && depth == 0)) {
      out.push_back(s.substr(start, i - start));
      start = i + 1;
    } else if (s[i] == '[') {
      ++depth;
    } else if (s[i] == ']') {
      --depth;
    }
  }
  return out;
}

bool parseNumber(std::string_view s, unsigned long long* v) {
  if (s.empty() || s.size() > 18) return false;
  *v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    *v = *v * 10 + unsigned(c - '0');
  }
  return true;
}

// The names one bracket group ("01-04,10") stands for, zero-padded like their lower bounds.
Status expandGroup(std::string_view expr, std::string_view group, std::vector<std::string>* out) {
  size_t start = 0;
  for (size_t i = 0; i <= group.size(); ++i) {
    if (i < group.size() && group[i] != ',') continue;
    std::string_view part = group.substr(start, i - start);
    start = i + 1;
    const size_t dash = part.find('-');
    std::string_view lo = part.substr(0, dash), hi = dash == std::string_view::npos ? lo : part.substr(dash + 1);
    unsigned long long a, b;
    if (!parseNumber(lo, &a) || !parseNumber(hi, &b)) return bad(expr, "a bracket holds something other than numbers and lo-hi ranges");
    if (b < a) return bad(expr, "a range runs backwards");
    if (b - a >= kMaxHostlistHosts || out->size() + (b - a + 1) > kMaxHostlistHosts)
      return bad(expr, "it names more than 1048576 hosts");
    for (unsigned long long v = a; v <= b; ++v) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%0*llu", int(lo.size()), v);
      out->push_back(buf);
    }
  }
  return Status::Success;
}

}  // namespace

Result<std::vector<std::string>> expandHostlist(std::string_view expr) {
  std::vector<std::string> hosts;
  for (std::string_view item : topLevelItems(expr)) {
    if (item.empty()) return bad(expr, "an empty name");
    // Expand the item group by group: `partial` holds every prefix expanded so far.
    std::vector<std::string> partial{""};
    size_t i = 0;
    while (i < item.size()) {
      const size_t open = item.find('[', i);
      const size_t close = item.find(']', i);
      if (close != std::string_view::npos && (open == std::string_view::npos || close < open))
        return bad(expr, "a ']' without its '['");
      const std::string_view literal = item.substr(i, open == std::string_view::npos ? item.npos : open - i);
      for (std::string& p : partial) p.append(literal);
      if (open == std::string_view::npos) break;
      if (close == std::string_view::npos) return bad(expr, "a '[' without its ']'");
      const std::string_view inner = item.substr(open + 1, close - open - 1);
      if (inner.find('[') != std::string_view::npos) return bad(expr, "nested brackets");
      std::vector<std::string> names;
      TEMPO_TRY(expandGroup(expr, inner, &names));
      if (partial.size() * names.size() + hosts.size() > kMaxHostlistHosts)
        return bad(expr, "it names more than 1048576 hosts");
      std::vector<std::string> next;
      next.reserve(partial.size() * names.size());
      for (const std::string& p : partial)
        for (const std::string& n : names) next.push_back(p + n);
      partial = std::move(next);
      i = close + 1;
    }
    for (std::string& p : partial) hosts.push_back(std::move(p));
  }
  return hosts;
}

}  // namespace tempo::topo
