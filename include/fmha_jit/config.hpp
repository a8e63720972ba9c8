// FmhaKernelConfig: everything that selects one compiled kernel module.
//
// Each field is declared once in the struct and once in for_each_field(); JSON, the canonical form,
// validation messages, the cache key, the kernel name, the prebuild sweep and the tests all walk
// for_each_field(), so a new axis is added here and nowhere else. Run-time properties of a problem
// (shapes, strides and layout, window sizes, softmax scale) are not config fields: they never
// change the generated code.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include <nlohmann/json_fwd.hpp>

namespace fmha_jit {

enum class Family : std::uint8_t { fwd, bwd };
enum class DType : std::uint8_t { fp16, bf16 };
// Numbering matches FmhaMaskKind in templates/common/mask.h.
enum class MaskKind : std::uint8_t { none, causal_top_left, causal_bottom_right, sliding_window };
inline constexpr bool is_causal(MaskKind m) {
  return m == MaskKind::causal_top_left || m == MaskKind::causal_bottom_right;
}
// Which kernel family implements the config. `automatic` is resolved by kernels/resolve.cpp to
// the fastest implementation available for the arch; the resolved value enters the key.
//   reference: portable CUDA/HIP kernel, one block per row (GPU-side reference, AMD pipeline check)
//   mma_sm80:  FlashAttention-2-style tensor-core kernel (mma.sync m16n8k16, cp.async, ldmatrix)
//   wgmma_sm90a: Hopper kernels (TMA, wgmma, warp specialisation; the head dims of
//              kernels/wgmma_sm90a/tiles.cpp, served_hdims, with hdim_q = hdim_v).
//              Its binaries are sm_90a: a config for sm_90 that resolves to it is compiled for
//              sm_90a (the same GPUs; the arch-specific ISA adds wgmma and setmaxnreg)
enum class KernelImpl : std::uint8_t { automatic, reference, mma_sm80, wgmma_sm90a };

// Accepted spellings of each enum; the first spelling is canonical, the others are aliases accepted
// on input (the CLI's short forms).
template <class E>
struct EnumSpelling {
  E value;
  std::string_view name;
};
inline constexpr std::array<EnumSpelling<Family>, 2> kFamilyNames{{
    {Family::fwd, "fwd"},
    {Family::bwd, "bwd"},
}};
inline constexpr std::array<EnumSpelling<DType>, 2> kDTypeNames{{
    {DType::fp16, "fp16"},
    {DType::bf16, "bf16"},
}};
inline constexpr std::array<EnumSpelling<MaskKind>, 7> kMaskNames{{
    {MaskKind::none, "none"},
    {MaskKind::causal_top_left, "causal_top_left"},
    {MaskKind::causal_bottom_right, "causal_bottom_right"},
    {MaskKind::sliding_window, "sliding_window"},
    {MaskKind::causal_top_left, "causal"},
    {MaskKind::causal_bottom_right, "causal-br"},
    {MaskKind::sliding_window, "window"},
}};
inline constexpr std::array<EnumSpelling<KernelImpl>, 4> kImplNames{{
    {KernelImpl::automatic, "auto"},
    {KernelImpl::reference, "reference"},
    {KernelImpl::mma_sm80, "mma_sm80"},
    {KernelImpl::wgmma_sm90a, "wgmma_sm90a"},
}};

template <class E>
constexpr auto enum_spellings() {
  if constexpr (std::is_same_v<E, Family>) return kFamilyNames;
  if constexpr (std::is_same_v<E, DType>) return kDTypeNames;
  if constexpr (std::is_same_v<E, MaskKind>) return kMaskNames;
  if constexpr (std::is_same_v<E, KernelImpl>) return kImplNames;
}

template <class E>
constexpr std::string_view to_string(E value) {
  for (const auto& s : enum_spellings<E>())
    if (s.value == value) return s.name;
  return "?";
}

struct FmhaKernelConfig {
  Family family = Family::fwd;
  DType dtype = DType::fp16;
  int hdim_q = 128;
  int hdim_v = 128;
  std::string arch = "sm_90";  // sm_80, sm_86, sm_89, sm_90, sm_90a, gfx90a
  bool deterministic = false;  // bwd only: bit-identical dQ/dK/dV from run to run
  MaskKind mask = MaskKind::none;
  bool lse = true;  // fwd only: also write the log-sum-exp (needed by a later backward)
  // Packed variable-length batches: per-sequence offsets and lengths read from the problem's
  // cu_seqlens (include/fmha_jit/problem.hpp), masks applied per sequence.
  bool varlen = false;
  // Per-head sink logits (FwdTensors::sinks) join each row's softmax denominator; the backward
  // also yields their gradient.
  bool sinks = false;
  // The scaled scores s become softcap * tanh(s / softcap) (FmhaProblem::softcap) before the
  // mask and the softmax.
  bool softcap = false;
  KernelImpl impl = KernelImpl::automatic;
  // Tile shape and pipeline; 0 = filled by the family's heuristic (kernels/<family>/).
  int block_m = 0;
  int block_n = 0;
  int num_warps = 0;
  int num_stages = 0;

