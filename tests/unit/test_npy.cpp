// Unit tests of the .npy reader and writer: numpy-produced files, round trips, and every rejection.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "tools/npy/npy.hpp"

namespace npy = fmha_jit::npy;
using namespace std::string_literals;
using namespace std::string_view_literals;

namespace {

// Files written by numpy 2.4 (np.save, or numpy.lib.format.write_array for versions 2.0 and 3.0).
// np.arange(6, dtype='<f4').reshape(2, 3)
constexpr std::string_view kNumpy23 =
    "\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }       "
    "                                                   \x0a\x00\x00\x00\x00\x00\x00\x80?\x00"
    "\x00\x00@\x00\x00@@\x00\x00\x80@\x00\x00\xa0@"sv;
// np.array([1.5, -2, 0.25, 1e-3, 3e38], dtype='<f4')
constexpr std::string_view kNumpy5 =
    "\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (5,), }         "
    "                                                   \x0a\x00\x00\xc0?\x00\x00\x00\xc0\x00"
    "\x00\x80>o\x12\x83:\xe6\xb1"
    "a\x7f"sv;
// np.array(7.5, dtype='<f4'): 0-d
constexpr std::string_view kNumpy0d =
    "\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (), }           "
    "                                                   \x0a\x00\x00\xf0@"sv;
// np.zeros((2, 0, 3), dtype='<f4')
constexpr std::string_view kNumpyEmpty =
    "\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2, 0, 3), }    "
    "                                                   \x0a"sv;
// np.array([1, 2], dtype='<f4'), version 2.0
constexpr std::string_view kNumpyV2 =
    "\x93NUMPY\x02\x00t\x00\x00\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } "
    "                                                         \x0a\x00\x00\x80?\x00\x00\x00@"sv;
// np.array([1, 2], dtype='<f4'), version 3.0
constexpr std::string_view kNumpyV3 =
    "\x93NUMPY\x03\x00t\x00\x00\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } "
    "                                                         \x0a\x00\x00\x80?\x00\x00\x00@"sv;

std::vector<uint8_t> bytes_of(std::string_view s) { return {s.begin(), s.end()}; }

npy::Array parse(std::string_view s, std::string_view name = "test.npy") {
  const std::vector<uint8_t> b = bytes_of(s);
  return npy::parse_npy(b, name);
}

// A version 1.0 file with the given header text (unpadded) and `floats` float32 elements 0, 1, ...
std::string make_file(std::string_view header, size_t floats, int major = 1) {
  std::string out = "\x93NUMPY"s;
  out += static_cast<char>(major);
  out += '\0';
  const size_t len = header.size();
  out += static_cast<char>(len & 0xff);
  out += static_cast<char>((len >> 8) & 0xff);
  if (major > 1) {
    out += static_cast<char>((len >> 16) & 0xff);
    out += static_cast<char>((len >> 24) & 0xff);
  }
  out += header;
  for (size_t i = 0; i < floats; ++i) {
    const float f = static_cast<float>(i);
    char buf[4];
    std::memcpy(buf, &f, 4);
    out.append(buf, 4);
  }
  return out;
}

std::string dict(std::string_view shape, std::string_view descr = "'<f4'",
                 std::string_view order = "False") {
  return "{'descr': " + std::string(descr) + ", 'fortran_order': " + std::string(order) +
         ", 'shape': " + std::string(shape) + ", }\n";
}

// Checks that parsing throws FormatError whose message contains every fragment.
void check_rejects(const std::string& file, std::initializer_list<std::string_view> fragments) {
  try {
    parse(file, "q.npy");
    FAIL("accepted: " << file.substr(0, 120));
  } catch (const npy::FormatError& e) {
    const std::string msg = e.what();
    INFO("message: " << msg);
    CHECK(msg.rfind("q.npy: ", 0) == 0);
    for (std::string_view f : fragments) CHECK(msg.find(f) != std::string::npos);
  }
}

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::random_device rd;
    path = std::filesystem::temp_directory_path() /
           ("fmha_npy_test_" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace

TEST_CASE("npy: files written by numpy", "[npy]") {
  const npy::Array a = parse(kNumpy23);
  CHECK(a.shape == std::vector<int64_t>{2, 3});
  CHECK(a.data == std::vector<float>{0, 1, 2, 3, 4, 5});

  const npy::Array b = parse(kNumpy5);
  CHECK(b.shape == std::vector<int64_t>{5});
  CHECK(b.data == std::vector<float>{1.5f, -2.0f, 0.25f, 1e-3f, 3e38f});

  const npy::Array c = parse(kNumpy0d);
  CHECK(c.shape.empty());
  CHECK(c.data == std::vector<float>{7.5f});

  const npy::Array d = parse(kNumpyEmpty);
  CHECK(d.shape == std::vector<int64_t>{2, 0, 3});
  CHECK(d.data.empty());

  for (std::string_view v : {kNumpyV2, kNumpyV3}) {
    const npy::Array e = parse(v);
    CHECK(e.shape == std::vector<int64_t>{2});
    CHECK(e.data == std::vector<float>{1, 2});
  }
}

TEST_CASE("npy: serialize_npy is byte-identical to numpy.save", "[npy]") {
  auto same = [](std::string_view numpy_file) {
    const npy::Array a = parse(numpy_file);
    const std::vector<uint8_t> ours = npy::serialize_npy(a.shape, a.data);
    CHECK(ours == bytes_of(numpy_file));
    CHECK((10 + (ours[8] | ours[9] << 8)) % 64 == 0);
  };
  same(kNumpy23);
  same(kNumpy5);
  same(kNumpy0d);
  same(kNumpyEmpty);
}

TEST_CASE("npy: accepted header variations", "[npy]") {
  // No trailing comma, other key order, double quotes, extra whitespace, no final newline.
  CHECK(parse(make_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}", 6)).shape ==
        std::vector<int64_t>{2, 3});
  CHECK(parse(make_file("{\"shape\": (3,), \"fortran_order\": False, \"descr\": \"<f4\"}", 3))
            .shape == std::vector<int64_t>{3});
  CHECK(parse(make_file("  {'descr':'<f4','fortran_order':False,'shape':( 1 , 2 , )}\n  ", 2))
            .shape == std::vector<int64_t>{1, 2});
  // Python 2 long suffix, written by old numpy into version 1.0 headers.
  CHECK(parse(make_file(dict("(2L, 1L)"), 2)).shape == std::vector<int64_t>{2, 1});
  // A zero dimension makes the array empty whatever the others are.
  CHECK(parse(make_file(dict("(0, 9223372036854775807, 4)"), 0)).data.empty());
}

TEST_CASE("npy: round trip through a file", "[npy]") {
  TempDir dir;
  const std::vector<std::vector<int64_t>> shapes = {{2, 3},    {5},          {},       {0},
                                                    {2, 0, 3}, {1, 1, 1, 1}, {3, 4, 5}};
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-1e3f, 1e3f);
  for (const auto& shape : shapes) {
    const int64_t n = npy::element_count(shape);
    std::vector<float> data(static_cast<size_t>(n));
    for (float& x : data) x = dist(rng);
    if (n > 2) {
      data[0] = std::numeric_limits<float>::infinity();
      data[1] = -0.0f;
    }
    const auto path = dir.path / "a.npy";
    npy::write_npy(path, shape, data);
    const npy::Array back = npy::read_npy(path);
    CHECK(back.shape == shape);
    REQUIRE(back.data.size() == data.size());
    if (!data.empty()) {  // bitwise: -0.0f and inf must survive
      CHECK(std::memcmp(back.data.data(), data.data(), data.size() * sizeof(float)) == 0);
    }
  }
  // Overwriting replaces the file, and no temporary file is left behind.
  const std::vector<int64_t> shape{2};
  const std::vector<float> data{1, 2};
  npy::write_npy(dir.path / "a.npy", shape, data);
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path)) {
    CHECK(entry.path().filename() == "a.npy");
    ++files;
  }
  CHECK(files == 1);
  CHECK(npy::read_npy(dir.path / "a.npy").data == data);
}

