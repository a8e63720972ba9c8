// The Hopper building blocks (templates/sm90: mbarrier, bulk tensor copies, wgmma) under NVRTC:
// probe kernels that use each of them (every wgmma instance, the bulk loads, stores and reduce), a
// 64 x 64 x 64 tile GEMM loaded by TMA and multiplied by wgmma, compiles for sm_90a without spills,
// and is refused for plain sm_90 (wgmma exists only on sm_90a) with a log that names the
// instruction. tests/gpu/test_gpu_sm90_probe.cpp runs the GEMM on the GPU; here no GPU is needed.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "fmha_jit/error.hpp"
#include "support/sm90_probe.hpp"

using namespace fmha_jit;

TEST_CASE("rtc: the sm_90a building blocks compile for sm_90a with 0 spills", "[rtc]") {
  const auto out = test::compile_sm90_probe("sm_90a");
  CHECK(out.binary.size() > 64);
  REQUIRE(out.resources.size() == 4);
  for (const auto& r : out.resources) {
    INFO(r.symbol);
    CHECK((r.symbol == "fmha_sm90_probe_gemm" || r.symbol == "fmha_sm90_probe_gemm_nmajor" ||
           r.symbol == "fmha_sm90_probe_instances" || r.symbol == "fmha_sm90_probe_handoff"));
    CHECK(r.registers > 0);
    CHECK(r.spill_store_bytes == 0);
    CHECK(r.spill_load_bytes == 0);
    CHECK(r.stack_frame_bytes == 0);
  }
}

TEST_CASE("rtc: wgmma is refused for plain sm_90, and the log says why", "[rtc]") {
  try {
    test::compile_sm90_probe("sm_90");
    FAIL("sm_90 accepted wgmma");
  } catch (const CompileError& e) {
    INFO(e.what() << "\n" << e.log());
    CHECK(std::string(e.what()).find("sm_90") != std::string::npos);
    CHECK(e.log().find("wgmma") != std::string::npos);
  }
}
