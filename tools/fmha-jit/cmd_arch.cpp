// `fmha-jit arch`: what this machine offers the JIT: the arch kernels are built for by default,
// the GPU (if any) and which run-time compilers load. The first thing to run when a setup fails.
#include <spdlog/fmt/fmt.h>

#include <nlohmann/json.hpp>

#include <sstream>

#include "codegen/rtc/compiler.hpp"
#include "device/device_api.hpp"
#include "device/device_env.hpp"
#include "fmha_jit/device.hpp"
#include "fmha_jit/dispatcher.hpp"
#include "fmha_jit/error.hpp"
#include "tools/fmha-jit/cli.hpp"

namespace fmha_jit::cli {
namespace {

struct Probe {
  bool ok = false;
  std::string text;  // version, or why not
};

Probe probe_compiler(const codegen::rtc::RtcCompiler& (*get)()) {
  try {
    return {true, get().version()};
  } catch (const Error& e) {  // rtc_unavailable, with what to install
    return {false, e.what()};
  }
}

// Why detect_gpu_arch() answered what it did; mirrors its documented order.
std::string arch_origin(bool gpu) {
  if (gpu) return "detected on GPU 0";
  return device::arch_from_env() ? "from FMHA_JIT_ARCH, no GPU"
                                 : "default, no GPU; FMHA_JIT_ARCH overrides";
}

std::string reason_or(const std::string& reason, const char* fallback) {
  return reason.empty() ? fallback : reason;
}

// Continuation lines of multi-line reasons, aligned under the value column.
std::string align(const std::string& text) {
  std::istringstream in(text);
  std::string line, out;
  for (bool first = true; std::getline(in, line); first = false) {
    out += (first ? "" : "\n            ") + line;
  }
  return out;
}

void run_arch(bool json) {
  const bool gpu = gpu_available();
  const std::string arch = detect_gpu_arch();
  nlohmann::json j = {{"arch", arch}, {"arch_origin", arch_origin(gpu)}, {"gpu", gpu}};
  if (gpu) {
    j["gpu_name"] = gpu_name();
    j["multiprocessors"] = gpu_multiprocessor_count();
  } else {
    j["cuda_unavailable"] =
        reason_or(device::cuda_driver().unavailable_reason(), "hidden by FMHA_JIT_DEVICE");
    j["hip_unavailable"] =
        reason_or(device::hip_runtime().unavailable_reason(), "hidden by FMHA_JIT_DEVICE");
  }
  const Probe nvrtc = probe_compiler(&codegen::rtc::nvrtc_compiler);
  const Probe hiprtc = probe_compiler(&codegen::rtc::hiprtc_compiler);
  j["nvrtc"] = {{"available", nvrtc.ok}, {nvrtc.ok ? "version" : "reason", nvrtc.text}};
  j["hiprtc"] = {{"available", hiprtc.ok}, {hiprtc.ok ? "version" : "reason", hiprtc.text}};
  if (json) {
    fmt::print("{}\n", j.dump(2));
    return;
  }
  fmt::print("arch:       {} ({})\n", arch, j["arch_origin"].get<std::string>());
  if (gpu) {
    fmt::print("gpu:        {}, {} multiprocessors\n", j["gpu_name"].get<std::string>(),
               j["multiprocessors"].get<int>());
  } else {
    fmt::print("gpu:        none found\n");
    fmt::print("  cuda:     {}\n", align(j["cuda_unavailable"].get<std::string>()));
    fmt::print("  hip:      {}\n", align(j["hip_unavailable"].get<std::string>()));
  }
  auto print_probe = [](const char* name, const Probe& p) {
    fmt::print("{:<12}{}{}\n", std::string(name) + ":", p.ok ? "" : "unavailable: ", align(p.text));
  };
  print_probe("nvrtc", nvrtc);
  print_probe("hiprtc", hiprtc);
}

}  // namespace

Command add_arch_command(CLI::App& app, const GlobalOptions&) {
  auto json = std::make_shared<bool>(false);
  auto* sub = app.add_subcommand("arch", "Show the target arch, the GPU and the RTC compilers");
  sub->add_flag("--json", *json, "Print JSON");
  return {sub, [json] { run_arch(*json); }};
}

}  // namespace fmha_jit::cli
