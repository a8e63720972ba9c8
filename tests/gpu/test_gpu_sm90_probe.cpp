// The Hopper building blocks on the GPU (issue 7): the probe GEMM of tests/support/sm90_probe.hpp
// loads A and B by TMA (tensor maps encoded by the driver), multiplies them with four k16 wgmma
// steps and writes D from the accumulators. Matching a CPU GEMM settles the tensor-map encoding,
// the mbarrier protocol, the matrix descriptors (128-byte swizzle, the 32-byte step along k) and
// the accumulator layout that wgmma_sm90a.h documents, before any attention kernel relies on them.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <vector>

#include "dispatcher/device/device_api.hpp"
#include "gpu/attention_harness.hpp"
#include "support/sm90_probe.hpp"

using namespace fmha_jit;

TEST_CASE("gpu sm90a: the TMA + wgmma probe GEMM matches a CPU GEMM", "[gpu]") {
  device::DeviceApi& dev = device::require_device("the sm90a probe");
  if (dev.arch() != "sm_90") {
    WARN("the sm_90a probe needs an sm_90 GPU; this one is " << dev.arch());
    return;
  }
  const auto compiled = test::compile_sm90_probe("sm_90a");
  // For a look at its SASS (tools/device/sm90_probe_call.sh: cuobjdump, HGMMA count).
  if (const char* path = std::getenv("FMHA_JIT_SM90_PROBE_CUBIN")) {
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(compiled.binary.data()),
               static_cast<std::streamsize>(compiled.binary.size()));
  }
  void* module = dev.load_module(compiled.binary);
  void* gemm = dev.get_function(module, "fmha_sm90_probe_gemm");
  dev.set_max_dynamic_smem(gemm, test::kSm90ProbeGemmSmemBytes);

  // A [m][k] and B [n][k], 64 x 64 bf16 each, random and rounded to bf16 on the host.
  const test::DeviceTensor a = test::random_tensor(64 * 64, /*bf16=*/true, 11);
  const test::DeviceTensor b = test::random_tensor(64 * 64, /*bf16=*/true, 12);
  DeviceBuffer out = test::poisoned(64 * 64 * sizeof(float));

  auto map_of = [&](const DeviceBuffer& buf) {
    device::TensorMapSpec s;
    s.element = device::TensorMapElement::bf16;
    s.base = buf.data();
    s.rank = 2;
    s.dims = {64, 64, 0, 0, 0};
    s.strides = {0, 64 * 2, 0, 0, 0};
    s.box = {64, 64, 0, 0, 0};
    s.swizzle = device::TensorMapSwizzle::bytes128;
    return dev.encode_tensor_map(s);
  };
  const device::TensorMap a_map = map_of(a.device);
  const device::TensorMap b_map = map_of(b.device);
  void* out_ptr = out.data();
  void* args[] = {const_cast<device::TensorMap*>(&a_map), const_cast<device::TensorMap*>(&b_map),
                  &out_ptr};
  dev.launch(gemm, {1, 1, 1}, {128, 1, 1}, test::kSm90ProbeGemmSmemBytes, nullptr, args);
  dev.synchronize(nullptr);

  std::vector<float> got(64 * 64);
  out.download(got.data(), got.size() * sizeof(float));
  dev.unload_module(module);
  int bad = 0;
  double worst = 0;
  for (int m = 0; m < 64; ++m) {
    for (int n = 0; n < 64; ++n) {
      double ref = 0;
      for (int k = 0; k < 64; ++k) {
        ref += static_cast<double>(a.host[m * 64 + k]) * b.host[n * 64 + k];
      }
      // Products of bf16 values are exact in fp32; 64 fp32 additions round by a few ulps.
      const double err = std::fabs(got[m * 64 + n] - ref);
      worst = std::max(worst, err);
      if (!(err <= 1e-4 * (1.0 + std::fabs(ref)))) ++bad;
    }
  }
  INFO("max |D - ref| = " << worst);
  CHECK(bad == 0);
}
