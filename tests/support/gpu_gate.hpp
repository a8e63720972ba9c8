// Whether a gpu test suite runs on this machine, is skipped (CTest's exit 77) or fails, and the
// reason printed with it. A machine without a GPU, or whose GPUs FMHA_JIT_DEVICE=none hides, skips;
// a GPU whose driver fails to bring it up, or a FMHA_JIT_DEVICE value not accepted, fails; a suite
// that needs one arch (the Hopper cases) skips on a GPU of another.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace fmha_jit::test {

// What the device layer says, gathered by probe_gpu() or written by a test.
struct GpuProbe {
  struct Vendor {
    std::string name;      // "cuda", "hip": the FMHA_JIT_DEVICE spelling
    bool searched = true;  // FMHA_JIT_DEVICE did not restrict the search to the other vendor
    bool present = false;  // DeviceApi::present()
    bool available = false;
    std::string reason;  // DeviceApi::unavailable_reason()
    std::string arch;    // of GPU 0, when available
  };
  std::optional<std::string> device_env_error;  // FMHA_JIT_DEVICE holds a value not accepted
  bool hidden = false;                          // FMHA_JIT_DEVICE=none
  std::vector<Vendor> vendors;                  // in the device layer's search order
};

GpuProbe probe_gpu();

enum class GpuVerdict { run, skip, fail };

struct GpuGate {
  GpuVerdict verdict = GpuVerdict::skip;
  std::string reason;  // empty for run
};

// `required_arch`: the arch a suite's cases need (empty: any GPU).
GpuGate decide_gpu_gate(const GpuProbe& probe, const std::string& required_arch);

}  // namespace fmha_jit::test
