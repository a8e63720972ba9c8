// The Catch2 main of every suite. A gpu suite first asks the device layer whether it can run
// (support/gpu_gate.hpp): with no GPU, or FMHA_JIT_DEVICE=none, or (the Hopper suite) a GPU of
// another arch, it prints why and exits 77, CTest's SKIP_RETURN_CODE, so each of its cases shows
// as skipped rather than passed; with a GPU that is present but cannot be used, or a
// FMHA_JIT_DEVICE value not accepted, it prints why and exits 1.
#define CATCH_CONFIG_RUNNER
#include <spdlog/spdlog.h>
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#ifdef FMHA_JIT_GPU_SUITE
#include "support/gpu_gate.hpp"
#endif

#ifndef FMHA_JIT_GPU_SUITE_ARCH
#define FMHA_JIT_GPU_SUITE_ARCH ""  // any GPU
#endif

int main(int argc, char** argv) {
  // Warnings are part of what several tests provoke; keep them out of the test log unless asked.
  if (!std::getenv("FMHA_JIT_TEST_LOG")) spdlog::set_level(spdlog::level::err);
#ifdef FMHA_JIT_GPU_SUITE
  bool listing = false;
  for (int i = 1; i < argc; ++i) listing |= std::strncmp(argv[i], "--list", 6) == 0;
  if (!listing) {
    using fmha_jit::test::GpuVerdict;
    const auto gate =
        fmha_jit::test::decide_gpu_gate(fmha_jit::test::probe_gpu(), FMHA_JIT_GPU_SUITE_ARCH);
    if (gate.verdict == GpuVerdict::skip) {
      std::printf("SKIPPED: %s\n", gate.reason.c_str());
      return 77;
    }
    if (gate.verdict == GpuVerdict::fail) {
      std::printf("FAILED: %s\n", gate.reason.c_str());
      return 1;
    }
  }
#endif
  return Catch::Session().run(argc, argv);
}
