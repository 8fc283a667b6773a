// One-line JSON records for scripts (`--json`): flat objects of strings and numbers.
#pragma once

#include <cmath>
#include <cstdio>
#include <string>

namespace longattn::tools {

class JsonLine {
 public:
  JsonLine& str(const char* key, const std::string& v) {
    std::string e;
    for (char c : v) {
      if (c == '"' || c == '\\') e += '\\';
      if (static_cast<unsigned char>(c) >= 0x20) e += c;
    }
    return raw(key, "\"" + e + "\"");
  }
  JsonLine& num(const char* key, double v) {
    char b[64];
    // JSON has no inf/nan: write null (e.g. an error that could not be measured).
    if (!std::isfinite(v)) return raw(key, "null");
    std::snprintf(b, sizeof b, "%.6g", v);
    return raw(key, b);
  }
  JsonLine& boolean(const char* key, bool v) { return raw(key, v ? "true" : "false"); }
  void print() const { std::printf("{%s}\n", body_.c_str()); }

 private:
  JsonLine& raw(const char* key, const std::string& v) {
    if (!body_.empty()) body_ += ", ";
    body_ += "\"" + std::string(key) + "\": " + v;
    return *this;
  }
  std::string body_;
};

}  // namespace longattn::tools
