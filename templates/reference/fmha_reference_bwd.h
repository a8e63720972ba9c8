// Reference attention backward: the GPU-side correctness oracle for dQ, dK and dV.
//
// Three stages, run in this order by the dispatcher, all with block = kThreads threads (1-D, a
// whole number of warps; 128 is the intended value) and no dynamic shared memory:
//   1. fmha_reference_bwd_dot_do_o  grid = (seqlen_q, nhead_q, batch)  one block per query row
//        D_i = sum_d dO_id * O_id, fp32, into p.d_rowsum ([B, Hq, Sq] contiguous)
//   2. fmha_reference_bwd_dq        grid = (seqlen_q, nhead_q, batch)  one block per query row
//        dQ_i = scale * sum_j dS_ij K_j
//   3. fmha_reference_bwd_dkdv      grid = (seqlen_k, nhead_k, batch)  one block per key row
//        dV_j = sum_{h in group, i} P_ij dO_i,  dK_j = scale * sum_{h in group, i} dS_ij Q_i
// with P_ij = exp(scale * q_i.k_j - LSE_i), dP_ij = dO_i.v_j, dS_ij = P_ij (dP_ij - D_i).
// Stages 2 and 3 only read D and the forward LSE, so they are independent of each other.
//
// Deterministic by construction: every output element is produced by one block, which reduces
// its warps' partial sums in a fixed order; there are no atomics and no workspace besides D.
// Rows whose LSE is -inf (they saw no key) contribute nothing and receive zero gradient.
#pragma once

#include "common/fmha_params.h"
#include "common/mask.h"
#include "common/numeric.h"
#include "common/platform.h"
#include "reference/fmha_reference_fwd.h"

// Query rows [lo, hi) that may see key j: fmha_visible_keys solved for i. It only bounds the loop;
// each row is still tested with fmha_key_visible so that mask.h stays the one definition.
FMHA_DEVICE FmhaKeyRange fmha_ref_rows_seeing_key(int mask_kind, int j, int seqlen_q, int seqlen_k,
                                                  int window_left, int window_right) {
  const long long shift = static_cast<long long>(seqlen_k) - seqlen_q;  // bottom-right diagonal
  long long lo = 0;
  long long hi = seqlen_q;
  if (mask_kind == FMHA_MASK_CAUSAL_TOP_LEFT) {
    lo = j;  // j <= i
  } else if (mask_kind == FMHA_MASK_CAUSAL_BOTTOM_RIGHT) {
    lo = j - shift;  // j <= i + shift
  } else if (mask_kind == FMHA_MASK_SLIDING_WINDOW) {
    if (window_right >= 0) lo = j - shift - window_right;    // j <= i + shift + right
    if (window_left >= 0) hi = j - shift + window_left + 1;  // i + shift - left <= j
  }
  if (lo < 0) lo = 0;
  if (hi > seqlen_q) hi = seqlen_q;
  if (hi < lo) hi = lo;
  FmhaKeyRange r;
  r.lo = static_cast<int>(lo);
  r.hi = static_cast<int>(hi);
  return r;
}

template <class Element, int kHdimV, int kThreads>
FMHA_DEVICE void fmha_reference_bwd_dot_do_o(const FmhaBwdParams& p) {
  FMHA_SHARED float smem_partial[kThreads / FMHA_WARP_SIZE];

  const FmhaFwdParams& f = p.fwd;
  const int i = fmha_block_idx_x();
  const int h = fmha_block_idx_y();
  const int b = fmha_block_idx_z();
  const Element* d_out = fmha_ref_row_ptr<Element>(p.d_o, p.do_strides, b, h, i);
  const Element* out = fmha_ref_row_ptr<Element>(f.o, f.o_strides, b, h, i);

  float partial = 0.f;
  for (int d = fmha_thread_idx(); d < kHdimV; d += kThreads) {
    partial += fmha_to_float(d_out[d]) * fmha_to_float(out[d]);
  }
  const float total = fmha_block_sum<kThreads>(partial, smem_partial);
  if (fmha_thread_idx() == 0) {
    p.d_rowsum[fmha_ref_rowstat_index(b, h, i, f.nhead_q, f.seqlen_q)] = total;
  }
}

