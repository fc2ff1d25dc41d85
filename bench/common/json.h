// A minimal streaming JSON writer for the -J report (nccl-tests' util.cu layout): keys and
// values are written in order; the writer inserts commas and checks nesting with a stack.
// Strings are escaped for '"', '\\', '/', '\t' and '\n'; other control or non-ASCII bytes
// end the string early, as nccl-tests does.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace tempo::bench {

class JsonWriter {
 public:
  JsonWriter() = default;
  ~JsonWriter();
  JsonWriter(const JsonWriter&) = delete;
  JsonWriter& operator=(const JsonWriter&) = delete;

  // Opens `path` for exclusive creation; if it exists, tries path.0, path.1, ...
  // Returns the path used, or "" (and writes nothing later) when it cannot be created.
  std::string open(const std::string& path);
  bool active() const { return fp_ != nullptr; }
  void close();

  void key(const char* k);
  void beginObject();
  void endObject();
  void beginList();
  void endList();
  void str(const char* s);
  void boolStr(bool b) { str(b ? "true" : "false"); }  // nccl-tests writes booleans as strings
  void integer(long long v);
  void number(double v);  // "%lf"; NaN as the string "nan"
  void null();

 private:
  enum State { Key, ObjectEmpty, ObjectSome, ListEmpty, ListSome };
  void beforeValue();
  void quoted(const char* s);

  FILE* fp_ = nullptr;
  std::vector<State> stack_;
};

}  // namespace tempo::bench
