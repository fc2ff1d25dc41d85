#include "bench/common/json.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace tempo::bench {

JsonWriter::~JsonWriter() { close(); }

std::string JsonWriter::open(const std::string& path) {
  std::string tryPath = path;
  for (int n = 0;; ++n) {
    int fd = ::open(tryPath.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      fp_ = fdopen(fd, "w");
      return fp_ ? tryPath : std::string();
    }
    if (errno != EEXIST) return std::string();
    tryPath = path + "." + std::to_string(n);
  }
}

void JsonWriter::close() {
  if (fp_) std::fclose(fp_);
  fp_ = nullptr;
  stack_.clear();
}

void JsonWriter::beforeValue() {
  if (stack_.empty()) return;
  switch (stack_.back()) {
    case Key: stack_.pop_back(); break;
    case ListEmpty: stack_.back() = ListSome; break;
    case ListSome: std::fputc(',', fp_); break;
    default: break;  // a value directly in an object is a caller bug; keep the output going
  }
}

void JsonWriter::quoted(const char* s) {
  std::fputc('"', fp_);
  for (; *s; ++s) {
    const unsigned char ch = static_cast<unsigned char>(*s);
    if (ch == '"' || ch == '\\' || ch == '/') {
      std::fputc('\\', fp_);
      std::fputc(ch, fp_);
    } else if (ch == '\n') {
      std::fputs("\\n", fp_);
    } else if (ch == '\t') {
      std::fputs("\\t", fp_);
    } else if (ch >= 0x7F || ch <= 0x1F) {
      break;
    } else {
      std::fputc(ch, fp_);
    }
  }
  std::fputc('"', fp_);
}

void JsonWriter::key(const char* k) {
  if (!fp_) return;
  if (!stack_.empty() && stack_.back() == ObjectSome) std::fputc(',', fp_);
  if (!stack_.empty() && stack_.back() == ObjectEmpty) stack_.back() = ObjectSome;
  quoted(k);
  std::fputc(':', fp_);
  stack_.push_back(Key);
}

void JsonWriter::beginObject() {
  if (!fp_) return;
  beforeValue();
  std::fputc('{', fp_);
  stack_.push_back(ObjectEmpty);
}

void JsonWriter::endObject() {
  if (!fp_) return;
  if (!stack_.empty()) stack_.pop_back();
  std::fputc('}', fp_);
}

void JsonWriter::beginList() {
  if (!fp_) return;
  beforeValue();
  std::fputc('[', fp_);
  stack_.push_back(ListEmpty);
}

void JsonWriter::endList() {
  if (!fp_) return;
  if (!stack_.empty()) stack_.pop_back();
  std::fputc(']', fp_);
}

void JsonWriter::str(const char* s) {
  if (!fp_) return;
  if (!s) return null();
  beforeValue();
  quoted(s);
}

void JsonWriter::integer(long long v) {
  if (!fp_) return;
  beforeValue();
  std::fprintf(fp_, "%lld", v);
}

void JsonWriter::number(double v) {
  if (!fp_) return;
  beforeValue();
  if (v != v) std::fputs("\"nan\"", fp_);
  else if (v - v != 0) std::fputs(v > 0 ? "\"inf\"" : "\"-inf\"", fp_);  // not valid JSON numbers
  else std::fprintf(fp_, "%lf", v);
}

void JsonWriter::null() {
  if (!fp_) return;
  beforeValue();
  std::fputs("null", fp_);
}

}  // namespace tempo::bench
