#include "src/topo/switch_map.h"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "src/topo/hostlist.h"
#include "src/topo/text_file.h"

namespace tempo::topo {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::vector<int> SwitchMap::pathOf(const std::string& host) const {
  std::vector<int> path;
  auto it = leafOf.find(host);
  if (it == leafOf.end()) return path;
  for (int s = it->second; s >= 0; s = switches[size_t(s)].parent) path.push_back(s);
  return path;
}

int SwitchMap::height() const {
  int h = -1;
  for (const Switch& s : switches) h = std::max(h, s.level);
  return h;
}

Result<SwitchMap> parseSwitchMap(std::string_view text, const std::string& source) {
  SwitchMap map;
  std::unordered_map<std::string, int> byName;
  struct Pending {
    int parent;
    std::string child;
    int line;
  };
  std::vector<Pending> childRefs;

  // Pass 1: one switch per line, its hosts and the names of its child switches.
  TEMPO_TRY(forEachLine(text, [&](std::string_view line, int lineNo) -> Status {
    if (const size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    std::istringstream words{std::string(line)};
    std::string name, nodes, children;
    bool any = false;
    for (std::string word; words >> word;) {
      any = true;
      const size_t eq = word.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == word.size())
        return fail(Status::InvalidArgument, "%s:%d: '%s' is not KEY=VALUE", source.c_str(), lineNo, word.c_str());
      const std::string key = lower(std::string_view(word).substr(0, eq));
      const std::string value = word.substr(eq + 1);
      if (key == "switchname") name = value;
      else if (key == "nodes") nodes = value;
      else if (key == "switches") children = value;
      else if (key == "linkspeed") continue;
      else
        return fail(Status::InvalidArgument, "%s:%d: unknown key '%s' (expected SwitchName, Nodes, Switches or LinkSpeed)",
                    source.c_str(), lineNo, word.substr(0, eq).c_str());
    }
    if (!any) return Status::Success;
    if (name.empty()) return fail(Status::InvalidArgument, "%s:%d: a line without SwitchName=", source.c_str(), lineNo);
    if (byName.count(name))
      return fail(Status::InvalidArgument, "%s:%d: switch '%s' is defined twice", source.c_str(), lineNo, name.c_str());
    const int index = int(map.switches.size());
    byName[name] = index;
    map.switches.push_back({name, -1, 0, {}, {}});
    if (!nodes.empty()) {
      TEMPO_ASSIGN(auto hosts, expandHostlist(nodes));
      for (std::string& h : hosts) {
        auto [it, fresh] = map.leafOf.emplace(h, index);
        if (!fresh)
          return fail(Status::InvalidArgument, "%s:%d: host '%s' is under both '%s' and '%s'", source.c_str(), lineNo,
                      h.c_str(), map.switches[size_t(it->second)].name.c_str(), name.c_str());
        map.switches.back().hosts.push_back(std::move(h));
      }
    }
    if (!children.empty()) {
      TEMPO_ASSIGN(auto names, expandHostlist(children));
      for (std::string& c : names) childRefs.push_back({index, std::move(c), lineNo});
    }
    return Status::Success;
  }));

  // Pass 2: link children to parents (each switch has at most one parent).
  for (const Pending& p : childRefs) {
    auto it = byName.find(p.child);
    if (it == byName.end())
      return fail(Status::InvalidArgument, "%s:%d: switch '%s' is never defined", source.c_str(), p.line,
                  p.child.c_str());
    SwitchMap::Switch& child = map.switches[size_t(it->second)];
    if (child.parent >= 0)
      return fail(Status::InvalidArgument, "%s:%d: switch '%s' is under both '%s' and '%s'", source.c_str(), p.line,
                  child.name.c_str(), map.switches[size_t(child.parent)].name.c_str(),
                  map.switches[size_t(p.parent)].name.c_str());
    child.parent = p.parent;
    map.switches[size_t(p.parent)].children.push_back(it->second);
  }

  // Pass 3: levels, walking up from every switch; a walk longer than the switch count
  // means a cycle.
  const size_t n = map.switches.size();
  for (size_t s = 0; s < n; ++s) {
    int level = 0;
    size_t steps = 0;
    for (int at = int(s); map.switches[size_t(at)].parent >= 0; at = map.switches[size_t(at)].parent) {
      if (++steps > n)
        return fail(Status::InvalidArgument, "%s: switches form a cycle through '%s'", source.c_str(),
                    map.switches[s].name.c_str());
      SwitchMap::Switch& parent = map.switches[size_t(map.switches[size_t(at)].parent)];
      parent.level = std::max(parent.level, ++level);
    }
  }
  return map;
}

Result<SwitchMap> loadSwitchMap(const std::string& path) {
  TEMPO_ASSIGN(std::string text, readTextFile(path, "switch map"));
  return parseSwitchMap(text, path);
}

}  // namespace tempo::topo