template <class Element, int kHdimQ, int kHdimV, int kMaskKind, int kThreads>
FMHA_DEVICE void fmha_reference_bwd_dq(const FmhaBwdParams& p) {
  static_assert(kThreads % FMHA_WARP_SIZE == 0, "block must be a whole number of warps");
  constexpr int kWarps = kThreads / FMHA_WARP_SIZE;
  constexpr int kKeysPerStep = 4;  // independent loads and reductions in flight per step

  FMHA_SHARED float smem_dq[kWarps][kHdimQ];

  const FmhaFwdParams& f = p.fwd;
  const int i = fmha_block_idx_x();
  const int h = fmha_block_idx_y();
  const int b = fmha_block_idx_z();
  const int hk = h / (f.nhead_q / f.nhead_k);
  const int lane = fmha_lane_id();
  const int warp = fmha_warp_id();

  const fmha_index_t stat = fmha_ref_rowstat_index(b, h, i, f.nhead_q, f.seqlen_q);
  const float lse = f.lse[stat];
  const float lse_log2 = lse * FMHA_LOG2E;
  const float rowsum = p.d_rowsum[stat];
  FmhaKeyRange keys =
      fmha_visible_keys(kMaskKind, i, f.seqlen_q, f.seqlen_k, f.window_left, f.window_right);
  // Also keeps exp2(s - (-inf)) = inf out of the arithmetic.
  if (lse == fmha_neg_inf()) keys.hi = keys.lo;

  FmhaRefLaneRow<kHdimQ> q;
  FmhaRefLaneRow<kHdimV> d_out;
  fmha_ref_load(q, fmha_ref_row_ptr<Element>(f.q, f.q_strides, b, h, i), lane);
  fmha_ref_load(d_out, fmha_ref_row_ptr<Element>(p.d_o, p.do_strides, b, h, i), lane);
  FmhaRefLaneRow<kHdimQ> acc;
  fmha_ref_zero(acc);

  for (int j0 = keys.lo + warp * kKeysPerStep; j0 < keys.hi; j0 += kWarps * kKeysPerStep) {
    FmhaRefLaneRow<kHdimQ> k[kKeysPerStep];
    // dots[u] = q.k_u, dots[kKeysPerStep + u] = dO.v_u
    float dots[2 * kKeysPerStep];
#pragma unroll
    for (int u = 0; u < kKeysPerStep; ++u) {
      const int j = j0 + u;
      FmhaRefLaneRow<kHdimV> v;
      if (j < keys.hi) {
        fmha_ref_load(k[u], fmha_ref_row_ptr<Element>(f.k, f.k_strides, b, hk, j), lane);
        fmha_ref_load(v, fmha_ref_row_ptr<Element>(f.v, f.v_strides, b, hk, j), lane);
      } else {
        fmha_ref_zero(k[u]);
        fmha_ref_zero(v);
      }
      dots[u] = fmha_ref_partial_dot(q, k[u]);
      dots[kKeysPerStep + u] = fmha_ref_partial_dot(d_out, v);
    }
    fmha_warp_sum(dots);
#pragma unroll
    for (int u = 0; u < kKeysPerStep; ++u) {
      if (j0 + u < keys.hi) {
        const float prob = fmha_exp2(dots[u] * f.scale_log2 - lse_log2);
        const float d_score = prob * (dots[kKeysPerStep + u] - rowsum);
        fmha_ref_axpy(acc, d_score, k[u]);
      }
    }
  }

  fmha_ref_to_smem(smem_dq[warp], acc, lane);
  fmha_sync_threads();
  Element* d_q = fmha_ref_row_ptr<Element>(p.d_q, p.dq_strides, b, h, i);
  for (int d = fmha_thread_idx(); d < kHdimQ; d += kThreads) {
    float sum = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) sum += smem_dq[w][d];
    d_q[d] = fmha_from_float<Element>(sum * f.scale);
  }
}

