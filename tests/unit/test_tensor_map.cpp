// Tensor map requests (device/tensor_map.hpp): every limit the driver documents is
// checked before the driver is called, and the error names the field, the value and what is
// accepted.
#include <catch2/catch.hpp>

#include <string>

#include "device/device_api.hpp"
#include "device/tensor_map.hpp"
#include "fmha_jit/error.hpp"

using namespace fmha_jit;
using namespace fmha_jit::device;

namespace {

alignas(256) unsigned char fake_tensor[256];  // only its address matters: nothing is read

// K of a bshd bf16 tensor, hdim 128, 4 heads, 1000 keys, batch 2, as the forward's K / V loads
// would describe it: a box of 64 head-dim columns (one 128-byte swizzle span) x 128 keys.
TensorMapSpec k_map() {
  TensorMapSpec s;
  s.element = TensorMapElement::bf16;
  s.base = fake_tensor;
  s.rank = 4;
  s.dims = {128, 1000, 4, 2, 0};
  s.strides = {0, 4 * 128 * 2, 128 * 2, 1000 * 4 * 128 * 2, 0};
  s.box = {64, 128, 1, 1, 0};
  s.swizzle = TensorMapSwizzle::bytes128;
  return s;
}

void require_rejected(const TensorMapSpec& s, const std::string& field, const std::string& value) {
  try {
    check_tensor_map_spec(s);
    FAIL("accepted " << field << " = " << value);
  } catch (const FieldError& e) {
    INFO(e.what());
    CHECK(e.code() == ErrorCode::invalid_argument);
    CHECK(e.field() == "tensor map " + field);
    CHECK(e.value() == value);
    CHECK_FALSE(e.accepted().empty());
  }
}

}  // namespace

TEST_CASE("tensor map: a well-formed request passes", "[tensor_map]") {
  CHECK_NOTHROW(check_tensor_map_spec(k_map()));
  TensorMapSpec s = k_map();
  s.element = TensorMapElement::fp32;  // the dQ accumulators: 32 fp32 columns = 128 bytes
  s.box[0] = 32;
  s.strides = {0, 4 * 128 * 4, 128 * 4, 1000 * 4 * 128 * 4, 0};
  CHECK_NOTHROW(check_tensor_map_spec(s));
  s.swizzle = TensorMapSwizzle::none;
  s.box[0] = 128;
  CHECK_NOTHROW(check_tensor_map_spec(s));
}

TEST_CASE("tensor map: each limit names its field, value and what is accepted", "[tensor_map]") {
  auto with = [](auto change) {
    TensorMapSpec s = k_map();
    change(s);
    return s;
  };
  require_rejected(with([](TensorMapSpec& s) { s.rank = 0; }), "rank", "0");
  require_rejected(with([](TensorMapSpec& s) { s.rank = 6; }), "rank", "6");
  require_rejected(with([](TensorMapSpec& s) { s.base = nullptr; }), "base", "null");
  require_rejected(with([](TensorMapSpec& s) { s.base = fake_tensor + 8; }), "base",
                   std::to_string(reinterpret_cast<std::uintptr_t>(fake_tensor + 8)));
  require_rejected(with([](TensorMapSpec& s) { s.dims[2] = 0; }), "dims[2]", "0");
  require_rejected(with([](TensorMapSpec& s) { s.dims[1] = (std::uint64_t{1} << 32) + 1; }),
                   "dims[1]", "4294967297");
  // A row stride that is not a multiple of 16 bytes (hdim 100 in bf16: 200 bytes).
  require_rejected(with([](TensorMapSpec& s) { s.strides[1] = 200; }), "strides[1]", "200");
  require_rejected(with([](TensorMapSpec& s) { s.strides[2] = 0; }), "strides[2]", "0");
  require_rejected(with([](TensorMapSpec& s) { s.strides[3] = std::uint64_t{1} << 40; }),
                   "strides[3]", "1099511627776");
  require_rejected(with([](TensorMapSpec& s) { s.box[1] = 0; }), "box[1]", "0");
  require_rejected(with([](TensorMapSpec& s) { s.box[1] = 257; }), "box[1]", "257");
  // 128 bf16 columns are 256 bytes: wider than the 128-byte swizzle span.
  require_rejected(with([](TensorMapSpec& s) { s.box[0] = 128; }), "box[0]", "128");
  // 4 bf16 columns are 8 bytes: not a whole 16-byte unit.
  require_rejected(with([](TensorMapSpec& s) {
                     s.box[0] = 4;
                     s.swizzle = TensorMapSwizzle::none;
                   }),
                   "box[0]", "4");
}

TEST_CASE("tensor map: encoding needs the NVIDIA driver; HIP has none", "[tensor_map]") {
  DeviceApi& cuda = cuda_driver();
  if (cuda.available()) {
    const TensorMap map = cuda.encode_tensor_map(k_map());
    bool any = false;
    for (auto w : map.words) any = any || w != 0;
    CHECK(any);
  } else {
    try {
      cuda.encode_tensor_map(k_map());
      FAIL("encoded without a driver");
    } catch (const Error& e) {
      CHECK(e.code() == ErrorCode::device_unavailable);
    }
  }
  // A bad request is rejected before the driver is asked, with or without one.
  TensorMapSpec bad = k_map();
  bad.box[1] = 300;
  CHECK_THROWS_AS(cuda.encode_tensor_map(bad), FieldError);
  try {
    hip_runtime().encode_tensor_map(k_map());
    FAIL("HIP encoded a tensor map");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::invalid_argument);
    CHECK(std::string(e.what()).find("HIP") != std::string::npos);
  }
}
