#include "src/topo/text_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace tempo::topo {

Result<std::string> readTextFile(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(Status::SystemError, "cannot read the %s %s: %s", what, path.c_str(), std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return fail(Status::SystemError, "reading the %s %s failed", what, path.c_str());
  return text.str();
}

Status forEachLine(std::string_view text, const std::function<Status(std::string_view, int)>& fn) {
  int number = 0;
  for (size_t pos = 0; pos <= text.size();) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    TEMPO_TRY(fn(text.substr(pos, end - pos), ++number));
    pos = end + 1;
  }
  return Status::Success;
}

}  // namespace tempo::topo