TEST_CASE("npy: write errors", "[npy]") {
  TempDir dir;
  const std::vector<float> data(6, 1.0f);
  const std::vector<int64_t> wrong{2, 2}, negative{-2, -3}, good{2, 3};
  CHECK_THROWS_AS(npy::write_npy(dir.path / "x.npy", wrong, data), std::invalid_argument);
  CHECK_THROWS_AS(npy::write_npy(dir.path / "x.npy", negative, data), std::invalid_argument);
  const std::vector<int64_t> too_many(65, 1);
  CHECK_THROWS_AS(npy::serialize_npy(too_many, std::span<const float>(data.data(), 1)),
                  std::invalid_argument);
  CHECK_THROWS_AS(npy::write_npy(dir.path / "missing" / "x.npy", good, data), npy::IoError);
  CHECK(!std::filesystem::exists(dir.path / "x.npy"));
}

TEST_CASE("npy: read errors name the file", "[npy]") {
  TempDir dir;
  const auto path = dir.path / "absent.npy";
  try {
    npy::read_npy(path);
    FAIL("no error");
  } catch (const npy::IoError& e) {
    CHECK(std::string(e.what()).find(path.string()) != std::string::npos);
  }
  CHECK_THROWS_AS(npy::read_npy(dir.path), npy::NpyError);  // a directory
  {
    std::ofstream out(dir.path / "bad.npy", std::ios::binary);
    out << "hello";
  }
  CHECK_THROWS_AS(npy::read_npy(dir.path / "bad.npy"), npy::FormatError);
}

