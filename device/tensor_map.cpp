// Checks of a tensor map request against the limits cuTensorMapEncodeTiled documents (CUDA driver
// API, "Tensor Map Object Management"); the encoding itself is the driver's (cuda_driver.cpp).
#include "device/tensor_map.hpp"

#include <string>

#include "fmha_jit/error.hpp"

namespace fmha_jit::device {
namespace {

[[noreturn]] void reject(const std::string& field, const std::string& value,
                         const std::string& accepted) {
  throw FieldError(ErrorCode::invalid_argument, "tensor map " + field, value, accepted);
}

std::string at(const char* name, int i) {
  return std::string(name) + "[" + std::to_string(i) + "]";
}

std::uint32_t swizzle_span(TensorMapSwizzle s) {
  switch (s) {
    case TensorMapSwizzle::none: return 0;
    case TensorMapSwizzle::bytes32: return 32;
    case TensorMapSwizzle::bytes64: return 64;
    case TensorMapSwizzle::bytes128: return 128;
  }
  return 0;
}

int element_bytes(TensorMapElement e) { return e == TensorMapElement::fp32 ? 4 : 2; }

}  // namespace

void check_tensor_map_spec(const TensorMapSpec& s) {
  if (s.rank < 1 || s.rank > 5) reject("rank", std::to_string(s.rank), "1 to 5");
  const auto base = reinterpret_cast<std::uintptr_t>(s.base);
  if (base == 0 || base % 16 != 0) {
    reject("base", base == 0 ? "null" : std::to_string(base), "a 16-byte aligned device address");
  }
  const std::uint64_t elem = static_cast<std::uint64_t>(element_bytes(s.element));
  for (int i = 0; i < s.rank; ++i) {
    if (s.dims[i] < 1 || s.dims[i] > (std::uint64_t{1} << 32)) {
      reject(at("dims", i), std::to_string(s.dims[i]), "1 to 2^32 elements");
    }
    // Strides need not grow with the dimension: bshd K is (head dim, seq, head, batch) with the
    // head stride below the sequence stride.
    if (i > 0 &&
        (s.strides[i] == 0 || s.strides[i] % 16 != 0 || s.strides[i] >= (std::uint64_t{1} << 40))) {
      reject(at("strides", i), std::to_string(s.strides[i]),
             "a non-zero multiple of 16 bytes below 2^40");
    }
    if (s.box[i] < 1 || s.box[i] > 256) {
      reject(at("box", i), std::to_string(s.box[i]), "1 to 256 elements");
    }
  }
  const std::uint64_t inner_bytes = s.box[0] * elem;
  const std::uint32_t span = swizzle_span(s.swizzle);
  if (inner_bytes % 16 != 0 || (span != 0 && inner_bytes > span)) {
    reject("box[0]", std::to_string(s.box[0]),
           span == 0 ? std::string("a multiple of 16 bytes")
                     : "a multiple of 16 bytes, at most the " + std::to_string(span) +
                           "-byte swizzle span (" + std::to_string(span / elem) + " elements)");
  }
}

}  // namespace fmha_jit::device
