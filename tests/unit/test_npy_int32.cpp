// Unit tests of the .npy reader and writer's int32 entry points (the cu_seqlens files of `fmha-jit
// run` on packed batches): numpy's bytes, round trips, the dtype kept apart from float32, and
// hostile input.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "support/test_support.hpp"
#include "tools/npy/npy.hpp"

namespace npy = fmha_jit::npy;
using namespace std::string_view_literals;

namespace {

// np.save of np.array([0, 100, 2100, 2117], dtype=np.int32) (numpy 2.x): the header numpy writes
// for a 1-d array, padded so that the data starts at byte 128.
constexpr std::string_view kNumpyCu =
    "\x93NUMPY\x01\x00v\x00{'descr': '<i4', 'fortran_order': False, 'shape': (4,), }         "
    "                                                   \x0a\x00\x00\x00\x00\x64\x00\x00\x00\x34"
    "\x08\x00\x00\x45\x08\x00\x00"sv;

std::vector<std::uint8_t> bytes_of(std::string_view s) { return {s.begin(), s.end()}; }

// kNumpyCu with its descr replaced (same length, so the header stays well formed).
std::vector<std::uint8_t> with_descr(std::string_view descr) {
  std::string s(kNumpyCu);
  s.replace(s.find("<i4"), 3, descr);
  return bytes_of(s);
}

std::string rejection(const std::vector<std::uint8_t>& bytes, bool as_int32) {
  try {
    if (as_int32) {
      npy::parse_npy_int32(bytes, "cu.npy");
    } else {
      npy::parse_npy(bytes, "cu.npy");
    }
  } catch (const npy::FormatError& e) {
    return e.what();
  }
  return "accepted";
}

}  // namespace

TEST_CASE("npy int32: numpy's file parses, and serialises back to the same bytes", "[npy]") {
  const auto bytes = bytes_of(kNumpyCu);
  REQUIRE(bytes.size() == 128 + 16);
  const npy::Int32Array a = npy::parse_npy_int32(bytes, "cu.npy");
  CHECK(a.shape == std::vector<std::int64_t>{4});
  CHECK(a.data == std::vector<std::int32_t>{0, 100, 2100, 2117});
  CHECK(npy::serialize_npy(a.shape, std::span<const std::int32_t>(a.data)) == bytes);
}

TEST_CASE("npy int32: round trip through a file, negative values and empty arrays", "[npy]") {
  fmha_jit::test::TempDir dir;
  const std::vector<std::int64_t> shape{2, 3};
  const std::vector<std::int32_t> data{0, -1, 2147483647, -2147483647 - 1, 42, 7};
  npy::write_npy(dir.path() / "a.npy", shape, std::span<const std::int32_t>(data));
  const npy::Int32Array back = npy::read_npy_int32(dir.path() / "a.npy");
  CHECK(back.shape == shape);
  CHECK(back.data == data);

  const std::vector<std::int64_t> empty_shape{0};
  npy::write_npy(dir.path() / "e.npy", empty_shape, std::span<const std::int32_t>());
  const npy::Int32Array empty = npy::read_npy_int32(dir.path() / "e.npy");
  CHECK(empty.shape == empty_shape);
  CHECK(empty.data.empty());

  // The shape must hold the data, as for float32.
  CHECK_THROWS_AS(
      npy::write_npy(dir.path() / "x.npy", shape, std::span<const std::int32_t>(data.data(), 5)),
      std::invalid_argument);
  CHECK_THROWS_AS(npy::read_npy_int32(dir.path() / "missing.npy"), npy::IoError);
}

TEST_CASE("npy int32: each entry point accepts its own dtype only, and names it", "[npy]") {
  // float32 bytes read as int32 would be garbage offsets: refused, not reinterpreted.
  std::string msg = rejection(with_descr("<f4"), true);
  CHECK_THAT(msg, Catch::StartsWith("cu.npy: ") && Catch::Contains("dtype '<f4' not supported") &&
                      Catch::Contains("expected '<i4' (int32)"));
  msg = rejection(bytes_of(kNumpyCu), false);
  CHECK_THAT(msg, Catch::Contains("dtype '<i4' not supported") &&
                      Catch::Contains("expected '<f4' (float32)"));
  // numpy's default integer is int64: named, with what is expected.
  msg = rejection(with_descr("<i8"), true);
  CHECK_THAT(msg, Catch::Contains("dtype '<i8' not supported") && Catch::Contains("'<i4'"));
  msg = rejection(with_descr(">i4"), true);
  CHECK_THAT(msg, Catch::Contains("(big-endian)") && Catch::Contains("'<i4'"));
  msg = rejection(with_descr("<u4"), true);
  CHECK_THAT(msg, Catch::Contains("dtype '<u4' not supported"));
  // Data shorter or longer than the shape says.
  auto bytes = bytes_of(kNumpyCu);
  bytes.pop_back();
  CHECK_THAT(rejection(bytes, true), Catch::Contains("needs 4 int32 elements"));
  bytes = bytes_of(kNumpyCu);
  bytes.push_back(0);
  CHECK_THAT(rejection(bytes, true), Catch::Contains("1 trailing bytes"));
}

TEST_CASE("npy int32: mutated files never crash", "[npy]") {
  // The float32 fuzzer's miniature for the int32 entry point: truncations and byte flips must
  // parse or throw FormatError, and what parses holds as many elements as its shape says.
  std::mt19937 rng(271828);
  int accepted = 0, rejected = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string f(kNumpyCu);
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !f.empty(); ++e) {
      const size_t pos = rng() % f.size();
      switch (rng() % 4) {
        case 0: f[pos] = static_cast<char>(rng()); break;
        case 1: f.resize(pos); break;
        case 2: f.insert(pos, 1, "(),:'-0123456789 LTFi<{}[]"[rng() % 26]); break;
        default: f.erase(pos, 1); break;
      }
    }
    try {
      const npy::Int32Array a = npy::parse_npy_int32(bytes_of(f), "fuzz.npy");
      CHECK(static_cast<std::int64_t>(a.data.size()) == npy::element_count(a.shape));
      ++accepted;
    } catch (const npy::FormatError&) {
      ++rejected;
    }
  }
  CHECK(accepted + rejected == 20000);
  CHECK(accepted > 0);
  CHECK(rejected > 0);
}