TEST_CASE("npy: rejections", "[npy]") {
  const std::string good = make_file(dict("(2, 3)"), 6);
  REQUIRE_NOTHROW(parse(good));

  SECTION("prefix") {
    check_rejects("", {"not a .npy file"});
    check_rejects("\x93NUMP", {"not a .npy file"});
    check_rejects("PK\x03\x04 not numpy at all"s, {"not a .npy file"});
    check_rejects("\x93NUMPY\x01\x00\x10"s, {"too short"});
    check_rejects("\x93NUMPY\x02\x00\x10\x00"s, {"too short"});
    std::string v4 = good, v11 = good;
    v4[6] = 4;
    v11[7] = 1;
    check_rejects(v4, {"version 4.0", "expected 1.0, 2.0 or 3.0"});
    check_rejects(v11, {"version 1.1"});
  }
  SECTION("header length beyond the file") {
    std::string f = good;
    f[8] = '\xff';
    f[9] = '\xff';
    check_rejects(f, {"header length 65535 exceeds"});
    std::string v2 = make_file(dict("(2,)"), 2, 2);
    v2[11] = '\x7f';
    check_rejects(v2, {"header length", "exceeds"});
    check_rejects(good.substr(0, 30), {"exceeds"});
  }
  SECTION("dtype") {
    check_rejects(make_file(dict("(2,)", "'<f8'"), 4),
                  {"q.npy: dtype '<f8' not supported; expected '<f4' (float32)"});
    check_rejects(make_file(dict("(2,)", "'>f4'"), 2), {"'>f4'", "big-endian"});
    check_rejects(make_file(dict("(2,)", "'<f2'"), 1), {"'<f2'"});
    check_rejects(make_file(dict("(2,)", "'|O'"), 4), {"'|O'"});
    check_rejects(make_file(dict("(2,)", "[('a', '<f4')]"), 2), {"structured"});
    check_rejects(make_file(dict("(2,)", "4"), 2), {"descr string"});
  }
  SECTION("order") {
    check_rejects(make_file(dict("(2, 3)", "'<f4'", "True"), 6), {"fortran_order True", "C order"});
    check_rejects(make_file(dict("(2, 3)", "'<f4'", "0"), 6), {"True or False"});
    check_rejects(make_file(dict("(2, 3)", "'<f4'", "Falsey"), 6), {"True or False"});
  }
  SECTION("shape") {
    check_rejects(make_file(dict("(-1, 3)"), 6), {"negative dimension"});
    check_rejects(make_file(dict("(5)"), 5), {"not a tuple"});
    check_rejects(make_file(dict("[5]"), 5), {"tuple"});
    check_rejects(make_file(dict("(2,,)"), 2), {"non-negative integer"});
    check_rejects(make_file(dict("(2 3)"), 6), {"',' or ')'"});
    check_rejects(make_file(dict("(02,)"), 2), {"leading zero"});
    check_rejects(make_file(dict("(2.0,)"), 2), {"',' or ')'"});
    check_rejects(make_file(dict("(99999999999999999999,)"), 0), {"exceeds int64"});
    check_rejects(make_file(dict("(4294967296, 4294967296)"), 0), {"more elements"});
    check_rejects(make_file(dict("(3037000500, 3037000500)"), 0), {"more elements"});
    check_rejects(make_file(dict("(1000000000000000000,)"), 1), {"data is 4 bytes"});
    check_rejects(make_file(dict("(4611686018427387904,)"), 1), {"data is 4 bytes"});
    std::string deep = "(";
    for (int i = 0; i < 65; ++i) deep += "1, ";
    check_rejects(make_file(dict(deep + ")"), 1), {"more than 64 dimensions"});
    check_rejects(make_file(dict("(2L,)"), 2, 3), {"',' or ')'"});  // no Python 2 in version 3
  }
  SECTION("data size") {
    check_rejects(good.substr(0, good.size() - 1), {"data is 23 bytes", "(2, 3)", "6 float32"});
    check_rejects(make_file(dict("(2, 3)"), 5), {"data is 20 bytes"});
    check_rejects(good + "x", {"1 trailing bytes"});
    check_rejects(make_file(dict("(2, 0)"), 1), {"4 trailing bytes"});
  }
  SECTION("dict syntax") {
    check_rejects(make_file("{'descr': '<f4', 'shape': (2, 3), }", 6), {"missing 'fortran_order'"});
    check_rejects(make_file("{}", 0), {"missing 'descr', 'fortran_order', 'shape'"});
    check_rejects(make_file("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, "
                            "'shape': (2, 3)}",
                            6),
                  {"'descr' appears twice"});
    check_rejects(make_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}", 6),
                  {"unexpected header key 'x'"});
    check_rejects(make_file(dict("(2, 3)") + "x", 6), {"end of header after '}'"});
    check_rejects(make_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)", 6),
                  {"'}'"});
    check_rejects(make_file("{'descr': '<f4' 'fortran_order': False, 'shape': (2, 3)}", 6),
                  {"',' or '}'"});
    check_rejects(make_file("{'descr: '<f4'}", 0), {"':'"});
    check_rejects(make_file("{'descr': '<f4", 0), {"closing quote"});
    check_rejects(make_file("{'descr': '<\\x66\\x34'}", 0), {"without escapes"});
    check_rejects(make_file("{descr: '<f4'}", 0), {"a dict key"});
    check_rejects(make_file("", 0), {"header dict to start"});
    check_rejects(make_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\x00"s, 6),
                  {"byte 0x00"});
    check_rejects(make_file("{'descr': '\xc3\xa9', 'fortran_order': False, 'shape': (2,)}", 2, 3),
                  {"byte 0xc3"});
  }
}

TEST_CASE("npy: mutated files never crash", "[npy]") {
  // A miniature fuzzer: truncations and byte flips of valid files must parse or throw FormatError.
  std::mt19937 rng(12345);
  const std::string seeds[] = {std::string(kNumpy23), std::string(kNumpyV2),
                               make_file(dict("(1, 2)"), 2)};
  int accepted = 0, rejected = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string f = seeds[iter % 3];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !f.empty(); ++e) {
      const size_t pos = rng() % f.size();
      switch (rng() % 4) {
        case 0: f[pos] = static_cast<char>(rng()); break;
        case 1: f.resize(pos); break;
        case 2: f.insert(pos, 1, "(),:'-0123456789 LTF{}[]"[rng() % 24]); break;
        default: f.erase(pos, 1); break;
      }
    }
    try {
      parse(f);
      ++accepted;
    } catch (const npy::FormatError&) {
      ++rejected;
    }
  }
  CHECK(accepted + rejected == 20000);
  CHECK(rejected > 0);
}
