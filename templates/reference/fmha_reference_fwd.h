// Reference attention forward (O and optional LSE): the GPU-side correctness oracle.
//
// Plainly written and portable (NVRTC and hipRTC), fp32 accumulation, no tensor cores.
//
// Launch geometry (the dispatcher relies on exactly this):
//   grid  = (seqlen_q, nhead_q, batch)   one block per query row
//   block = kThreads threads (1-D), a whole number of warps (128 is the intended value)
//   dynamic shared memory = 0            (static shared memory only)
//
// Each warp runs its own online softmax over an interleaved subset of the row's visible keys,
// holding its slice of Q and of the output accumulator lane-strided in registers (lane l owns
// elements l, l + W, l + 2W, ... of a row, so every row load is coalesced). The warps' partial
// results are merged in warp order at the end, so the result is deterministic.
#pragma once

#include "common/fmha_params.h"
#include "common/mask.h"
#include "common/numeric.h"
#include "common/platform.h"

// ---------------------------------------------------------------------------------------------
// Helpers shared with reference/fmha_reference_bwd.h.

// One row of kDim elements, lane-strided across a warp. Elements past kDim read as zero, so
// partial dot products need no bounds checks.
template <int kDim>
struct FmhaRefLaneRow {
  // An enum rather than a static constexpr member, which NVRTC would emit as a device global.
  enum { kPerLane = (kDim + FMHA_WARP_SIZE - 1) / FMHA_WARP_SIZE };
  float x[kPerLane];
};

template <int kDim>
FMHA_DEVICE void fmha_ref_zero(FmhaRefLaneRow<kDim>& r) {
#pragma unroll
  for (int t = 0; t < FmhaRefLaneRow<kDim>::kPerLane; ++t) r.x[t] = 0.f;
}

template <class Element, int kDim>
FMHA_DEVICE void fmha_ref_load(FmhaRefLaneRow<kDim>& r, const Element* row, int lane) {
#pragma unroll
  for (int t = 0; t < FmhaRefLaneRow<kDim>::kPerLane; ++t) {
    const int d = lane + t * FMHA_WARP_SIZE;
    r.x[t] = d < kDim ? fmha_to_float(row[d]) : 0.f;
  }
}

// This lane's share of dot(a, b); complete it with fmha_warp_sum.
template <int kDim>
FMHA_DEVICE float fmha_ref_partial_dot(const FmhaRefLaneRow<kDim>& a,
                                       const FmhaRefLaneRow<kDim>& b) {
  float s = 0.f;
#pragma unroll
  for (int t = 0; t < FmhaRefLaneRow<kDim>::kPerLane; ++t) s += a.x[t] * b.x[t];
  return s;
}

template <int kDim>
FMHA_DEVICE void fmha_ref_scale(FmhaRefLaneRow<kDim>& acc, float alpha) {
#pragma unroll
  for (int t = 0; t < FmhaRefLaneRow<kDim>::kPerLane; ++t) acc.x[t] *= alpha;
}

// acc += w * r
template <int kDim>
FMHA_DEVICE void fmha_ref_axpy(FmhaRefLaneRow<kDim>& acc, float w, const FmhaRefLaneRow<kDim>& r) {
#pragma unroll
  for (int t = 0; t < FmhaRefLaneRow<kDim>::kPerLane; ++t) acc.x[t] += w * r.x[t];
}

template <int kDim>
FMHA_DEVICE void fmha_ref_to_smem(float* smem_row, const FmhaRefLaneRow<kDim>& r, int lane) {
#pragma unroll
  for (int t = 0; t < FmhaRefLaneRow<kDim>::kPerLane; ++t) {
    const int d = lane + t * FMHA_WARP_SIZE;
    if (d < kDim) smem_row[d] = r.x[t];
  }
}

template <class T>
FMHA_DEVICE T* fmha_ref_row_ptr(void* base, const FmhaStrides& s, int b, int h, int i) {
  return static_cast<T*>(base) + b * s.batch + h * s.head + i * s.row;
}

template <class T>
FMHA_DEVICE const T* fmha_ref_row_ptr(const void* base, const FmhaStrides& s, int b, int h, int i) {
  return static_cast<const T*>(base) + b * s.batch + h * s.head + i * s.row;
}

// Offset of row i of head h in the contiguous [B, Hq, Sq] LSE and rowsum buffers.
FMHA_DEVICE fmha_index_t fmha_ref_rowstat_index(int b, int h, int i, int nhead_q, int seqlen_q) {
  return (static_cast<fmha_index_t>(b) * nhead_q + h) * seqlen_q + i;
}

// ---------------------------------------------------------------------------------------------

