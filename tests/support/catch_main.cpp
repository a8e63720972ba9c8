// The Catch2 main of every suite. The gpu suite's tests are reported as skipped (exit 77, CTest's
// SKIP_RETURN_CODE) with a message when no GPU is usable, so a GPU-less CI shows them as skipped
// rather than passed.
#define CATCH_CONFIG_RUNNER
#include <spdlog/spdlog.h>
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstring>

#include "fmha_jit/dispatcher.hpp"

int main(int argc, char** argv) {
  // Warnings are part of what several tests provoke; keep them out of the test log unless asked.
  if (!std::getenv("FMHA_JIT_TEST_LOG")) spdlog::set_level(spdlog::level::err);
#ifdef FMHA_JIT_GPU_SUITE
  bool listing = false;
  for (int i = 1; i < argc; ++i) listing |= std::strncmp(argv[i], "--list", 6) == 0;
  if (!listing && !fmha_jit::gpu_available()) {
    std::printf("SKIPPED: no GPU is usable on this machine; gpu tests need one.\n");
    return 77;
  }
#endif
  return Catch::Session().run(argc, argv);
}
