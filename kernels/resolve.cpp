// The public validate(), canonicalize() and canonical_string() (include/fmha_jit/config.hpp):
// the canonical form is the chosen family's, so they are implemented here, above the families.
#include "kernels/resolve.hpp"

#include <algorithm>
#include <array>
#include <nlohmann/json.hpp>
#include <string>

#include "core/arch.hpp"
#include "fmha_jit/error.hpp"
#include "kernels/registry.hpp"

namespace fmha_jit {
namespace kernels {
namespace {

// Head dims the kernels are generated for. Each needs its own register / shared-memory tiling;
// others would pad to the next one, which a caller can do more cheaply by padding the tensors.
constexpr std::array<int, 6> kHeadDims{32, 64, 96, 128, 192, 256};

std::string join(const auto& values) {
  std::string out;
  for (const auto& v : values) {
    if (!out.empty()) out += ", ";
    if constexpr (std::is_arithmetic_v<std::decay_t<decltype(v)>>) {
      out += std::to_string(v);
    } else {
      out += v;
    }
  }
  return out;
}

[[noreturn]] void reject(const char* field, const std::string& value, const std::string& accepted) {
  throw FieldError(ErrorCode::invalid_config, field, value, accepted);
}

// The fields every family depends on: head dims and the closed list of archs.
void check_common_fields(const FmhaKernelConfig& c) {
  if (std::find(kHeadDims.begin(), kHeadDims.end(), c.hdim_q) == kHeadDims.end()) {
    reject("hdim_q", std::to_string(c.hdim_q), join(kHeadDims));
  }
  // hdim_v = hdim_q everywhere, plus the (192, 128) shape of DeepSeek-style MLA heads.
  if (c.hdim_v != c.hdim_q && !(c.hdim_q == 192 && c.hdim_v == 128)) {
    reject("hdim_v", std::to_string(c.hdim_v),
           std::to_string(c.hdim_q) + (c.hdim_q == 192 ? ", 128" : "") +
               " (with hdim_q = " + std::to_string(c.hdim_q) + ")");
  }
  // hipRTC of ROCm 5.2 crashes on archs it does not know, so the arch list is closed and checked
  // here, before any compiler is touched.
  if (!find_arch(c.arch)) reject("arch", "\"" + c.arch + "\"", accepted_archs());
}

// The families other than `skip` that serve `c` on `arch`: what an impl that does not may be
// replaced by.
std::string other_impls(const KernelFamily& skip, const FmhaKernelConfig& c, const ArchInfo& arch) {
  std::string out = std::string(to_string(KernelImpl::automatic));
  for (const KernelFamily* f : families()) {
    if (f != &skip && f->targets(arch) && f->gap(c).empty()) {
      out += ", " + std::string(to_string(f->impl()));
    }
  }
  return out;
}

// The family of an explicit impl, refused with the reason where it does not serve `c`.
const KernelFamily& chosen_family(const FmhaKernelConfig& c, const ArchInfo& arch) {
  const KernelFamily& f = family_of(c.impl);
  const std::string name(to_string(c.impl));
  if (!f.targets(arch)) {
    reject("impl", name,
           other_impls(f, c, arch) + " (" + name + " serves " + std::string(f.archs_served()) +
               "; this config is for " + std::string(arch.name) + ")");
  }
  if (const std::string gap = f.gap(c); !gap.empty()) {
    reject("impl", name, other_impls(f, c, arch) + " (" + name + " does not serve " + gap + ")");
  }
  return f;
}

}  // namespace

ResolvedConfig resolve(const FmhaKernelConfig& given) {
  check_common_fields(given);
  const ArchInfo& arch = *find_arch(given.arch);
  FmhaKernelConfig c = given;
  // Fields that do not apply to the family are reset, so that e.g. a prebuild sweep over
  // deterministic x family yields one forward kernel, not two identical ones.
  if (c.family == Family::fwd) c.deterministic = false;  // the forward has no cross-block sums
  if (c.family == Family::bwd) c.lse = false;            // the backward always reads the LSE

  ResolvedConfig out;
  if (c.impl == KernelImpl::automatic) {
    std::string passed_over, every_gap;
    for (const KernelFamily* f : families()) {
      if (!f->targets(arch)) continue;
      if (const std::string gap = f->gap(c); !gap.empty()) {
        if (passed_over.empty()) {
          passed_over = std::string(to_string(f->impl())) + " does not serve " + gap;
        }
        every_gap += (every_gap.empty() ? "" : "; ") + std::string(to_string(f->impl())) +
                     " does not serve " + gap;
        continue;
      }
      out.family = f;
      break;
    }
    // An axis no family on this arch takes yet (packed batches and the score modifiers on AMD).
    if (out.family == nullptr) {
      reject("arch", "\"" + c.arch + "\"",
             "an arch with a kernel family for this config (" + every_gap + ")");
    }
    if (!passed_over.empty()) {
      out.fallback_reason = passed_over + "; using " + std::string(to_string(out.family->impl())) +
                            " on " + std::string(arch.name);
    }
  } else {
    out.family = &chosen_family(c, arch);
  }
  const KernelFamily& family = *out.family;

  const TileShape t = family.default_tile(arch, c);
  c.impl = family.impl();
  c.arch = family.compile_arch(arch);
  if (c.block_m == 0) c.block_m = t.block_m;
  if (c.block_n == 0) c.block_n = t.block_n;
  if (c.num_warps == 0) c.num_warps = t.num_warps;
  if (c.num_stages == 0) c.num_stages = t.num_stages;
  family.check_tile(*find_arch(c.arch), c);
  out.canonical = c;
  // Only where every tile field is the heuristic's: a tile the user chose is kept for every
  // problem.
  if (given.block_m == 0 && given.block_n == 0 && given.num_warps == 0 && given.num_stages == 0) {
    out.tile_variant = family.problem_tile_variant(given, c);
  }
  return out;
}

std::string impl_fallback_reason(const FmhaKernelConfig& config) {
  return resolve(config).fallback_reason;
}

std::optional<ProblemTileVariant> problem_tile_variant(const FmhaKernelConfig& config) {
  return resolve(config).tile_variant;
}

}  // namespace kernels

void validate(const FmhaKernelConfig& config) { (void)kernels::resolve(config); }

FmhaKernelConfig canonicalize(const FmhaKernelConfig& config) {
  return kernels::resolve(config).canonical;
}

std::string canonical_string(const FmhaKernelConfig& config) {
  // nlohmann::json objects keep keys sorted, so dump() of the canonical config is canonical text.
  return to_json(canonicalize(config)).dump();
}

}  // namespace fmha_jit
