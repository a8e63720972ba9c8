// The gpu suites' verdict on a machine (tests/support/catch_main.cpp): a skip (exit 77, CTest's
// "Skipped") prints why, a FMHA_JIT_DEVICE value not accepted fails, and the Hopper cases live in
// a suite of their own, which skips as a whole on any other GPU rather than passing case by case.
#include <catch2/catch.hpp>

#include <set>
#include <sstream>
#include <string>

#include "device/device_api.hpp"
#include "fmha_jit/dispatcher.hpp"
#include "support/gpu_gate.hpp"
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
  const bool any_present = device::cuda_driver().present() || device::hip_runtime().present();
  if (gpu_available() || any_present) return;  // they run there, or fail (the cases below)
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

TEST_CASE("gpu suites: this machine's verdict is the one the gate gives", "[gpu-suites]") {
  const auto gate = test::decide_gpu_gate(test::probe_gpu(), "");
  INFO("verdict " << static_cast<int>(gate.verdict) << ": " << gate.reason);
  if (gate.verdict == test::GpuVerdict::run) return;  // running the cases is the gpu label's job
  const auto r = run_suite(kGpuSuite, "");
  INFO(r.output);
  CHECK(r.status == (gate.verdict == test::GpuVerdict::skip ? 77 : 1));
  CHECK_THAT(r.output, Catch::Contains(gate.reason));
}

TEST_CASE("gpu suites: the Hopper cases are a suite of their own", "[gpu-suites]") {
  const auto hopper = test_names(kHopperSuite);
  const auto general = test_names(kGpuSuite);
  CHECK_FALSE(hopper.empty());
  for (const auto& name : hopper) CHECK_THAT(name, Catch::StartsWith("gpu sm90a"));
  for (const auto& name : general) CHECK_THAT(name, !Catch::StartsWith("gpu sm90a"));
  CHECK_FALSE(general.empty());
}

namespace {

// A machine as the device layer would describe it: CUDA first, then HIP, both searched.
test::GpuProbe machine(test::GpuProbe::Vendor cuda, test::GpuProbe::Vendor hip) {
  cuda.name = "cuda";
  hip.name = "hip";
  test::GpuProbe probe;
  probe.vendors = {cuda, hip};
  return probe;
}

test::GpuProbe::Vendor absent(const char* reason) { return {"", true, false, false, reason, ""}; }
test::GpuProbe::Vendor broken(const char* reason) { return {"", true, true, false, reason, ""}; }
test::GpuProbe::Vendor working(const char* arch) { return {"", true, true, true, "", arch}; }

}  // namespace

TEST_CASE("gpu gate: no GPU skips, a GPU that does not come up fails", "[gpu-suites]") {
  using test::GpuVerdict;
  auto gate = test::decide_gpu_gate(
      machine(absent("no NVIDIA driver"), absent("the HIP runtime reports no GPU")), "");
  CHECK(gate.verdict == GpuVerdict::skip);
  CHECK(gate.reason == "no GPU: cuda: no NVIDIA driver; hip: the HIP runtime reports no GPU");

  // The driver is there and reports a device, but bringing it up failed: a fault.
  gate = test::decide_gpu_gate(
      machine(broken("cuInit failed: CUDA_ERROR_UNKNOWN"), absent("no HIP runtime")), "");
  CHECK(gate.verdict == GpuVerdict::fail);
  CHECK_THAT(gate.reason, Catch::Contains("present but unusable") &&
                              Catch::Contains("cuda: cuInit failed: CUDA_ERROR_UNKNOWN"));
  gate = test::decide_gpu_gate(
      machine(absent("no NVIDIA driver"), broken("hipInit failed: no ROCm-capable device")), "");
  CHECK(gate.verdict == GpuVerdict::fail);
  CHECK_THAT(gate.reason, Catch::Contains("hip: hipInit failed"));
  // Even with the other vendor's GPU working.
  gate = test::decide_gpu_gate(machine(broken("cuInit failed"), working("gfx90a")), "");
  CHECK(gate.verdict == GpuVerdict::fail);

  // FMHA_JIT_DEVICE: none skips on purpose; cuda leaves a broken HIP GPU unsearched; a value not
  // accepted fails.
  auto hidden = machine(working("sm_90"), absent("no HIP runtime"));
  hidden.hidden = true;
  for (auto& v : hidden.vendors) v.searched = false;
  gate = test::decide_gpu_gate(hidden, "");
  CHECK(gate.verdict == GpuVerdict::skip);
  CHECK(gate.reason == "FMHA_JIT_DEVICE=none hides every GPU");
  auto only_cuda = machine(working("sm_80"), broken("hipInit failed"));
  only_cuda.vendors[1].searched = false;
  CHECK(test::decide_gpu_gate(only_cuda, "").verdict == GpuVerdict::run);
  test::GpuProbe bad_env;
  bad_env.device_env_error = "FMHA_JIT_DEVICE = gpu is not supported; accepted: none, cuda, hip";
  gate = test::decide_gpu_gate(bad_env, "");
  CHECK(gate.verdict == GpuVerdict::fail);
  CHECK(gate.reason == *bad_env.device_env_error);
}

TEST_CASE("gpu gate: a suite of one arch runs on that arch and skips on any other",
          "[gpu-suites]") {
  using test::GpuVerdict;
  const auto hopper = machine(working("sm_90"), absent("no HIP runtime"));
  const auto ampere = machine(working("sm_80"), absent("no HIP runtime"));
  CHECK(test::decide_gpu_gate(hopper, "sm_90").verdict == GpuVerdict::run);
  CHECK(test::decide_gpu_gate(ampere, "").verdict == GpuVerdict::run);
  const auto gate = test::decide_gpu_gate(ampere, "sm_90");
  CHECK(gate.verdict == GpuVerdict::skip);
  CHECK(gate.reason == "these cases need an sm_90 GPU; GPU 0 (cuda) is sm_80");
  // The arch is that of the GPU the device layer picks: CUDA first.
  CHECK(test::decide_gpu_gate(machine(working("sm_90"), working("gfx90a")), "sm_90").verdict ==
        GpuVerdict::run);
  CHECK(test::decide_gpu_gate(machine(absent("none"), working("gfx90a")), "sm_90").verdict ==
        GpuVerdict::skip);
}
