#include "tools/npy/npy.hpp"

#include <atomic>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <system_error>

#if __has_include(<unistd.h>)
#include <unistd.h>
#define FMHA_NPY_HAVE_POSIX 1
#endif

namespace fmha_jit::npy {
namespace {

constexpr uint8_t kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

// The dtype each element type is stored as; both are 4 bytes, so one byte swap serves both on
// big-endian hosts.
template <class T>
struct Dtype;
template <>
struct Dtype<float> {
  static constexpr std::string_view descr = "<f4";
  static constexpr std::string_view name = "float32";
  static constexpr std::string_view accepted = "'<f4' (float32)";
};
template <>
struct Dtype<int32_t> {
  static constexpr std::string_view descr = "<i4";
  static constexpr std::string_view name = "int32";
  static constexpr std::string_view accepted = "'<i4' (int32)";
};
static_assert(sizeof(float) == 4 && sizeof(int32_t) == 4);

std::string shape_repr(std::span<const int64_t> shape) {
  // Python's repr of a tuple: "()", "(5,)", "(2, 3)".
  std::string out = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(shape[i]);
  }
  if (shape.size() == 1) out += ",";
  return out + ")";
}

// A printable rendering of untrusted text for error messages: at most 40 characters, anything
// outside printable ASCII as \xNN.
std::string quote_excerpt(std::string_view text) {
  std::string out;
  const size_t n = std::min<size_t>(text.size(), 40);
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    }
  }
  if (text.size() > n) out += "...";
  return out;
}

// Used on big-endian hosts only (the branches that call it are discarded on little-endian ones).
[[maybe_unused]] uint32_t bswap32(uint32_t x) {
  return (x >> 24) | ((x >> 8) & 0xff00u) | ((x << 8) & 0xff0000u) | (x << 24);
}

