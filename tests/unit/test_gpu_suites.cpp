// The gpu suites' verdict on a machine (tests/support/catch_main.cpp): a skip (exit 77, CTest's
// "Skipped") prints why, a FMHA_JIT_DEVICE value not accepted fails, and the Hopper cases live in
// a suite of their own, which skips as a whole on any other GPU rather than passing case by case.
#include <catch2/catch.hpp>

#include <set>
#include <sstream>
#include <string>

#include "dispatcher/device/device_api.hpp"
#include "fmha_jit/dispatcher.hpp"
#include "support/test_support.hpp"

using namespace fmha_jit;

namespace {

const std::string kGpuSuite = std::string(FMHA_JIT_TEST_BINARY_DIR) + "/fmha_jit_gpu_tests";
const std::string kHopperSuite = std::string(FMHA_JIT_TEST_BINARY_DIR) + "/fmha_jit_gpu_sm90_tests";

test::CommandResult run_suite(const std::string& suite, const std::string& env,
                              const std::string& args = "") {
  return test::run_command(env + " '" + suite + "' " + args + " 2>&1");
}

std::set<std::string> test_names(const std::string& suite) {
  const auto r = run_suite(suite, "", "--list-test-names-only");
  std::set<std::string> names;
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) names.insert(line);
  }
  return names;
}

}  // namespace

TEST_CASE("gpu suites: FMHA_JIT_DEVICE=none skips with the reason printed", "[gpu-suites]") {
  for (const auto& suite : {kGpuSuite, kHopperSuite}) {
    INFO(suite);
    const auto r = run_suite(suite, "FMHA_JIT_DEVICE=none");
    INFO(r.output);
    CHECK(r.status == 77);
    CHECK_THAT(r.output, Catch::Contains("SKIPPED: FMHA_JIT_DEVICE=none hides every GPU"));
  }
}

TEST_CASE("gpu suites: a FMHA_JIT_DEVICE value not accepted fails them", "[gpu-suites]") {
  for (const auto& suite : {kGpuSuite, kHopperSuite}) {
    INFO(suite);
    const auto r = run_suite(suite, "FMHA_JIT_DEVICE=gpu");
    INFO(r.output);
    CHECK(r.status == 1);
    CHECK_THAT(r.output, Catch::Contains("FAILED: FMHA_JIT_DEVICE = gpu is not supported"));
  }
}

TEST_CASE("gpu suites: without a GPU they skip, naming each vendor's reason", "[gpu-suites]") {
  if (gpu_available()) return;  // the suites run there
  for (const auto& suite : {kGpuSuite, kHopperSuite}) {
    INFO(suite);
    const auto r = run_suite(suite, "");
    INFO(r.output);
    CHECK(r.status == 77);
    CHECK_THAT(r.output, Catch::Contains("SKIPPED: no GPU: cuda: " +
                                         device::cuda_driver().unavailable_reason() +
                                         "; hip: " + device::hip_runtime().unavailable_reason()));
  }
}

TEST_CASE("gpu suites: the Hopper cases are a suite of their own", "[gpu-suites]") {
  const auto hopper = test_names(kHopperSuite);
  const auto general = test_names(kGpuSuite);
  CHECK(hopper.size() == 17);
  for (const auto& name : hopper) CHECK_THAT(name, Catch::StartsWith("gpu sm90a"));
  for (const auto& name : general) CHECK_THAT(name, !Catch::StartsWith("gpu sm90a"));
  CHECK(general.size() == 15);
}
