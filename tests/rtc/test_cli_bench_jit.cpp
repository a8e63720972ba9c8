// `fmha-jit bench-jit` end to end with real compiles (NVRTC, no GPU needed): the cold compile is
// measured once per kernel per round, and each kernel's figures are reported by name.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

#include "support/test_support.hpp"

using namespace fmha_jit;

TEST_CASE("bench-jit: --cold-rounds compiles every kernel once per round", "[rtc][cli]") {
  test::TempDir tmp;
  const auto sweep = tmp.path() / "sweep.json";
  // Two reference kernels (seconds to compile): both families, so the per-kernel rows differ.
  std::ofstream(sweep) << R"({"family": ["fwd", "bwd"], "impl": "reference", "arch": "sm_90"})";
  const auto r =
      test::run_command(std::string(FMHA_JIT_CLI) + " bench-jit --config '" + sweep.string() +
                        "' --cold-rounds 3 --repeat 1 --hot-calls 2 --json 2>/dev/null");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.output);
  CHECK(j.at("kernels") == 2);
  CHECK(j.at("cold_compile_s").at("samples") == 6);
  const auto& per_kernel = j.at("cold_compile_per_kernel_s");
  REQUIRE(per_kernel.size() == 2);
  CHECK(per_kernel[0].at("kernel") != per_kernel[1].at("kernel"));
  for (const auto& k : per_kernel) {
    CHECK(k.at("samples") == 3);
    CHECK(k.at("min") > 0.0);
    CHECK(k.at("min") <= k.at("median"));
    CHECK(k.at("median") <= k.at("max"));
  }
  // Slowest median first.
  CHECK(per_kernel[0].at("median") >= per_kernel[1].at("median"));
}
