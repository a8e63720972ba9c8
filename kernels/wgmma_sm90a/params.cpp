// Kernel arguments of the wgmma_sm90a kernels: the common parameters plus the tensor maps their
// bulk copies read (templates/fwd/fmha_fwd_sm90a.h, templates/bwd/fmha_bwd_sm90a.h), encoded
// through the driver per launch.
#include <algorithm>
#include <cstring>

#include "kernels/wgmma_sm90a/params.hpp"

namespace fmha_jit::kernels::wgmma_sm90a {
namespace {

// Every map is 4-D (head dim, sequence, head, batch) with boxes of 64 head-dim columns (128 bytes,
// the swizzle span) by `rows` sequence rows of one head: the slabs the kernel's descriptors expect.
FmhaTensorMap tensor_map(device::DeviceApi& api, DType dtype, const void* base,
                         const FmhaStrides& strides, int hdim, int seqlen, int heads, int batch,
                         int rows) {
  device::TensorMapSpec spec;
  spec.element =
      dtype == DType::bf16 ? device::TensorMapElement::bf16 : device::TensorMapElement::fp16;
  spec.base = base;
  spec.rank = 4;
  spec.dims = {static_cast<std::uint64_t>(hdim), static_cast<std::uint64_t>(seqlen),
               static_cast<std::uint64_t>(heads), static_cast<std::uint64_t>(batch), 0};
  constexpr std::uint64_t kElementBytes = 2;
  // A packed batch passes batch 1 with batch stride 0 (its tensors are one sequence of all its
  // tokens); the driver takes no zero stride, and a dimension of extent 1 is never stepped, so
  // the row stride stands in.
  const std::int64_t batch_stride = batch == 1 && strides.batch == 0 ? strides.row : strides.batch;
  spec.strides = {0, static_cast<std::uint64_t>(strides.row) * kElementBytes,
                  static_cast<std::uint64_t>(strides.head) * kElementBytes,
                  static_cast<std::uint64_t>(batch_stride) * kElementBytes, 0};
  spec.box = {64, static_cast<std::uint32_t>(rows), 1, 1, 0};
  spec.swizzle = device::TensorMapSwizzle::bytes128;
  const device::TensorMap encoded = api.encode_tensor_map(spec);
  FmhaTensorMap map;
  static_assert(sizeof map.opaque == sizeof encoded.words);
  std::memcpy(map.opaque, encoded.words.data(), sizeof map.opaque);
  return map;
}

// dq_accum, fp32 [B, Hq, Sq, hdim] contiguous, as 3-D (head dim, query row, batch x head) so that
// boxes clip at seqlen_q instead of running into the next head; boxes of 32 columns (128 bytes,
// the swizzle span) by the 64 rows of one warpgroup's dQ block.
FmhaTensorMap dq_accum_map(device::DeviceApi& api, float* dq_accum, int hdim, int seqlen,
                           int heads_times_batch) {
  device::TensorMapSpec spec;
  spec.element = device::TensorMapElement::fp32;
  spec.base = dq_accum;
  spec.rank = 3;
  constexpr std::uint64_t kFloatBytes = 4;
  spec.dims = {static_cast<std::uint64_t>(hdim), static_cast<std::uint64_t>(seqlen),
               static_cast<std::uint64_t>(heads_times_batch), 0, 0};
  spec.strides = {0, hdim * kFloatBytes, static_cast<std::uint64_t>(seqlen) * hdim * kFloatBytes, 0,
                  0};
  spec.box = {32, 64, 1, 0, 0};
  spec.swizzle = device::TensorMapSwizzle::bytes128;
  const device::TensorMap encoded = api.encode_tensor_map(spec);
  FmhaTensorMap map;
  std::memcpy(map.opaque, encoded.words.data(), sizeof map.opaque);
  return map;
}

}  // namespace

FmhaBwdSm90Params make_bwd_params(const FmhaKernelConfig& c, const FmhaBwdParams& bwd,
                                  device::DeviceApi& api) {
  FmhaBwdSm90Params params{};
  const FmhaFwdParams& f = bwd.fwd;
  params.q_map = tensor_map(api, c.dtype, f.q, f.q_strides, c.hdim_q, f.seqlen_q, f.nhead_q,
                            f.batch, c.block_m);
  params.k_map = tensor_map(api, c.dtype, f.k, f.k_strides, c.hdim_q, f.seqlen_k, f.nhead_k,
                            f.batch, c.block_n);
  params.v_map = tensor_map(api, c.dtype, f.v, f.v_strides, c.hdim_v, f.seqlen_k, f.nhead_k,
                            f.batch, c.block_n);
  params.do_map = tensor_map(api, c.dtype, bwd.d_o, bwd.do_strides, c.hdim_v, f.seqlen_q, f.nhead_q,
                             f.batch, c.block_m);
  params.dq_accum_map = dq_accum_map(api, bwd.dq_accum, c.hdim_q, f.seqlen_q, f.nhead_q * f.batch);
  params.bwd = bwd;
  return params;
}

FmhaFwdSm90Params make_fwd_params(const FmhaKernelConfig& c, const FmhaFwdParams& fwd,
                                  device::DeviceApi& api, const FwdSplitTail& split,
                                  void* split_workspace) {
  FmhaFwdSm90Params params{};
  const int hdim = c.hdim_q;
  // A packed batch's tensors are one sequence of all its tokens (batch 1); the kernel adds each
  // sequence's first row to its coordinates (templates/fwd/fmha_fwd_sm90a.h).
  // (At least one row: a batch of empty sequences launches CTAs that take no tile.)
  const int rows_q = c.varlen ? std::max(fwd.total_q, 1) : fwd.seqlen_q;
  const int rows_k = c.varlen ? std::max(fwd.total_k, 1) : fwd.seqlen_k;
  const int batch = c.varlen ? 1 : fwd.batch;
  params.q_map =
      tensor_map(api, c.dtype, fwd.q, fwd.q_strides, hdim, rows_q, fwd.nhead_q, batch, c.block_m);
  params.k_map =
      tensor_map(api, c.dtype, fwd.k, fwd.k_strides, hdim, rows_k, fwd.nhead_k, batch, c.block_n);
  params.v_map = tensor_map(api, c.dtype, fwd.v, fwd.v_strides, c.hdim_v, rows_k, fwd.nhead_k,
                            batch, c.block_n);
  // Each consumer warpgroup stores its own 64 rows.
  params.o_map =
      tensor_map(api, c.dtype, fwd.o, fwd.o_strides, c.hdim_v, rows_q, fwd.nhead_q, batch, 64);
  params.fwd = fwd;
  set_fwd_work(params, c, split, split_workspace);
  return params;
}

void set_fwd_work(FmhaFwdSm90Params& params, const FmhaKernelConfig& c, const FwdSplitTail& split,
                  void* split_workspace) {
  const FmhaFwdParams& fwd = params.fwd;
  params.num_m_blocks = (fwd.seqlen_q + c.block_m - 1) / c.block_m;
  params.num_tiles = params.num_m_blocks * fwd.nhead_q * fwd.batch;
  params.causal_section_heads = fwd.nhead_q * fwd.batch;  // one section; see the runner
  if (split.tiles > 0) {
    auto* base = static_cast<unsigned char*>(split_workspace);
    params.split_counters = reinterpret_cast<int*>(base);
    params.split_partials = reinterpret_cast<float*>(base + split.partials_offset);
    params.split_round = split.round;
    params.split_tiles = split.tiles;
    params.split_blocks = split.blocks;
    params.split_ctas = split.ctas;
  }
}

}  // namespace fmha_jit::kernels::wgmma_sm90a
