// .npy format: magic "\x93NUMPY", version (major, minor), header length (uint16 for v1,
// uint32 for v2/v3), then a Python dict literal padded with spaces to a multiple of 64 bytes
// ending in '\n', then the raw data.
#include "npy_io.h"

#include <cctype>
#include <cstring>
#include <fstream>
#include <stdexcept>

namespace longattn::tools {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& why) {
  throw std::runtime_error(path + ": " + why);
}

// Minimal cursor over the header dict; the syntax numpy writes is small and fixed.
struct Cursor {
  const std::string& s;
  size_t i = 0;
  void skip() {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  }
  bool eat(char c) {
    skip();
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  bool quoted(std::string* out) {
    skip();
    if (i >= s.size() || (s[i] != '\'' && s[i] != '"')) return false;
    char q = s[i++];
    size_t end = s.find(q, i);
    if (end == std::string::npos) return false;
    *out = s.substr(i, end - i);
    i = end + 1;
    return true;
  }
  bool word(std::string* out) {
    skip();
    size_t b = i;
    while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_')) ++i;
    *out = s.substr(b, i - b);
    return i > b;
  }
};

// Maps a descr to a dtype; `f64` is set for '<f8' (converted to f32 after reading).
bool descr_dtype(const std::string& d, DType* t, bool* f64) {
  *f64 = false;
  if (d == "<f4" || d == "=f4") *t = DType::f32;
  else if (d == "<f2" || d == "=f2") *t = DType::f16;
  else if (d == "<f8" || d == "=f8") { *t = DType::f32; *f64 = true; }
  else if (d == "<i4" || d == "=i4") *t = DType::i32;
  // ml_dtypes' bfloat16 has no numpy type code: np.save writes it as a 2-byte void.
  else if (d == "<V2" || d == "|V2" || d == "V2" || d.find("bfloat16") != std::string::npos)
    *t = DType::bf16;
  else if (d == "|V1" || d == "<V1" || d == "V1" || d.find("e4m3") != std::string::npos)
    *t = DType::e4m3;
  else return false;
  return true;
}

const char* dtype_descr(DType t) {
  switch (t) {
    case DType::f32: return "<f4";
    case DType::f16: return "<f2";
    case DType::bf16: return "<V2";
    case DType::e4m3: return "|V1";
    case DType::i32: return "<i4";
  }
  return "<f4";
}

}  // namespace

bool parse_npy_header(const std::string& header, std::string* descr, bool* fortran,
                      std::vector<int64_t>* shape) {
  Cursor c{header};
  if (!c.eat('{')) return false;
  bool got_descr = false, got_shape = false;
  *fortran = false;
  shape->clear();
  while (!c.eat('}')) {
    std::string key;
    if (!c.quoted(&key) || !c.eat(':')) return false;
    if (key == "descr") {
      // A structured dtype (a list) is not an array of numbers.
      if (!c.quoted(descr)) return false;
      got_descr = true;
    } else if (key == "fortran_order") {
      std::string w;
      if (!c.word(&w) || (w != "True" && w != "False")) return false;
      *fortran = (w == "True");
    } else if (key == "shape") {
      if (!c.eat('(')) return false;
      while (!c.eat(')')) {
        std::string w;
        if (!c.word(&w)) return false;
        for (char ch : w)
          if (!std::isdigit(static_cast<unsigned char>(ch))) return false;
        shape->push_back(std::stoll(w));
        c.eat(',');
      }
      got_shape = true;
    } else {
      return false;
    }
    c.eat(',');
  }
  return got_descr && got_shape;
}

HostArray read_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(path, "cannot open");
  char magic[8];
  if (!f.read(magic, 8) || std::memcmp(magic, "\x93NUMPY", 6) != 0)
    fail(path, "not an .npy file (bad magic)");
  int major = static_cast<unsigned char>(magic[6]);
  uint32_t hlen = 0;
  if (major == 1) {
    unsigned char b[2];
    if (!f.read(reinterpret_cast<char*>(b), 2)) fail(path, "truncated header");
    hlen = b[0] | (b[1] << 8);
  } else if (major == 2 || major == 3) {
    unsigned char b[4];
    if (!f.read(reinterpret_cast<char*>(b), 4)) fail(path, "truncated header");
    hlen = b[0] | (b[1] << 8) | (b[2] << 16) | (uint32_t(b[3]) << 24);
  } else {
    fail(path, "unsupported .npy version " + std::to_string(major));
  }
  if (hlen > (1u << 20)) fail(path, "header too long");
  std::string header(hlen, '\0');
  if (!f.read(header.data(), hlen)) fail(path, "truncated header");

  std::string descr;
  bool fortran = false;
  HostArray a;
  if (!parse_npy_header(header, &descr, &fortran, &a.shape))
    fail(path, "cannot parse header " + header);
  if (fortran) fail(path, "Fortran-order arrays are not supported (save a C-contiguous array)");
  bool f64 = false;
  if (!descr_dtype(descr, &a.dtype, &f64))
    fail(path, "unsupported dtype '" + descr + "' (use float32, float16, float64 or bfloat16)");

  const int64_t n = a.numel();
  const int64_t file_elem = f64 ? 8 : dtype_size(a.dtype);
  std::vector<uint8_t> raw(static_cast<size_t>(n * file_elem));
  if (!f.read(reinterpret_cast<char*>(raw.data()), static_cast<std::streamsize>(raw.size())))
    fail(path, "file shorter than its shape says (" + std::to_string(n) + " elements)");
  if (f64) {
    a.bytes.resize(static_cast<size_t>(n * 4));
    for (int64_t i = 0; i < n; ++i) {
      double d;
      std::memcpy(&d, raw.data() + i * 8, 8);
      float x = static_cast<float>(d);
      std::memcpy(a.bytes.data() + i * 4, &x, 4);
    }
  } else {
    a.bytes = std::move(raw);
  }
  return a;
}

void write_npy(const std::string& path, const HostArray& a) {
  std::string header = std::string("{'descr': '") + dtype_descr(a.dtype) +
                       "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < a.shape.size(); ++i) {
    header += std::to_string(a.shape[i]);
    if (a.shape.size() == 1 || i + 1 < a.shape.size()) header += ",";
    if (i + 1 < a.shape.size()) header += " ";
  }
  header += "), }";
  // Pad so that magic(6) + version(2) + length(2) + header is a multiple of 64, ending in \n.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  if (!f) fail(path, "cannot open for writing");
  const char pre[8] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0};
  f.write(pre, 8);
  const unsigned char len[2] = {static_cast<unsigned char>(header.size() & 0xff),
                                static_cast<unsigned char>(header.size() >> 8)};
  f.write(reinterpret_cast<const char*>(len), 2);
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  f.write(reinterpret_cast<const char*>(a.bytes.data()), static_cast<std::streamsize>(a.bytes.size()));
  if (!f) fail(path, "write failed");
}

}  // namespace longattn::tools