  bool operator==(const FmhaKernelConfig&) const = default;
};

// How a field is presented. `short_name` is its token in kernel names; `why` is why it is part of
// the config (and hence of the cache key): each of them changes the generated code.
struct FieldInfo {
  std::string_view name;
  std::string_view short_name;
  std::string_view why;
};

template <class Config, class Visitor>
void for_each_field(Config& c, Visitor&& visit) {
  visit(FieldInfo{"family", "", "selects the forward or the backward kernel set"}, c.family);
  visit(FieldInfo{"dtype", "", "element type of Q, K, V, O and the gradients"}, c.dtype);
  visit(FieldInfo{"hdim_q", "hq", "head dim of Q and K: register and shared tile sizes"}, c.hdim_q);
  visit(FieldInfo{"hdim_v", "hv", "head dim of V and O: accumulator tile size"}, c.hdim_v);
  visit(FieldInfo{"arch", "", "target ISA of the compiled binary"}, c.arch);
  visit(FieldInfo{"deterministic", "det", "bwd: ordered dQ/dK/dV accumulation"}, c.deterministic);
  visit(FieldInfo{"mask", "", "mask predicate and tile skipping compiled in"}, c.mask);
  visit(FieldInfo{"lse", "lse", "fwd: the LSE store is compiled in"}, c.lse);
  visit(FieldInfo{"varlen", "vl", "per-sequence offsets and lengths of packed batches"}, c.varlen);
  visit(FieldInfo{"sinks", "snk", "sink logits in the softmax denominator (bwd: their gradient)"},
        c.sinks);
  visit(FieldInfo{"softcap", "cap", "tanh softcapping of the scores (bwd: its derivative)"},
        c.softcap);
  visit(FieldInfo{"impl", "", "which kernel family implements the config"}, c.impl);
  visit(FieldInfo{"block_m", "bm", "query rows per thread block"}, c.block_m);
  visit(FieldInfo{"block_n", "bn", "key rows per main-loop iteration"}, c.block_n);
  visit(FieldInfo{"num_warps", "w", "warps per thread block"}, c.num_warps);
  visit(FieldInfo{"num_stages", "s", "shared-memory pipeline depth"}, c.num_stages);
}

// Vendor of an arch string ("sm_*" -> nvidia, "gfx*" -> amd).
enum class Vendor : std::uint8_t { nvidia, amd };
std::optional<Vendor> vendor_of(std::string_view arch);

// JSON: every field by name; enums by their canonical spelling. Parsing rejects unknown fields,
// wrong types and unknown enum spellings with a FieldError. A missing field takes its default,
// except hdim_v, which takes hdim_q when only hdim_q is given.
nlohmann::json to_json(const FmhaKernelConfig& config);
FmhaKernelConfig config_from_json(const nlohmann::json& j);

// Throws FieldError (code invalid_config) naming the first unsupported field, its value and the
// accepted values. Checks the config as given; tile fields left at 0 are accepted.
void validate(const FmhaKernelConfig& config);

// Canonical form: validated, fields that do not apply to the family reset to their neutral value
// (fwd: deterministic = false; bwd: lse = false), `impl` and the tile fields resolved by the
// heuristic. Two configs that generate the same code have the same canonical form.
FmhaKernelConfig canonicalize(const FmhaKernelConfig& config);

// Compact JSON text of the canonical form: the config's contribution to the cache key.
std::string canonical_string(const FmhaKernelConfig& config);

}  // namespace fmha_jit
