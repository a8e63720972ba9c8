#include "codegen/kernel_name.hpp"

#include <type_traits>

namespace fmha_jit::codegen {

std::string_view to_string(StageRole role) {
  switch (role) {
    case StageRole::fwd: return "fwd";
    case StageRole::bwd_dot_do_o: return "dot_do_o";
    case StageRole::bwd_dq: return "dq";
    case StageRole::bwd_dkdv: return "dkdv";
    case StageRole::bwd_dq_dk_dv: return "dq_dk_dv";
    case StageRole::bwd_convert_dq: return "convert_dq";
    case StageRole::bwd_dsinks: return "dsinks";
  }
  return "?";
}

std::string kernel_base_name(const FmhaKernelConfig& c) {
  std::string name = "fmha";
  for_each_field(c, [&](const FieldInfo& info, const auto& value) {
    using T = std::decay_t<decltype(value)>;
    if constexpr (std::is_same_v<T, bool>) {
      if (value) name += "_" + std::string(info.short_name);
    } else if constexpr (std::is_same_v<T, int>) {
      name += "_" + std::string(info.short_name) + std::to_string(value);
    } else if constexpr (std::is_same_v<T, std::string>) {
      name += "_";
      for (char ch : value)
        if (ch != '_') name += ch;  // sm_90a -> sm90a
    } else {
      name += "_" + std::string(to_string(value));
    }
  });
  return name;
}

std::string kernel_symbol(const FmhaKernelConfig& c, StageRole role) {
  return kernel_base_name(c) + "_" + std::string(to_string(role));
}

}  // namespace fmha_jit::codegen
