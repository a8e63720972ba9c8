#include "dispatcher/launch.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/mask.h"
#include "fmha_jit/error.hpp"
#include "kernels/common/key_tiles.hpp"
#include "kernels/registry.hpp"

namespace fmha_jit::dispatch {

// The device templates read these structs by value: pin the layout the host builds.
static_assert(sizeof(FmhaStrides) == 24);
static_assert(sizeof(FmhaFwdParams) == 5 * 8 + 4 * 24 + 11 * 4 + 4 + 3 * 8 + 2 * 4);
static_assert(sizeof(FmhaTensorMap) == 128 && alignof(FmhaTensorMap) == 64);
static_assert(sizeof(FmhaFwdSm90Params) == 4 * 128 + 320);
static_assert(offsetof(FmhaBwdSm90Params, bwd) == 5 * 128);
static_assert(static_cast<int>(MaskKind::none) == FMHA_MASK_NONE);
static_assert(static_cast<int>(MaskKind::causal_top_left) == FMHA_MASK_CAUSAL_TOP_LEFT);
static_assert(static_cast<int>(MaskKind::causal_bottom_right) == FMHA_MASK_CAUSAL_BOTTOM_RIGHT);
static_assert(static_cast<int>(MaskKind::sliding_window) == FMHA_MASK_SLIDING_WINDOW);

namespace {

[[noreturn]] void bad_problem(const std::string& field, const std::string& value,
                              const std::string& accepted) {
  throw FieldError(ErrorCode::invalid_problem, field, value, accepted);
}

void check_pointer(const char* name, const void* ptr, std::size_t alignment, bool required) {
  if (!ptr) {
    if (required) {
      throw FieldError(ErrorCode::invalid_argument, name, "null", "a device pointer");
    }
    return;
  }
  if (reinterpret_cast<std::uintptr_t>(ptr) % alignment != 0) {
    throw FieldError(ErrorCode::invalid_argument, name,
                     std::to_string(reinterpret_cast<std::uintptr_t>(ptr)),
                     "a pointer aligned to " + std::to_string(alignment) + " bytes");
  }
}

// A packed batch's tensors are one sequence of all its tokens: their batch strides are never
// stepped and pass as 0 (common/sequence.h advances the rows instead).
FmhaStrides strides_of(const char* name, const TensorStrides& s, std::size_t alignment,
                       std::size_t element_bytes, bool packed) {
  const std::size_t per = alignment / element_bytes;
  const std::int64_t batch = packed ? 0 : s.batch;
  for (auto [what, value] : {std::pair{"batch", batch}, {"head", s.head}, {"row", s.row}}) {
    if (value < 0 || (per > 1 && value % static_cast<std::int64_t>(per) != 0)) {
      throw FieldError(ErrorCode::invalid_argument, std::string(name) + " " + what + " stride",
                       std::to_string(value),
                       "a non-negative multiple of " + std::to_string(per) + " elements");
    }
  }
  return {batch, s.head, s.row};
}

// Refuses strides of an output under which two of its elements share an address: the CTAs'
// writes would race. Ordering the dimensions of extent > 1 by stride (hdim's is 1), each stride
// must be at least extent x stride of the next smaller one; a dimension of extent 1 is never
// stepped over, so its stride does not matter. Inputs are not checked: reading one element
// through several indices (aliasing, broadcasting) is harmless.
void check_output_strides(const char* name, const TensorStrides& s, std::int64_t batch,
                          std::int64_t heads, std::int64_t rows, std::int64_t hdim) {
  struct Dim {
    std::int64_t stride, extent;
  };
  std::vector<Dim> dims;  // those of extent > 1
  for (const Dim d : {Dim{1, hdim}, Dim{s.row, rows}, Dim{s.head, heads}, Dim{s.batch, batch}}) {
    if (d.extent > 1) dims.push_back(d);
  }
  std::sort(dims.begin(), dims.end(), [](Dim a, Dim b) { return a.stride < b.stride; });
  std::int64_t smallest_next = 1;  // the least stride the next dimension in the order may have
  bool overlap = false;
  for (const Dim d : dims) {
    overlap |= d.stride < smallest_next;
    // Saturated: past int64 no further dimension fits, and the next comparison refuses it.
    smallest_next = d.stride > std::numeric_limits<std::int64_t>::max() / d.extent
                        ? std::numeric_limits<std::int64_t>::max()
                        : d.stride * d.extent;
  }
  if (!overlap) return;
  throw FieldError(
      ErrorCode::invalid_argument, std::string(name) + " strides",
      "batch " + std::to_string(s.batch) + ", head " + std::to_string(s.head) + ", row " +
          std::to_string(s.row) + " (extents: batch " + std::to_string(batch) + ", heads " +
          std::to_string(heads) + ", rows " + std::to_string(rows) + ", hdim " +
          std::to_string(hdim) + ")",
      "strides under which no two elements of the output share an address: ordering the "
      "dimensions of extent > 1 by stride (hdim's is 1), each stride >= extent x stride of the "
      "next smaller one; a dimension of extent 1 takes any stride");
}

// Pointers and strides of Q, K, V and O, checked for alignment. O is the forward's output but
// one of the backward's inputs, so the callers check what they write.
FmhaFwdParams forward_tensor_params(const FmhaKernelConfig& c, const FmhaProblem& p,
                                    const FwdTensors& t) {
  const std::size_t align = kernels::required_alignment_bytes(c);
  check_pointer("q", t.q, align, true);
  check_pointer("k", t.k, align, true);
  check_pointer("v", t.v, align, true);
  check_pointer("o", t.o, align, true);
  check_pointer("lse", t.lse, sizeof(float), false);
  FmhaFwdParams params{};
  params.q = t.q;
  params.k = t.k;
  params.v = t.v;
  params.o = t.o;
  params.q_strides = strides_of("q", p.q_stride(), align, 2, p.varlen());
  params.k_strides = strides_of("k", p.k_stride(), align, 2, p.varlen());
  params.v_strides = strides_of("v", p.v_stride(), align, 2, p.varlen());
  params.o_strides = strides_of("o", p.o_stride(), align, 2, p.varlen());
  params.batch = static_cast<int>(p.batch);
  params.nhead_q = static_cast<int>(p.nhead_q);
  params.nhead_k = static_cast<int>(p.nhead_k);
  params.seqlen_q = static_cast<int>(p.seqlen_q);
  params.seqlen_k = static_cast<int>(p.seqlen_k);
  params.window_left = p.window_left;
  params.window_right = p.window_right;
  params.scale = p.softmax_scale();
  constexpr float kLog2e = 1.4426950408889634f;
  params.scale_log2 = params.scale * kLog2e;
  if (c.softcap) {
    // The capped scores are already scaled (common/score_mods.h).
    params.softcap = p.softcap;
    params.softcap_scale = params.scale / p.softcap;
    params.scale_log2 = kLog2e;
  }
  if (p.varlen()) {
    params.cu_seqlens_q = p.cu_seqlens_q;
    params.cu_seqlens_k = p.cu_seqlens_k;
    params.total_q = static_cast<int>(p.total_q);
    params.total_k = static_cast<int>(p.total_k);
  }
  return params;
}

// The sink logits a sinks kernel reads, or none for a kernel without them (which would ignore
// the caller's: a different attention than asked for).
const float* sinks_of(const FmhaKernelConfig& c, const float* sinks) {
  check_pointer("sinks", sinks, sizeof(float), c.sinks);
  if (sinks && !c.sinks) {
    throw FieldError(ErrorCode::invalid_argument, "sinks",
                     std::to_string(reinterpret_cast<std::uintptr_t>(sinks)),
                     "null (the kernel's config has sinks = false; set up a config with sinks = "
                     "true to use them)");
  }
  return sinks;
}

// Output strides of a tensor with `rows` query or key rows per sequence: a packed batch is one
// sequence of all its tokens.
void check_output_strides_of(const char* name, const FmhaProblem& p, const TensorStrides& s,
                             std::int64_t heads, bool query_rows, std::int64_t hdim) {
  const std::int64_t rows =
      p.varlen() ? (query_rows ? p.total_q : p.total_k) : (query_rows ? p.seqlen_q : p.seqlen_k);
  check_output_strides(name, s, p.varlen() ? 1 : p.batch, heads, rows, hdim);
}

}  // namespace

void check_problem(const FmhaKernelConfig& c, const FmhaProblem& p) {
  p.validate();
  if (p.hdim_q != c.hdim_q) {
    bad_problem("hdim_q", std::to_string(p.hdim_q),
                std::to_string(c.hdim_q) + " (the kernel's hdim_q)");
  }
  if (p.hdim_v != c.hdim_v) {
    bad_problem("hdim_v", std::to_string(p.hdim_v),
                std::to_string(c.hdim_v) + " (the kernel's hdim_v)");
  }
  kernels::family_of(c.impl).check_problem(c, p);
  if (c.varlen != p.varlen()) {
    bad_problem(!p.cu_seqlens_q && p.cu_seqlens_k ? "cu_seqlens_k" : "cu_seqlens_q",
                p.varlen() ? "set" : "null",
                c.varlen ? "device arrays of batch + 1 int32 (the kernel's config has varlen = "
                           "true: a packed batch)"
                         : "null (the kernel's config has varlen = false: a dense batch; set up a "
                           "config with varlen = true for packed sequences)");
  }
  if (c.softcap != (p.softcap != 0)) {
    bad_problem("softcap", std::to_string(p.softcap),
                c.softcap ? "> 0 (the kernel's config has softcap = true)"
                          : "0 (the kernel's config has softcap = false; set up a config with "
                            "softcap = true to cap the scores)");
  }
  // Window sizes only mean something to a sliding-window kernel; silently ignoring them would run
  // a different attention than the caller asked for.
  if (c.mask != MaskKind::sliding_window && (p.window_left != -1 || p.window_right != -1)) {
    bad_problem(p.window_left != -1 ? "window_left" : "window_right",
                std::to_string(p.window_left != -1 ? p.window_left : p.window_right),
                "-1 (the kernel's mask is " + std::string(to_string(c.mask)) +
                    "; window sizes need mask sliding_window)");
  }
}

FmhaFwdParams make_fwd_params(const FmhaKernelConfig& c, const FmhaProblem& p,
                              const FwdTensors& t) {
  // A kernel built without the LSE store would leave the caller's buffer unwritten.
  if (t.lse && !c.lse) {
    throw FieldError(ErrorCode::invalid_argument, "lse",
                     std::to_string(reinterpret_cast<std::uintptr_t>(t.lse)),
                     "null (the kernel's config has lse = false, so it writes no LSE; set up a "
                     "config with lse = true to get one)");
  }
  FmhaFwdParams params = forward_tensor_params(c, p, t);
  params.lse = t.lse;
  params.sinks = sinks_of(c, t.sinks);
  check_output_strides_of("o", p, p.o_stride(), p.nhead_q, true, p.hdim_v);
  return params;
}

FmhaBwdParams make_bwd_params(const FmhaKernelConfig& c, const FmhaProblem& p, const BwdTensors& t,
                              void* workspace) {
  FmhaBwdParams params{};
  check_pointer("lse", t.lse, sizeof(float), true);
  // O is an input here: it may alias or broadcast like Q, K and V.
  params.fwd = forward_tensor_params(
      c, p, {t.q, t.k, t.v, const_cast<void*>(t.o), const_cast<float*>(t.lse)});
  params.fwd.lse = const_cast<float*>(t.lse);  // the backward always reads the LSE
  const std::size_t align = kernels::required_alignment_bytes(c);
  check_pointer("d_o", t.d_o, align, true);
  check_pointer("d_q", t.d_q, align, true);
  check_pointer("d_k", t.d_k, align, true);
  check_pointer("d_v", t.d_v, align, true);
  params.d_o = t.d_o;
  params.d_q = t.d_q;
  params.d_k = t.d_k;
  params.d_v = t.d_v;
  params.do_strides = strides_of("d_o", p.do_stride(), align, 2, p.varlen());
  params.dq_strides = strides_of("d_q", p.dq_stride(), align, 2, p.varlen());
  params.dk_strides = strides_of("d_k", p.dk_stride(), align, 2, p.varlen());
  params.dv_strides = strides_of("d_v", p.dv_stride(), align, 2, p.varlen());
  check_output_strides_of("d_q", p, p.dq_stride(), p.nhead_q, true, p.hdim_q);
  check_output_strides_of("d_k", p, p.dk_stride(), p.nhead_k, false, p.hdim_q);
  check_output_strides_of("d_v", p, p.dv_stride(), p.nhead_k, false, p.hdim_v);
  params.fwd.sinks = sinks_of(c, t.sinks);
  check_pointer("d_sinks", t.d_sinks, sizeof(float), c.sinks);
  if (t.d_sinks && !c.sinks) {
    throw FieldError(ErrorCode::invalid_argument, "d_sinks",
                     std::to_string(reinterpret_cast<std::uintptr_t>(t.d_sinks)),
                     "null (the kernel's config has sinks = false)");
  }
  params.d_sinks = t.d_sinks;
  if (workspace) place_bwd_workspace(params, c, p, workspace);
  // The launch-order fields' neutral values; a family that plans them (the Hopper backward) sets
  // them per call.
  params.det_group_heads = 1;
  params.causal_section_pairs = 1;
  return params;
}

void place_bwd_workspace(FmhaBwdParams& params, const FmhaKernelConfig& c, const FmhaProblem& p,
                         void* workspace) {
  const kernels::BwdWorkspaceLayout w = kernels::bwd_workspace_layout(c, p);
  auto* base = static_cast<unsigned char*>(workspace);
  params.d_rowsum = reinterpret_cast<float*>(base + w.d_rowsum);
  if (w.dq_accum != kernels::BwdWorkspaceLayout::npos) {
    params.dq_accum = reinterpret_cast<float*>(base + w.dq_accum);
  }
  if (w.semaphores != kernels::BwdWorkspaceLayout::npos) {
    params.semaphores = reinterpret_cast<int*>(base + w.semaphores);
  }
  if (w.dsink_rows != kernels::BwdWorkspaceLayout::npos) {
    params.dsink_rows = reinterpret_cast<float*>(base + w.dsink_rows);
  }
  if (w.split_dkdv != kernels::BwdWorkspaceLayout::npos) {
    params.split_dkdv = reinterpret_cast<float*>(base + w.split_dkdv);
    params.split_counters = reinterpret_cast<int*>(base + w.split_counters);
  }
}

}  // namespace fmha_jit::dispatch

namespace fmha_jit {

BwdWorkspaceSize bwd_workspace_size(const FmhaProblem& problem, const FmhaKernelConfig& config) {
  if (config.family != Family::bwd) {
    throw FieldError(ErrorCode::invalid_config, "family", std::string(to_string(config.family)),
                     "bwd (only the backward needs a workspace)");
  }
  problem.validate();
  const FmhaKernelConfig c = canonicalize(config);
  const kernels::BwdWorkspaceLayout w = kernels::bwd_workspace_layout(c, problem);
  BwdWorkspaceSize s;
  s.total = w.total;
  auto rounded = [](std::size_t bytes) { return kernels::align_up(bytes, 256); };
  s.dq_accum = rounded(w.dq_accum_bytes);
  s.semaphores = rounded(w.semaphores_bytes);
  s.split_tail = w.split_bytes;
  s.d_rowsum = s.total - s.dq_accum - s.semaphores - s.split_tail;
  return s;
}

}  // namespace fmha_jit
