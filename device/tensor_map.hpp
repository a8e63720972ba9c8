// Tensor maps for the bulk tensor copies of the sm_90a kernels (templates/sm90/tma_sm90.h): which
// strided box of a tensor one copy moves, in the driver's opaque 128-byte encoding. A request is
// checked against the driver's documented limits first, so a bad one names the field, the value
// and what is accepted instead of failing as CUDA_ERROR_INVALID_VALUE.
#pragma once

#include <array>
#include <cstdint>

namespace fmha_jit::device {

enum class TensorMapElement { fp16, bf16, fp32 };

// The shared-memory layout the copy writes: rows of the box's innermost dimension XOR-swizzled
// within 32-, 64- or 128-byte spans (the span wgmma's descriptor names, wgmma_sm90a.h).
enum class TensorMapSwizzle { none, bytes32, bytes64, bytes128 };

struct TensorMapSpec {
  TensorMapElement element = TensorMapElement::bf16;
  const void* base = nullptr;  // device address of element (0, ..., 0)
  int rank = 0;                // 1 to 5 dimensions
  // Per dimension, innermost first: extent in elements; byte stride between consecutive indices
  // (strides[0] is unused: the innermost dimension is contiguous); box extent in elements.
  std::array<std::uint64_t, 5> dims{};
  std::array<std::uint64_t, 5> strides{};
  std::array<std::uint32_t, 5> box{};
  TensorMapSwizzle swizzle = TensorMapSwizzle::bytes128;
};

// The driver's CUtensorMap (and the kernels' FmhaTensorMap): 128 opaque bytes, passed to a kernel
// by value. cuda.h of CUDA 13 aligns it to 128 bytes on the host; kernels need 64.
struct alignas(128) TensorMap {
  std::array<std::uint64_t, 16> words{};
};

// Throws FieldError(invalid_argument) naming the first field out of the driver's limits:
// rank 1-5; base non-null and 16-byte aligned; each extent 1 to 2^32; strides non-zero multiples
// of 16 bytes below 2^40; box extents 1 to 256, the innermost one a multiple of 16 bytes and,
// when swizzled, at most the swizzle span.
void check_tensor_map_spec(const TensorMapSpec& spec);

}  // namespace fmha_jit::device
