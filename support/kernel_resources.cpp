#include "support/kernel_resources.hpp"

#include <nlohmann/json.hpp>

namespace fmha_jit::support {

nlohmann::json to_json(const KernelResources& r) {
  return {{"symbol", r.symbol},
          {"registers", r.registers},
          {"spill_store_bytes", r.spill_store_bytes},
          {"spill_load_bytes", r.spill_load_bytes},
          {"stack_frame_bytes", r.stack_frame_bytes},
          {"static_smem_bytes", r.static_smem_bytes},
          {"wgmma_serialized", r.wgmma_serialized}};
}

KernelResources resources_from_json(const nlohmann::json& j) {
  KernelResources r;
  r.symbol = j.value("symbol", "");
  r.registers = j.value("registers", -1);
  r.spill_store_bytes = j.value("spill_store_bytes", -1);
  r.spill_load_bytes = j.value("spill_load_bytes", -1);
  r.stack_frame_bytes = j.value("stack_frame_bytes", -1);
  r.static_smem_bytes = j.value("static_smem_bytes", -1);
  r.wgmma_serialized = j.value("wgmma_serialized", false);
  return r;
}

}  // namespace fmha_jit::support
