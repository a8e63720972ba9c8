// The Hopper building blocks on the GPU: the probe GEMM of tests/support/sm90_probe.hpp
// loads A and B by TMA (tensor maps encoded by the driver), multiplies them with four k16 wgmma
// steps and writes D from the accumulators. Matching a CPU GEMM settles the tensor-map encoding,
// the mbarrier protocol, the matrix descriptors (128-byte swizzle, the 32-byte step along k) and
// the accumulator layout that wgmma_sm90a.h documents, before any attention kernel relies on them.
// Part of fmha_jit_gpu_sm90_tests, whose main skips every case on a GPU other than sm_90.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <vector>

#include "device/device_api.hpp"
#include "gpu/attention_harness.hpp"
#include "support/sm90_probe.hpp"

using namespace fmha_jit;

TEST_CASE("gpu sm90a: the TMA + wgmma probe GEMM matches a CPU GEMM", "[gpu]") {
  device::DeviceApi& dev = device::require_device("the sm90a probe");
  const auto compiled = test::compile_sm90_probe("sm_90a");
  // Where FMHA_JIT_SM90_PROBE_CUBIN names a file, the cubin is written there for cuobjdump.
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

// The forward's P V operands: A from registers and B N-major (trans-b), N = 128 so that the
// descriptor's offset between 64-column slabs is exercised. Expected encoding (the PTX ISA's
// canonical MN-major layouts): leading offset = slab to slab (8 KB here), stride offset = 8-row
// group to group (1 KB). When that fails, the swapped encoding is tried and reported, so one
// device run settles it either way.
TEST_CASE("gpu sm90a: the RS + N-major wgmma probe matches a CPU GEMM", "[gpu]") {
  device::DeviceApi& dev = device::require_device("the sm90a probe");
  const auto compiled = test::compile_sm90_probe("sm_90a");
  void* module = dev.load_module(compiled.binary);
  void* gemm = dev.get_function(module, "fmha_sm90_probe_gemm_nmajor");
  dev.set_max_dynamic_smem(gemm, test::kSm90ProbeNMajorSmemBytes);

  const test::DeviceTensor a = test::random_tensor(64 * 64, /*bf16=*/true, 21);   // [m][k]
  const test::DeviceTensor b = test::random_tensor(64 * 128, /*bf16=*/true, 22);  // [k][n]
  auto map_of = [&](const DeviceBuffer& buf, std::uint64_t cols) {
    device::TensorMapSpec s;
    s.element = device::TensorMapElement::bf16;
    s.base = buf.data();
    s.rank = 2;
    s.dims = {cols, 64, 0, 0, 0};
    s.strides = {0, cols * 2, 0, 0, 0};
    s.box = {64, 64, 0, 0, 0};
    s.swizzle = device::TensorMapSwizzle::bytes128;
    return dev.encode_tensor_map(s);
  };
  const device::TensorMap a_map = map_of(a.device, 64);
  const device::TensorMap b_map = map_of(b.device, 128);

  std::vector<double> ref(64 * 128, 0.0);
  for (int m = 0; m < 64; ++m) {
    for (int n = 0; n < 128; ++n) {
      for (int k = 0; k < 64; ++k) {
        ref[m * 128 + n] += static_cast<double>(a.host[m * 64 + k]) * b.host[k * 128 + n];
      }
    }
  }
  auto mismatches = [&](unsigned lbo, unsigned sbo) {
    DeviceBuffer out = test::poisoned(64 * 128 * sizeof(float));
    void* out_ptr = out.data();
    void* args[] = {const_cast<device::TensorMap*>(&a_map), const_cast<device::TensorMap*>(&b_map),
                    &out_ptr, &lbo, &sbo};
    dev.launch(gemm, {1, 1, 1}, {128, 1, 1}, test::kSm90ProbeNMajorSmemBytes, nullptr, args);
    dev.synchronize(nullptr);
    std::vector<float> got(64 * 128);
    out.download(got.data(), got.size() * sizeof(float));
    int bad = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      if (!(std::fabs(got[i] - ref[i]) <= 1e-4 * (1.0 + std::fabs(ref[i])))) ++bad;
    }
    return bad;
  };
  const int bad = mismatches(64 * 128, 1024);
  if (bad != 0) {
    const int swapped = mismatches(1024, 64 * 128);
    WARN("expected encoding: " << bad << " of 8192 wrong; swapped (lbo 1024, sbo 8192): " << swapped
                               << " wrong");
  }
  dev.unload_module(module);
  CHECK(bad == 0);
}