// Strict hand-written parser of the header dict, a Python literal such as
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// The grammar accepted is flat (string, bool, tuple of ints), so there is no recursion to exhaust
// the stack, and every read is bound-checked against the header's end.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, std::string_view name, bool allow_long_suffix,
               std::string_view accepted_dtype)
      : text_(text),
        name_(name),
        allow_long_suffix_(allow_long_suffix),
        accepted_dtype_(accepted_dtype) {}

  struct Header {
    std::string descr;
    bool fortran_order = false;
    std::vector<int64_t> shape;
  };

  Header parse() {
    Header h;
    bool have_descr = false, have_order = false, have_shape = false;
    skip_ws();
    expect('{', "the header dict to start");
    skip_ws();
    while (!at_end() && peek() != '}') {
      const std::string key = parse_string("a dict key");
      skip_ws();
      expect(':', "':' after key '" + key + "'");
      skip_ws();
      if (key == "descr") {
        check_unique(have_descr, key);
        if (!at_end() && peek() == '[') {
          fail("dtype is structured (descr is a list); expected " + std::string(accepted_dtype_));
        }
        h.descr = parse_string("the descr string");
      } else if (key == "fortran_order") {
        check_unique(have_order, key);
        h.fortran_order = parse_bool();
      } else if (key == "shape") {
        check_unique(have_shape, key);
        h.shape = parse_shape();
      } else {
        fail("unexpected header key '" + quote_excerpt(key) +
             "'; expected only 'descr', 'fortran_order' and 'shape'");
      }
      skip_ws();
      if (!at_end() && peek() == ',') {
        ++pos_;
        skip_ws();
      } else if (at_end() || peek() != '}') {
        fail_here("',' or '}' after the value of '" + key + "'");
      }
    }
    expect('}', "'}' to close the header dict");
    skip_ws();
    if (!at_end()) fail_here("end of header after '}'");
    if (!have_descr || !have_order || !have_shape) {
      std::string missing;
      for (auto [have, key] :
           {std::pair{have_descr, "'descr'"}, std::pair{have_order, "'fortran_order'"},
            std::pair{have_shape, "'shape'"}}) {
        if (!have) missing += (missing.empty() ? "" : ", ") + std::string(key);
      }
      fail("header is missing " + missing);
    }
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw FormatError(std::string(name_) + ": " + what);
  }

  [[noreturn]] void fail_here(const std::string& expected) const {
    const std::string found =
        at_end() ? "end of header" : "'" + quote_excerpt(text_.substr(pos_)) + "'";
    fail("malformed header at offset " + std::to_string(pos_) + ": expected " + expected +
         ", found " + found);
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return text_[pos_]; }  // only after !at_end()

  void skip_ws() {
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r')) {
      ++pos_;
    }
  }

  void expect(char c, const std::string& what) {
    if (at_end() || peek() != c) fail_here(what);
    ++pos_;
  }

  void check_unique(bool& seen, const std::string& key) const {
    if (seen) fail("header key '" + key + "' appears twice");
    seen = true;
  }

  // A quoted string without escapes (numpy never writes any in the keys or a simple descr).
  std::string parse_string(const std::string& what) {
    if (at_end() || (peek() != '\'' && peek() != '"')) fail_here(what + " (a quoted string)");
    const char quote = peek();
    const size_t start = ++pos_;
    while (!at_end() && peek() != quote) {
      if (peek() == '\\' || peek() == '\n') fail_here(what + " without escapes or newlines");
      ++pos_;
    }
    if (at_end()) fail_here("closing quote of " + what);
    const std::string out(text_.substr(start, pos_ - start));
    ++pos_;
    return out;
  }

  bool parse_bool() {
    for (auto [word, value] :
         {std::pair{std::string_view("True"), true}, std::pair{std::string_view("False"), false}}) {
      if (text_.substr(pos_, word.size()) == word) {
        const size_t end = pos_ + word.size();
        const bool boundary =
            end >= text_.size() ||
            !(std::isalnum(static_cast<unsigned char>(text_[end])) || text_[end] == '_');
        if (boundary) {
          pos_ = end;
          return value;
        }
      }
    }
    fail_here("True or False for 'fortran_order'");
  }

  int64_t parse_dim() {
    if (!at_end() && peek() == '-') fail("negative dimension in shape");
    if (at_end() || peek() < '0' || peek() > '9') fail_here("a non-negative integer dimension");
    const size_t start = pos_;
    int64_t value = 0;
    while (!at_end() && peek() >= '0' && peek() <= '9') {
      const int digit = peek() - '0';
      if (value > (std::numeric_limits<int64_t>::max() - digit) / 10) {
        fail("dimension in shape exceeds int64");
      }
      value = value * 10 + digit;
      ++pos_;
    }
    if (pos_ - start > 1 && text_[start] == '0') fail("dimension with a leading zero in shape");
    if (allow_long_suffix_ && !at_end() && (peek() == 'L' || peek() == 'l')) ++pos_;  // Python 2
    return value;
  }

  std::vector<int64_t> parse_shape() {
    expect('(', "a tuple for 'shape'");
    std::vector<int64_t> shape;
    skip_ws();
    bool trailing_comma = false;
    while (!at_end() && peek() != ')') {
      if (shape.size() >= kMaxDims) {
        fail("shape has more than " + std::to_string(kMaxDims) + " dimensions");
      }
      shape.push_back(parse_dim());
      skip_ws();
      trailing_comma = false;
      if (!at_end() && peek() == ',') {
        ++pos_;
        trailing_comma = true;
        skip_ws();
      } else if (at_end() || peek() != ')') {
        fail_here("',' or ')' in the shape tuple");
      }
    }
    expect(')', "')' to close the shape tuple");
    // (5) is the integer 5 in Python, not a tuple.
    if (shape.size() == 1 && !trailing_comma) fail("shape (N) is not a tuple; expected (N,)");
    return shape;
  }

  std::string_view text_;
  std::string_view name_;
  bool allow_long_suffix_;
  std::string_view accepted_dtype_;
  size_t pos_ = 0;
};

uint64_t read_le(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void check_write_shape(std::span<const int64_t> shape, size_t data_size) {
  if (shape.size() > kMaxDims) {
    throw std::invalid_argument("npy: shape has " + std::to_string(shape.size()) +
                                " dimensions; at most " + std::to_string(kMaxDims));
  }
  int64_t count = 0;
  try {
    count = element_count(shape);
  } catch (const FormatError&) {
    throw std::invalid_argument("npy: invalid shape " + shape_repr(shape));
  }
  if (static_cast<uint64_t>(count) != data_size) {
    throw std::invalid_argument("npy: shape " + shape_repr(shape) + " holds " +
                                std::to_string(count) + " elements but " +
                                std::to_string(data_size) + " were given");
  }
}

std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

}  // namespace

int64_t element_count(std::span<const int64_t> shape) {
  int64_t count = 1;
  bool zero = false;
  for (int64_t d : shape) {
    if (d < 0) throw FormatError("npy: negative dimension " + std::to_string(d));
    if (d == 0) zero = true;
  }
  if (zero) return 0;  // a zero dimension empties the array whatever the others are
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(count, d, &count)) {
      throw FormatError("npy: shape " + shape_repr(shape) + " overflows int64");
    }
  }
  return count;
}

