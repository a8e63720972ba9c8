// The shared-memory handoff of the Hopper backward's producer to its consumers (stores, then an
// mbarrier arrival; the consumers wait on the barrier, then load), in a probe kernel of two warps
// (tests/support/sm90_probe.cpp). Run as is, it checks the values that cross; run under
// `compute-sanitizer --tool racecheck`, the two cases tell whether the tool sees the ordering an
// mbarrier gives (RELIABILITY.md, "Hopper kernels under compute-sanitizer").
#include <catch2/catch.hpp>

#include <vector>

#include "device/device_api.hpp"
#include "gpu/attention_harness.hpp"
#include "support/sm90_probe.hpp"

using namespace fmha_jit;

namespace {

void run_handoff(int by_barrier) {
  device::DeviceApi& dev = device::require_device("the sm90a handoff probe");
  const auto compiled = test::compile_sm90_probe("sm_90a");
  void* module = dev.load_module(compiled.binary);
  void* kernel = dev.get_function(module, "fmha_sm90_probe_handoff");
  DeviceBuffer out = test::poisoned(32 * sizeof(unsigned));
  void* out_ptr = out.data();
  int rounds = 64;
  void* args[] = {&out_ptr, &rounds, &by_barrier};
  dev.launch(kernel, {1, 1, 1}, {64, 1, 1}, 0, nullptr, args);
  dev.synchronize(nullptr);
  std::vector<unsigned> got(32);
  out.download(got.data(), got.size() * sizeof(unsigned));
  dev.unload_module(module);
  for (unsigned lane = 0; lane < 32; ++lane) {
    // sum over r of r * 32 + lane
    const unsigned want = 32u * (64u * 63u / 2u) + 64u * lane;
    INFO("lane " << lane);
    CHECK(got[lane] == want);
  }
}

}  // namespace

TEST_CASE("gpu sm90a: the handoff probe passes rows between warps through mbarriers", "[gpu]") {
  run_handoff(0);
}

TEST_CASE("gpu sm90a: the handoff probe passes rows between warps through __syncthreads", "[gpu]") {
  run_handoff(1);
}
