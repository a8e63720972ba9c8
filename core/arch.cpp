#include "core/arch.hpp"

#include <array>

namespace fmha_jit {
namespace {

// Shared-memory opt-in limits per block from the CUDA programming guide's compute-capability table
// (8.0: 163 KB, 8.6/8.9: 99 KB, 9.0: 227 KB) and the CDNA2 ISA (gfx90a: 64 KB LDS).
constexpr std::array<ArchInfo, 6> kArchs{{
    {"sm_80", Vendor::nvidia, 32, 163 * 1024, false},
    {"sm_86", Vendor::nvidia, 32, 99 * 1024, false},
    {"sm_89", Vendor::nvidia, 32, 99 * 1024, false},
    {"sm_90", Vendor::nvidia, 32, 227 * 1024, false},
    {"sm_90a", Vendor::nvidia, 32, 227 * 1024, true},
    {"gfx90a", Vendor::amd, 64, 64 * 1024, false},
}};

}  // namespace

const ArchInfo* find_arch(std::string_view name) {
  for (const auto& a : kArchs)
    if (a.name == name) return &a;
  return nullptr;
}

std::span<const std::string_view> arch_names() {
  static const auto names = [] {
    std::array<std::string_view, kArchs.size()> out;
    for (std::size_t i = 0; i < kArchs.size(); ++i) out[i] = kArchs[i].name;
    return out;
  }();
  return names;
}

std::string accepted_archs() {
  std::string out;
  for (const auto& a : kArchs) {
    if (!out.empty()) out += ", ";
    out += a.name;
  }
  return out;
}

}  // namespace fmha_jit