namespace {

template <class T>
BasicArray<T> parse_as(std::span<const uint8_t> bytes, std::string_view name) {
  auto fail = [&](const std::string& what) -> FormatError {
    return FormatError(std::string(name) + ": " + what);
  };
  if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    throw fail("not a .npy file (it does not start with the \\x93NUMPY magic)");
  }
  if (bytes.size() < 10) {
    throw fail("file too short (" + std::to_string(bytes.size()) + " bytes) for a .npy header");
  }
  const int major = bytes[6], minor = bytes[7];
  if (major < 1 || major > 3 || minor != 0) {
    throw fail("unsupported .npy format version " + std::to_string(major) + "." +
               std::to_string(minor) + "; expected 1.0, 2.0 or 3.0");
  }
  const size_t len_bytes = major == 1 ? 2 : 4;
  const size_t prefix = 8 + len_bytes;
  if (bytes.size() < prefix) {
    throw fail("file too short (" + std::to_string(bytes.size()) + " bytes) for a version " +
               std::to_string(major) + ".0 header length");
  }
  const uint64_t header_len = read_le(bytes.data() + 8, static_cast<int>(len_bytes));
  if (header_len > bytes.size() - prefix) {
    throw fail("header length " + std::to_string(header_len) + " exceeds the " +
               std::to_string(bytes.size() - prefix) + " bytes after the prefix");
  }
  const std::string_view header(reinterpret_cast<const char*>(bytes.data() + prefix),
                                static_cast<size_t>(header_len));
  for (size_t i = 0; i < header.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(header[i]);
    if ((c < 0x20 || c > 0x7e) && c != '\n' && c != '\r' && c != '\t') {
      char buf[64];
      std::snprintf(buf, sizeof buf, "header has byte 0x%02x at offset %zu", c, i);
      throw fail(std::string(buf) + "; expected a printable ASCII Python dict");
    }
  }

  HeaderParser parser(header, name, /*allow_long_suffix=*/major < 3, Dtype<T>::accepted);
  HeaderParser::Header h = parser.parse();
  if (h.descr != Dtype<T>::descr) {
    std::string found = "dtype '" + quote_excerpt(h.descr) + "' not supported";
    if (h.descr == ">" + std::string(Dtype<T>::descr.substr(1))) found += " (big-endian)";
    throw fail(found + "; expected " + std::string(Dtype<T>::accepted));
  }
  if (h.fortran_order) {
    throw fail("fortran_order True (column-major) not supported; expected C order");
  }
  int64_t count = 0;
  try {
    count = element_count(h.shape);
  } catch (const FormatError&) {
    throw fail("shape " + shape_repr(h.shape) + " has more elements than int64 can count");
  }
  const size_t data_offset = prefix + static_cast<size_t>(header_len);
  const size_t available = bytes.size() - data_offset;
  // Compare before multiplying (count * 4 can overflow) and before allocating, so that the
  // allocation is bounded by the size of the input.
  if (static_cast<uint64_t>(count) > available / sizeof(T)) {
    throw fail("data is " + std::to_string(available) + " bytes but shape " + shape_repr(h.shape) +
               " needs " + std::to_string(count) + " " + std::string(Dtype<T>::name) + " elements");
  }
  const uint64_t needed = static_cast<uint64_t>(count) * sizeof(T);
  if (needed < available) {
    throw fail(std::to_string(available - needed) + " trailing bytes after the " +
               std::to_string(needed) + " bytes of data of shape " + shape_repr(h.shape));
  }
  BasicArray<T> out;
  out.shape = std::move(h.shape);
  out.data.resize(static_cast<size_t>(count));
  if (count > 0) std::memcpy(out.data.data(), bytes.data() + data_offset, needed);
  if constexpr (std::endian::native == std::endian::big) {
    for (T& x : out.data) x = std::bit_cast<T>(bswap32(std::bit_cast<uint32_t>(x)));
  }
  return out;
}

std::vector<uint8_t> read_file(const std::filesystem::path& path) {
  const std::string name = path.string();
  std::FILE* f = std::fopen(name.c_str(), "rb");
  if (f == nullptr) throw IoError(name + ": cannot open: " + errno_text(errno));
  std::vector<uint8_t> bytes;
  uint8_t buf[1 << 16];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) bytes.insert(bytes.end(), buf, buf + n);
  const bool error = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (error) throw IoError(name + ": read failed: " + errno_text(err));
  return bytes;
}

