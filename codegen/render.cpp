#include "codegen/render.hpp"

#include <string>

#include "codegen/tile_shapes.hpp"
#include "fmha_jit/error.hpp"

namespace fmha_jit::codegen {
namespace {

const char* element_type(DType dtype) { return dtype == DType::bf16 ? "fmha_bf16" : "fmha_fp16"; }

// The template call each reference stage makes; its launch geometry is documented at the top of
// templates/reference/fmha_reference_{fwd,bwd}.h and mirrored by dispatcher/plan.cpp.
std::string reference_stage_call(StageRole role) {
  switch (role) {
    case StageRole::fwd:
      return "fmha_reference_fwd<Element, kHdimQ, kHdimV, kMaskKind, kWriteLse, kThreads>(p);";
    case StageRole::bwd_dot_do_o:
      return "fmha_reference_bwd_dot_do_o<Element, kHdimV, kThreads>(p);";
    case StageRole::bwd_dq:
      return "fmha_reference_bwd_dq<Element, kHdimQ, kHdimV, kMaskKind, kThreads>(p);";
    case StageRole::bwd_dkdv:
      return "fmha_reference_bwd_dkdv<Element, kHdimQ, kHdimV, kMaskKind, kThreads>(p);";
    case StageRole::bwd_dq_dk_dv:
    case StageRole::bwd_convert_dq: break;
  }
  return "";
}

// The template call of each tensor-core stage; geometry in templates/fwd/fmha_fwd_sm80.h and
// templates/bwd/fmha_bwd_sm80.h, mirrored by dispatcher/plan.cpp.
std::string mma_sm80_stage_call(StageRole role) {
  const std::string smem = "extern __shared__ __align__(128) char smem[];\n  ";
  switch (role) {
    case StageRole::fwd:
      return smem +
             "fmha_fwd_sm80<Element, kHdimQ, kHdimV, kMaskKind, kWriteLse, kBlockM, kBlockN, "
             "kNumWarps, kStages>(p, smem);";
    case StageRole::bwd_dot_do_o:
      return "fmha_bwd_sm80_dot_do_o<Element, kHdimQ, kHdimV, kBlockM, kNumWarps, "
             "kDeterministic>(p);";
    case StageRole::bwd_dq_dk_dv:
      return smem +
             "fmha_bwd_sm80_dq_dk_dv<Element, kHdimQ, kHdimV, kMaskKind, kDeterministic, "
             "kBlockM, kBlockN, kNumWarps, kStages>(p, smem);";
    case StageRole::bwd_convert_dq:
      return "fmha_bwd_sm80_convert_dq<Element, kHdimQ, kBlockM, kNumWarps>(p);";
    case StageRole::bwd_dq:
    case StageRole::bwd_dkdv: break;
  }
  return "";
}

// The Hopper stages; geometry in templates/fwd/fmha_fwd_sm90a.h and templates/bwd/fmha_bwd_sm90a.h
// (fmha_bwd_sm90a_hd256.h at hdim 256), mirrored by dispatcher/plan.cpp. The backward's row-wise
// stages are the sm_80 ones, reading the common parameters inside the Hopper struct.
std::string wgmma_sm90a_stage_call(const FmhaKernelConfig& c, StageRole role) {
  const std::string smem = "extern __shared__ __align__(1024) char smem[];\n  ";
  switch (role) {
    case StageRole::fwd:
      return smem +
             "fmha_fwd_sm90a<Element, kHdimQ, kMaskKind, kWriteLse, kBlockM, kBlockN, kStages>(p, "
             "smem);";
    case StageRole::bwd_dq_dk_dv:
      if (c.hdim_q == 256) {
        return smem +
               "fmha_bwd_sm90a_hd256_dq_dk_dv<Element, kMaskKind, kDeterministic, kStages>(p, "
               "smem);";
      }
      return smem +
             "fmha_bwd_sm90a_dq_dk_dv<Element, kHdimQ, kMaskKind, kDeterministic, kBlockM, "
             "kStages>(p, smem);";
    case StageRole::bwd_dot_do_o:
    case StageRole::bwd_convert_dq: {
      std::string call = mma_sm80_stage_call(role);
      return call.replace(call.rfind("(p)"), 3, "(p.bwd)");
    }
    case StageRole::bwd_dq:
    case StageRole::bwd_dkdv: break;
  }
  return "";
}

// The shape whose kSmemBytes a Hopper kernel's main stage lays out. The launch allocates
// wgmma_sm90a_smem_bytes (codegen/sm90a_tile_shapes.cpp), a mirror of that layout, so the entry
// asserts at compile time that the two agree: a mirror that drifts fails every compile of the
// kernel instead of letting TMA write past the allocation.
std::string wgmma_sm90a_shape_type(const FmhaKernelConfig& c) {
  if (c.family == Family::fwd) return "FmhaFwdSm90aShape<kHdimQ, kBlockM, kBlockN, kStages>";
  if (c.hdim_q == 256) return "FmhaBwdSm90aHd256Shape<kStages>";
  return "FmhaBwdSm90aShape<kHdimQ, kBlockM, kStages>";
}

// The header that defines the stage templates of an implementation.
const char* family_header(const FmhaKernelConfig& c) {
  if (c.impl == KernelImpl::wgmma_sm90a) {
    if (c.family == Family::fwd) return "fwd/fmha_fwd_sm90a.h";
    return c.hdim_q == 256 ? "bwd/fmha_bwd_sm90a_hd256.h" : "bwd/fmha_bwd_sm90a.h";
  }
  if (c.impl == KernelImpl::mma_sm80) {
    return c.family == Family::fwd ? "fwd/fmha_fwd_sm80.h" : "bwd/fmha_bwd_sm80.h";
  }
  return c.family == Family::fwd ? "reference/fmha_reference_fwd.h"
                                 : "reference/fmha_reference_bwd.h";
}

// The body of one stage's extern "C" wrapper.
std::string stage_body(const FmhaKernelConfig& c, StageRole role) {
  if (c.impl == KernelImpl::wgmma_sm90a) return wgmma_sm90a_stage_call(c, role);
  return c.impl == KernelImpl::mma_sm80 ? mma_sm80_stage_call(role) : reference_stage_call(role);
}

}  // namespace

RenderedEntry render_entry(const FmhaKernelConfig& c) {
  if (c.impl == KernelImpl::automatic) {
    throw Error(ErrorCode::invalid_config, "render_entry needs a canonical config (impl resolved)");
  }
  RenderedEntry out;
  const std::string base = kernel_base_name(c);
  out.file_name = base + "_entry.cu";
  // The reference kernels use block_n threads (a key chunk per pass); the tiled kernels one warp
  // of 32 threads per num_warps.
  const int threads = c.impl == KernelImpl::reference ? c.block_n : c.num_warps * 32;

  std::string& s = out.source;
  s += "// Generated by fmha-jit codegen from the canonical config:\n";
  s += "// " + canonical_string(c) + "\n";
  s += "#include \"common/fmha_params.h\"\n";
  s += "#include \"" + std::string(family_header(c)) + "\"\n";
  s += "\nnamespace {\n";
  s += "typedef " + std::string(element_type(c.dtype)) + " Element;\n";
  auto constant = [&s](const char* type, const char* name, const std::string& value) {
    s += std::string("[[maybe_unused]] constexpr ") + type + " " + name + " = " + value + ";\n";
  };
  constant("int", "kHdimQ", std::to_string(c.hdim_q));
  constant("int", "kHdimV", std::to_string(c.hdim_v));
  constant("int", "kMaskKind", std::to_string(static_cast<int>(c.mask)));
  constant("bool", "kWriteLse", c.lse ? "true" : "false");
  constant("bool", "kDeterministic", c.deterministic ? "true" : "false");
  constant("int", "kBlockM", std::to_string(c.block_m));
  constant("int", "kBlockN", std::to_string(c.block_n));
  constant("int", "kNumWarps", std::to_string(c.num_warps));
  constant("int", "kStages", std::to_string(c.num_stages));
  constant("int", "kThreads", std::to_string(threads));
  s += "}  // namespace\n";
  if (c.impl == KernelImpl::wgmma_sm90a) {
    s += "static_assert(" + wgmma_sm90a_shape_type(c) +
         "::kSmemBytes == " + std::to_string(wgmma_sm90a_smem_bytes(c)) +
         ",\n              \"the launch's shared memory (codegen/sm90a_tile_shapes.cpp) differs "
         "from the kernel's layout\");\n";
  }
  for (StageRole role : stage_roles(c)) {
    const std::string symbol = kernel_symbol(c, role);
    // The Hopper kernels take their tensor maps as a __grid_constant__ parameter (the copies
    // address them in parameter memory) and run one persistent CTA per SM.
    const bool hopper = c.impl == KernelImpl::wgmma_sm90a;
    const std::string params =
        std::string(hopper ? "const __grid_constant__ " : "") +
        (role == StageRole::fwd ? (hopper ? "FmhaFwdSm90Params" : "FmhaFwdParams")
                                : (hopper ? "FmhaBwdSm90Params" : "FmhaBwdParams"));
    const std::string bounds = hopper ? "kThreads, 1" : "kThreads";
    s += "\nextern \"C\" __global__ void __launch_bounds__(" + bounds + ") " + symbol + "(" +
         params + " p) {\n  " + stage_body(c, role) + "\n}\n";
    out.symbols.push_back(symbol);
  }
  return out;
}

}  // namespace fmha_jit::codegen
