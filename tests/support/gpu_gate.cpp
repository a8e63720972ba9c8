#include "support/gpu_gate.hpp"

#include "device/device_api.hpp"
#include "device/device_env.hpp"
#include "fmha_jit/error.hpp"

namespace fmha_jit::test {

GpuProbe probe_gpu() {
  GpuProbe probe;
  std::optional<std::string> choice;
  try {
    choice = device::device_from_env();
  } catch (const Error& e) {
    probe.device_env_error = e.what();
    return probe;
  }
  probe.hidden = choice == "none";
  // The order of the device layer's search (active_device: CUDA first).
  for (const auto& [name, api] :
       {std::pair{"cuda", &device::cuda_driver()}, std::pair{"hip", &device::hip_runtime()}}) {
    GpuProbe::Vendor v;
    v.name = name;
    v.searched = !probe.hidden && (!choice || *choice == name);
    v.present = api->present();
    v.available = api->available();
    v.reason = api->unavailable_reason();
    if (v.available) v.arch = api->arch();
    probe.vendors.push_back(std::move(v));
  }
  return probe;
}

GpuGate decide_gpu_gate(const GpuProbe& probe, const std::string& required_arch) {
  if (probe.device_env_error) return {GpuVerdict::fail, *probe.device_env_error};
  if (probe.hidden) return {GpuVerdict::skip, "FMHA_JIT_DEVICE=none hides every GPU"};
  // A GPU that is there but failed to come up is a fault, even where another vendor's works.
  std::string broken;
  for (const auto& v : probe.vendors) {
    if (v.searched && v.present && !v.available) {
      broken += (broken.empty() ? "" : "; ") + v.name + ": " + v.reason;
    }
  }
  if (!broken.empty()) return {GpuVerdict::fail, "a GPU is present but unusable: " + broken};
  for (const auto& v : probe.vendors) {
    if (!v.searched || !v.available) continue;
    if (!required_arch.empty() && v.arch != required_arch) {
      return {GpuVerdict::skip,
              "these cases need an " + required_arch + " GPU; GPU 0 (" + v.name + ") is " + v.arch};
    }
    return {GpuVerdict::run, ""};
  }
  std::string why;
  for (const auto& v : probe.vendors) {
    why += (why.empty() ? "" : "; ") + v.name + ": " +
           (v.searched ? v.reason : "not searched (FMHA_JIT_DEVICE)");
  }
  return {GpuVerdict::skip, "no GPU: " + why};
}

}  // namespace fmha_jit::test