template <class Element, int kHdimQ, int kHdimV, int kMaskKind, bool kWriteLse, int kThreads>
FMHA_DEVICE void fmha_reference_fwd(const FmhaFwdParams& p) {
  static_assert(kThreads % FMHA_WARP_SIZE == 0, "block must be a whole number of warps");
  constexpr int kWarps = kThreads / FMHA_WARP_SIZE;
  // Several keys per step give the loads and the shuffle reductions independent work to overlap.
  constexpr int kKeysPerStep = 4;

  FMHA_SHARED float smem_max[kWarps];
  FMHA_SHARED float smem_sum[kWarps];
  FMHA_SHARED float smem_acc[kWarps][kHdimV];

  const int i = fmha_block_idx_x();
  const int h = fmha_block_idx_y();
  const int b = fmha_block_idx_z();
  const int hk = h / (p.nhead_q / p.nhead_k);
  const int lane = fmha_lane_id();
  const int warp = fmha_warp_id();
  const FmhaKeyRange keys =
      fmha_visible_keys(kMaskKind, i, p.seqlen_q, p.seqlen_k, p.window_left, p.window_right);

  FmhaRefLaneRow<kHdimQ> q;
  fmha_ref_load(q, fmha_ref_row_ptr<Element>(p.q, p.q_strides, b, h, i), lane);

  // Running softmax state of this warp, in the log2 domain: scores are dot * scale_log2.
  float row_max = fmha_neg_inf();
  float row_sum = 0.f;
  FmhaRefLaneRow<kHdimV> acc;
  fmha_ref_zero(acc);

  for (int j0 = keys.lo + warp * kKeysPerStep; j0 < keys.hi; j0 += kWarps * kKeysPerStep) {
    FmhaRefLaneRow<kHdimQ> k[kKeysPerStep];
    FmhaRefLaneRow<kHdimV> v[kKeysPerStep];
    float s[kKeysPerStep];
#pragma unroll
    for (int u = 0; u < kKeysPerStep; ++u) {
      const int j = j0 + u;
      if (j < keys.hi) {
        fmha_ref_load(k[u], fmha_ref_row_ptr<Element>(p.k, p.k_strides, b, hk, j), lane);
        fmha_ref_load(v[u], fmha_ref_row_ptr<Element>(p.v, p.v_strides, b, hk, j), lane);
      } else {
        fmha_ref_zero(k[u]);
        fmha_ref_zero(v[u]);
      }
      s[u] = fmha_ref_partial_dot(q, k[u]);
    }
    fmha_warp_sum(s);

    // j0 < keys.hi, so s[0] is a real score and new_max is finite for finite inputs.
    float new_max = row_max;
#pragma unroll
    for (int u = 0; u < kKeysPerStep; ++u) {
      s[u] = j0 + u < keys.hi ? s[u] * p.scale_log2 : fmha_neg_inf();
      new_max = fmha_max(new_max, s[u]);
    }
    const float alpha = fmha_exp2(row_max - new_max);  // 0 on the first step (row_max = -inf)
    row_sum *= alpha;
    fmha_ref_scale(acc, alpha);
#pragma unroll
    for (int u = 0; u < kKeysPerStep; ++u) {
      const float prob = fmha_exp2(s[u] - new_max);  // 0 for keys past the range
      row_sum += prob;
      fmha_ref_axpy(acc, prob, v[u]);
    }
    row_max = new_max;
  }

  if (lane == 0) {
    smem_max[warp] = row_max;
    smem_sum[warp] = row_sum;
  }
  fmha_ref_to_smem(smem_acc[warp], acc, lane);
  fmha_sync_threads();

  // Merge the warps in warp order. A warp that saw no key has max -inf and weight 0.
  const bool empty_row = keys.hi <= keys.lo;
  float block_max = fmha_neg_inf();
#pragma unroll
  for (int w = 0; w < kWarps; ++w) block_max = fmha_max(block_max, smem_max[w]);
  float weight[kWarps];
  float block_sum = 0.f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    weight[w] = empty_row ? 0.f : fmha_exp2(smem_max[w] - block_max);
    block_sum += smem_sum[w] * weight[w];
  }
  const float inv_sum = empty_row ? 0.f : 1.f / block_sum;

  Element* o = fmha_ref_row_ptr<Element>(p.o, p.o_strides, b, h, i);
  for (int d = fmha_thread_idx(); d < kHdimV; d += kThreads) {
    float out = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) out += smem_acc[w][d] * weight[w];
    o[d] = fmha_from_float<Element>(out * inv_sum);
  }

  if (kWriteLse && p.lse != nullptr && fmha_thread_idx() == 0) {
    const float lse = empty_row ? fmha_neg_inf() : (block_max + fmha_log2(block_sum)) * FMHA_LN2;
    p.lse[fmha_ref_rowstat_index(b, h, i, p.nhead_q, p.seqlen_q)] = lse;
  }
}