template <class T>
std::vector<uint8_t> serialize_as(std::span<const int64_t> shape, std::span<const T> data) {
  check_write_shape(shape, data.size());
  std::string header = "{'descr': '" + std::string(Dtype<T>::descr) +
                       "', 'fortran_order': False, 'shape': " + shape_repr(shape) + ", }";
  // Like numpy (>= 1.24), leave room for the first axis to grow to 21 digits so the file can be
  // appended to in place; then pad with spaces so that magic (6) + version (2) + length (2) +
  // header + '\n' is a multiple of 64. The result is byte-identical to numpy.save.
  if (!shape.empty()) header.append(21 - std::to_string(shape[0]).size(), ' ');
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  if (header.size() > 0xffff) throw std::invalid_argument("npy: header too long for version 1.0");
  std::vector<uint8_t> out(kMagic, kMagic + sizeof kMagic);
  out.push_back(1);
  out.push_back(0);
  out.push_back(static_cast<uint8_t>(header.size() & 0xff));
  out.push_back(static_cast<uint8_t>(header.size() >> 8));
  out.insert(out.end(), header.begin(), header.end());
  const size_t data_offset = out.size();
  out.resize(data_offset + data.size() * sizeof(T));
  if (!data.empty()) std::memcpy(out.data() + data_offset, data.data(), data.size_bytes());
  if constexpr (std::endian::native == std::endian::big) {
    for (size_t i = 0; i < data.size(); ++i) {
      const uint32_t le = bswap32(std::bit_cast<uint32_t>(data[i]));
      std::memcpy(out.data() + data_offset + 4 * i, &le, 4);
    }
  }
  return out;
}

void write_bytes(const std::filesystem::path& path, const std::vector<uint8_t>& bytes) {
  const std::string name = path.string();
  // A name unique to this process and call, in the target's folder so the rename is atomic.
  static std::atomic<uint64_t> counter{0};
  std::string suffix = ".tmp-";
#ifdef FMHA_NPY_HAVE_POSIX
  suffix += std::to_string(static_cast<long long>(::getpid()));
#else
  suffix += std::to_string(std::random_device{}());
#endif
  suffix += '-';
  suffix += std::to_string(counter.fetch_add(1));
  std::filesystem::path tmp = path;
  tmp += suffix;
  const std::string tmp_name = tmp.string();

  std::FILE* f = std::fopen(tmp_name.c_str(), "wb");
  if (f == nullptr) throw IoError(name + ": cannot create " + tmp_name + ": " + errno_text(errno));
  int err = 0;  // the first failure's errno (EIO when the library left errno unset)
  auto failed = [&err] {
    if (err == 0) err = errno != 0 ? errno : EIO;
  };
  errno = 0;
  if (std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() || std::fflush(f) != 0) {
    failed();
  }
#ifdef FMHA_NPY_HAVE_POSIX
  if (err == 0 && ::fsync(::fileno(f)) != 0) failed();  // durable before it is renamed in
#endif
  if (std::fclose(f) != 0) failed();
  std::error_code ec;
  if (err != 0) {
    std::filesystem::remove(tmp, ec);
    throw IoError(name + ": write failed: " + errno_text(err));
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tmp, ignored);
    throw IoError(name + ": cannot rename " + tmp_name + " into place: " + ec.message());
  }
}

}  // namespace

Array parse_npy(std::span<const uint8_t> bytes, std::string_view name) {
  return parse_as<float>(bytes, name);
}

Int32Array parse_npy_int32(std::span<const uint8_t> bytes, std::string_view name) {
  return parse_as<int32_t>(bytes, name);
}

Array read_npy(const std::filesystem::path& path) {
  return parse_npy(read_file(path), path.string());
}

Int32Array read_npy_int32(const std::filesystem::path& path) {
  return parse_npy_int32(read_file(path), path.string());
}

std::vector<uint8_t> serialize_npy(std::span<const int64_t> shape, std::span<const float> data) {
  return serialize_as<float>(shape, data);
}

std::vector<uint8_t> serialize_npy(std::span<const int64_t> shape, std::span<const int32_t> data) {
  return serialize_as<int32_t>(shape, data);
}

void write_npy(const std::filesystem::path& path, std::span<const int64_t> shape,
               std::span<const float> data) {
  write_bytes(path, serialize_npy(shape, data));
}

void write_npy(const std::filesystem::path& path, std::span<const int64_t> shape,
               std::span<const int32_t> data) {
  write_bytes(path, serialize_npy(shape, data));
}

}  // namespace fmha_jit::npy
