// libFuzzer target: the .npy readers (`fmha-jit run --inputs`: float32 tensors and the int32
// cu_seqlens of packed batches). Hostile bytes must end in a FormatError; an accepted array must
// match its shape and serialise back to bytes that parse to the same array.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "tools/npy/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace fmha_jit::npy;
  try {
    const Array a = parse_npy({data, size}, "fuzz.npy");
    if (static_cast<std::int64_t>(a.data.size()) != element_count(a.shape)) std::abort();
    const auto bytes = serialize_npy(a.shape, a.data);
    const Array b = parse_npy(bytes, "round-trip.npy");
    if (b.shape != a.shape || b.data.size() != a.data.size()) std::abort();
    if (!a.data.empty() &&
        std::memcmp(a.data.data(), b.data.data(), a.data.size() * sizeof(float)) != 0) {
      std::abort();
    }
  } catch (const FormatError&) {
  }
  try {
    const Int32Array a = parse_npy_int32({data, size}, "fuzz.npy");
    if (static_cast<std::int64_t>(a.data.size()) != element_count(a.shape)) std::abort();
    const auto bytes = serialize_npy(a.shape, a.data);
    const Int32Array b = parse_npy_int32(bytes, "round-trip.npy");
    if (b.shape != a.shape || b.data != a.data) std::abort();
  } catch (const FormatError&) {
  }
  return 0;
}