template <class Element, int kHdimQ, int kHdimV, int kMaskKind, int kThreads>
FMHA_DEVICE void fmha_reference_bwd_dkdv(const FmhaBwdParams& p) {
  static_assert(kThreads % FMHA_WARP_SIZE == 0, "block must be a whole number of warps");
  constexpr int kWarps = kThreads / FMHA_WARP_SIZE;
  constexpr int kRowsPerStep = 4;  // independent loads and reductions in flight per step

  FMHA_SHARED float smem_dk[kWarps][kHdimQ];
  FMHA_SHARED float smem_dv[kWarps][kHdimV];

  const FmhaFwdParams& f = p.fwd;
  const int j = fmha_block_idx_x();
  const int hk = fmha_block_idx_y();
  const int b = fmha_block_idx_z();
  const int group = f.nhead_q / f.nhead_k;
  const int lane = fmha_lane_id();
  const int warp = fmha_warp_id();
  const FmhaKeyRange rows =
      fmha_ref_rows_seeing_key(kMaskKind, j, f.seqlen_q, f.seqlen_k, f.window_left, f.window_right);

  FmhaRefLaneRow<kHdimQ> k;
  FmhaRefLaneRow<kHdimV> v;
  fmha_ref_load(k, fmha_ref_row_ptr<Element>(f.k, f.k_strides, b, hk, j), lane);
  fmha_ref_load(v, fmha_ref_row_ptr<Element>(f.v, f.v_strides, b, hk, j), lane);
  FmhaRefLaneRow<kHdimQ> acc_dk;
  FmhaRefLaneRow<kHdimV> acc_dv;
  fmha_ref_zero(acc_dk);
  fmha_ref_zero(acc_dv);

  // The query heads sharing this kv head are visited in a fixed order, which keeps the GQA
  // reduction deterministic without a workspace.
  for (int g = 0; g < group; ++g) {
    const int h = hk * group + g;
    for (int i0 = rows.lo + warp * kRowsPerStep; i0 < rows.hi; i0 += kWarps * kRowsPerStep) {
      FmhaRefLaneRow<kHdimQ> q[kRowsPerStep];
      FmhaRefLaneRow<kHdimV> d_out[kRowsPerStep];
      bool live[kRowsPerStep];
      float lse_log2[kRowsPerStep];
      float rowsum[kRowsPerStep];
      // dots[u] = q_u.k, dots[kRowsPerStep + u] = dO_u.v
      float dots[2 * kRowsPerStep];
#pragma unroll
      for (int u = 0; u < kRowsPerStep; ++u) {
        const int i = i0 + u;
        live[u] = i < rows.hi && fmha_key_visible(kMaskKind, i, j, f.seqlen_q, f.seqlen_k,
                                                  f.window_left, f.window_right);
        lse_log2[u] = 0.f;
        rowsum[u] = 0.f;
        if (live[u]) {
          const fmha_index_t stat = fmha_ref_rowstat_index(b, h, i, f.nhead_q, f.seqlen_q);
          const float lse = f.lse[stat];
          live[u] = lse != fmha_neg_inf();  // a row that saw no key has no gradient
          lse_log2[u] = lse * FMHA_LOG2E;
          rowsum[u] = p.d_rowsum[stat];
        }
        if (live[u]) {
          fmha_ref_load(q[u], fmha_ref_row_ptr<Element>(f.q, f.q_strides, b, h, i), lane);
          fmha_ref_load(d_out[u], fmha_ref_row_ptr<Element>(p.d_o, p.do_strides, b, h, i), lane);
        } else {
          fmha_ref_zero(q[u]);
          fmha_ref_zero(d_out[u]);
        }
        dots[u] = fmha_ref_partial_dot(q[u], k);
        dots[kRowsPerStep + u] = fmha_ref_partial_dot(d_out[u], v);
      }
      fmha_warp_sum(dots);
#pragma unroll
      for (int u = 0; u < kRowsPerStep; ++u) {
        if (live[u]) {
          const float prob = fmha_exp2(dots[u] * f.scale_log2 - lse_log2[u]);
          const float d_score = prob * (dots[kRowsPerStep + u] - rowsum[u]);
          fmha_ref_axpy(acc_dv, prob, d_out[u]);
          fmha_ref_axpy(acc_dk, d_score, q[u]);
        }
      }
    }
  }

  fmha_ref_to_smem(smem_dk[warp], acc_dk, lane);
  fmha_ref_to_smem(smem_dv[warp], acc_dv, lane);
  fmha_sync_threads();
  Element* d_k = fmha_ref_row_ptr<Element>(p.d_k, p.dk_strides, b, hk, j);
  Element* d_v = fmha_ref_row_ptr<Element>(p.d_v, p.dv_strides, b, hk, j);
  for (int d = fmha_thread_idx(); d < kHdimQ; d += kThreads) {
    float sum = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) sum += smem_dk[w][d];
    d_k[d] = fmha_from_float<Element>(sum * f.scale);
  }
  for (int d = fmha_thread_idx(); d < kHdimV; d += kThreads) {
    float sum = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) sum += smem_dv[w][d];
    d_v[d] = fmha_from_float<Element>(sum);
  }
}
