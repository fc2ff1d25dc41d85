// tempo-params: every environment variable Tempo reads, with its effective value, where
// that value came from and its default (as `fi_info -e` does for libfabric).
//   tempo-params              table of NAME, value, source, default, description
//   tempo-params --markdown   the same as a Markdown table (the README's)
#include <cstdio>
#include <cstring>
#include <string>

#include "src/core/param.h"

namespace {

std::string escapePipes(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else out += c;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  bool markdown = argc > 1 && !strcmp(argv[1], "--markdown");
  if (argc > 1 && !markdown) {
    fprintf(stderr, "usage: %s [--markdown]\n", argv[0]);
    return 2;
  }
  auto all = tempo::param::snapshot();
  if (markdown) {
    printf("| variable | default | meaning |\n|---|---|---|\n");
    for (const auto& e : all)
      printf("| `%s` | `%s` | %s |\n", e.name, e.shownDefault(),
             escapePipes(e.description).c_str());
    return 0;
  }
  for (const auto& e : all) {
    printf("# %s: %s\n#   value %s (%s), default %s\n", e.name, e.description, e.value.empty() ? "(unset)" : e.value.c_str(),
           tempo::param::sourceName(e.source), e.shownDefault());
  }
  return 0;
}
