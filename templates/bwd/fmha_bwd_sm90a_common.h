// What the Hopper backward's stage-2 kernels (fmha_bwd_sm90a.h at hdim 64 / 128 and
// fmha_bwd_sm90a_hd256.h) share: the hdim 64 / 128 shape and barriers, and the pieces each role
// of both kernels uses (K / V loads, LSE and D rows, P^T, the dQ block and dK / dV stores, the
// up-down walk in shared memory).
#pragma once

#include "bwd/fmha_bwd_memory_sm80.h"
#include "bwd/fmha_bwd_sm90a_schedule.h"
#include "bwd/fmha_bwd_tiles_sm80.h"
#include "common/copy_sm80.h"
#include "common/fmha_params.h"
#include "common/mask.h"
#include "common/mma_sm80.h"
#include "common/softmax.h"
#include "sm90/mbarrier_sm90.h"
#include "sm90/tma_sm90.h"
#include "sm90/warpgroup_sm90a.h"
#include "sm90/wgmma_sm90a.h"

// Compile-time shape. Mirrored on the host by codegen::wgmma_sm90a_bwd_smem_bytes.
template <int kHdim, int kTileM, int kStages>
struct FmhaBwdSm90aShape {
  enum {
    kBlockM = kTileM,
    kBlockN = 128,
    kThreads = 384,
    kSlabs = kHdim / 64,           // 64-column slabs of a Q, dO, K or V tile
    kKVSlabBytes = kBlockN * 128,  // also one 64-query slab of dS^T (128 key rows)
    kQSlabBytes = kBlockM * 128,
    kKVBytes = kSlabs * kKVSlabBytes,
    kQBytes = kSlabs * kQSlabBytes,
    kDsBytes = (kBlockM / 64) * kKVSlabBytes,  // one half of the dS^T buffer
    kDqBlockBytes = 64 * 64 * 4,               // one warpgroup's fp32 dQ block, 2 slabs of 32
    kKOffset = 0,
    kVOffset = kKVBytes,
    kQOffset = 2 * kKVBytes,
    kDoOffset = kQOffset + kStages * kQBytes,
    kDsOffset = kDoOffset + kStages * kQBytes,
    kDqOffset = kDsOffset + 2 * kDsBytes,
    kLseOffset = kDqOffset + 2 * kDqBlockBytes,
    kDsumOffset = kLseOffset + kStages * kBlockM * 4,
    // Each stage's query tile (its first row), written by the producer with the LSE and D rows: the
    // consumers read it for the mask instead of computing the visit (8 bytes a stage keeps the
    // barriers 8-byte aligned).
    kQueryRowOffset = kDsumOffset + kStages * kBlockM * 4,
    kBarOffset = kQueryRowOffset + kStages * 8,
    kBarriers = 1 + 3 * kStages + 4,
    kWalkOffset = kBarOffset + kBarriers * 8,  // the up-down walk (FmhaBwdSm90aWalk)
    kSmemBytes = kWalkOffset + kFmhaBwdSm90aWalkBytes + 1024,
    kDN = kHdim < 128 ? kHdim : 128,  // N of one dK / dV instruction
    kDChunks = kHdim / kDN,
    kKStepsHdim = kHdim / 16,
    kKStepsQuery = kBlockM / 16,
    kKStepsKey = kBlockN / 16,
    kQueryNT = kBlockM / 8,  // n8 fragments of S^T per row block
    // dQ blocks: by query rows when the tile has 128 (two warpgroups x wgmma's M of 64), by
    // head-dim halves when it has 64.
    kDqByRows = kBlockM == 128,
    kProducerArrivals = 1 + 32,  // q_full / do_full: the expect-tx arrival and 32 lanes
    kConsumerWarpArrivals = 8,
    kStageCount = kStages,
    kSplitTail = 1,  // the atomic mode may split the launch's last wave (fmha_bwd_key_tile_cta)
  };
  // Where consumer warpgroup w's 64 x 64 dQ block lies in the query tile (one block per warpgroup
  // and query tile, so round is always 0 here): first row, first column.
  FMHA_DEVICE static int dq_row0(int w) { return kDqByRows ? 64 * w : 0; }
  FMHA_DEVICE static int dq_col0(int w, int /*round*/) { return kDqByRows ? 0 : 64 * w; }
  FMHA_DEVICE static int dq_block_offset(int w, int /*round*/) {
    return kDqOffset + w * kDqBlockBytes;
  }
  static_assert(kHdim == 64 || kHdim == 128, "hdim 64 or 128");
  static_assert((kTileM == 128 && kHdim == 64) || (kTileM == 64 && kHdim == 128),
                "each warpgroup's dQ block is 64 x 64");
  static_assert(kStages >= 1 && kStages <= 3, "1 to 3 Q/dO stages");
};

template <class Shape>
struct FmhaBwdSm90aBarriers {
  unsigned base;
  FMHA_DEVICE unsigned kv_full() const { return base; }
  FMHA_DEVICE unsigned q_full(int s) const { return base + 8 + 8 * s; }
  FMHA_DEVICE unsigned do_full(int s) const { return q_full(Shape::kStageCount + s); }
  FMHA_DEVICE unsigned qdo_empty(int s) const { return q_full(2 * Shape::kStageCount + s); }
  // One dQ round per query tile: round is always 0 (the hdim 256 kernel has two).
  FMHA_DEVICE unsigned dq_full(int w, int /*round*/ = 0) const {
    return q_full(3 * Shape::kStageCount + w);
  }
  FMHA_DEVICE unsigned dq_empty(int w, int /*round*/ = 0) const {
    return q_full(3 * Shape::kStageCount + 2 + w);
  }
};

FMHA_DEVICE void fmha_st_shared_f32x2(unsigned smem, float x, float y) {
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(smem), "f"(x), "f"(y) : "memory");
}

FMHA_DEVICE void fmha_st_shared_f32(unsigned smem, float x) {
  asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(smem), "f"(x) : "memory");
}

// Lane 0 of the producer: the CTA's K and V tiles, once, as 64-column slabs.
template <class Shape>
FMHA_DEVICE void fmha_bwd_sm90a_load_kv(const FmhaBwdSm90Params& P, unsigned smem, unsigned bar,
                                        int n0, int hk, int b) {
  fmha_mbarrier_arrive_expect_tx(bar, 2 * Shape::kKVBytes);
#pragma unroll
  for (int sl = 0; sl < Shape::kSlabs; ++sl) {
    fmha_tma_load_4d(smem + Shape::kKOffset + sl * Shape::kKVSlabBytes, P.k_map, bar, sl * 64, n0,
                     hk, b);
    fmha_tma_load_4d(smem + Shape::kVOffset + sl * Shape::kKVSlabBytes, P.v_map, bar, sl * 64, n0,
                     hk, b);
  }
}

// The LSE of query row `row` as the exponent offset of P = exp2(S scale_log2 - LSE log2 e): +inf
// for rows past seqlen_q and rows that saw no key (LSE = -inf), so exp2(s - inf) = 0 gives them
// no gradient.
FMHA_DEVICE float fmha_bwd_sm90a_lse_log2(const FmhaFwdParams& f, fmha_index_t stat, int row,
                                          int m0) {
  const float inf = fmha_uint_as_float(0x7f800000u);
  const float lse = m0 + row < f.seqlen_q ? f.lse[stat + row] : inf;
  return lse == -inf ? inf : lse * FMHA_LOG2E;
}

// The producer's LSE (as fmha_bwd_sm90a_lse_log2) and D rows lane + 32 i of the query tile at m0
// (stat: its first row's index), into registers. The producers load them before they wait for
// the stage, so that their round trip to L2 (which the dQ reduce-adds keep busy) overlaps the
// wait instead of delaying the stage's arrival.
template <int kBlockM>
FMHA_DEVICE void fmha_bwd_sm90a_load_stat_rows(const FmhaBwdSm90Params& P, fmha_index_t stat,
                                               int m0, float (&lse)[kBlockM / 32],
                                               float (&d)[kBlockM / 32]) {
  const FmhaFwdParams& f = P.bwd.fwd;
#pragma unroll
  for (int i = 0; i < kBlockM / 32; ++i) {
    const int r = fmha_lane_id() + 32 * i;
    lse[i] = fmha_bwd_sm90a_lse_log2(f, stat, r, m0);
    d[i] = m0 + r < f.seqlen_q ? P.bwd.d_rowsum[stat + r] : 0.f;
  }
}

// The lane's rows of fmha_bwd_sm90a_load_stat_rows into a shared-memory row array at `base` (the
// hdim 256 producer, which stores LSE and D after different waits).
template <int kBlockM>
FMHA_DEVICE void fmha_bwd_sm90a_store_stat_rows(unsigned base, const float (&rows)[kBlockM / 32]) {
#pragma unroll
  for (int i = 0; i < kBlockM / 32; ++i) {
    fmha_st_shared_f32(base + (fmha_lane_id() + 32 * i) * 4, rows[i]);
  }
}

FMHA_DEVICE void fmha_bwd_sm90a_prefetch_maps(const FmhaBwdSm90Params& P) {
  fmha_tma_prefetch_map(P.q_map);
  fmha_tma_prefetch_map(P.k_map);
  fmha_tma_prefetch_map(P.v_map);
  fmha_tma_prefetch_map(P.do_map);
  fmha_tma_prefetch_map(P.dq_accum_map);
}

// P^T in place of S^T (64 key rows x kNT n8 blocks of queries, wgmma's accumulator layout):
// exp2 against the LSE rows at `lse` (this lane's column pair of block 0), then, on tiles that
// some valid row does not see entirely, zero where key row hf of this lane does not see the
// query (seen[hf], fmha_bwd_key_queries).
template <int kNT>
FMHA_DEVICE void fmha_bwd_sm90a_probabilities(float (&s)[4 * kNT], unsigned lse, float scale_log2,
                                              bool tile_full, const FmhaKeyRange (&seen)[2],
                                              int m0) {
  const int lane = fmha_lane_id();
#pragma unroll
  for (int j = 0; j < kNT; ++j) {
    const FmhaF32x2 l = fmha_ld_shared_f32x2(lse + j * 32);
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      s[4 * j + 2 * hf] = fmha_softmax_exp2(__fmaf_rn(s[4 * j + 2 * hf], scale_log2, -l.x));
      s[4 * j + 2 * hf + 1] = fmha_softmax_exp2(__fmaf_rn(s[4 * j + 2 * hf + 1], scale_log2, -l.y));
    }
  }
  if (tile_full) return;
  const int col0 = m0 + (lane & 3) * 2;
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const int lo = seen[hf].lo - col0;
    const int hi = seen[hf].hi - col0;
#pragma unroll
    for (int j = 0; j < kNT; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int c = j * 8 + e;
        if (c < lo || c >= hi) s[4 * j + 2 * hf + e] = 0.f;
      }
    }
  }
}

// Whether every valid query row of the tile at m0 sees every key of the tile at n0.
template <int kMaskKind, int kBlockM, int kBlockN>
FMHA_DEVICE bool fmha_bwd_sm90a_tile_full(int m0, int n0, const FmhaFwdParams& f) {
  const int row_last = min(m0 + kBlockM, f.seqlen_q) - 1;
  return n0 >= fmha_row_keys_i32<kMaskKind>(row_last, f).lo &&
         n0 + kBlockN <= fmha_row_keys_i32<kMaskKind>(m0, f).hi;
}

// A 64 x 64 fp32 dQ block (wgmma's accumulator layout) into shared memory as 2 slabs of 32
// columns with 128-byte swizzle: the box of the dq_accum map.
FMHA_DEVICE void fmha_bwd_sm90a_store_dq_block(unsigned dq_smem, const float (&dq)[32]) {
  const int lane = fmha_lane_id();
  const int warp_in_wg = (fmha_thread_idx() / 32) % 4;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int r = warp_in_wg * 16 + hf * 8 + (lane >> 2);
      const int chunk = (j % 4) * 2 + (lane & 3) / 2;
      fmha_st_shared_f32x2(
          dq_smem + (j / 4) * 64 * 128 + r * 128 + ((chunk ^ (r & 7)) << 4) + (lane & 1) * 8,
          dq[4 * j + 2 * hf], dq[4 * j + 2 * hf + 1]);
    }
  }
}

// dK (scaled) and dV of this lane's two key rows, columns [col0, col0 + kChunks x kN), straight
// from the accumulators: written once per CTA.
template <class Element, int kChunks, int kN>
FMHA_DEVICE void fmha_bwd_sm90a_store_dkdv(const FmhaBwdParams& p, const FmhaBwdSm90aWork& w,
                                           int key_row0, int col0,
                                           const float (&dk)[kChunks][kN / 2],
                                           const float (&dv)[kChunks][kN / 2]) {
  using Pack = FmhaMmaSm80<Element>;
  const int lane = fmha_lane_id();
  const float scale = p.fwd.scale;
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const int key = key_row0 + hf * 8;
    if (key >= p.fwd.seqlen_k) continue;
    Element* dk_row = static_cast<Element*>(p.d_k) + w.b * p.dk_strides.batch +
                      w.hk * p.dk_strides.head + key * p.dk_strides.row + col0 + (lane & 3) * 2;
    Element* dv_row = static_cast<Element*>(p.d_v) + w.b * p.dv_strides.batch +
                      w.hk * p.dv_strides.head + key * p.dv_strides.row + col0 + (lane & 3) * 2;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
#pragma unroll
      for (int j = 0; j < kN / 8; ++j) {
        const int i = 4 * j + 2 * hf;
        *reinterpret_cast<unsigned*>(dk_row + c * kN + j * 8) =
            Pack::pack(dk[c][i] * scale, dk[c][i + 1] * scale);
        *reinterpret_cast<unsigned*>(dv_row + c * kN + j * 8) = Pack::pack(dv[c][i], dv[c][i + 1]);
      }
    }
  }
}

// The up-down walk (fmha_bwd_sm90a_schedule.h) in shared memory: thread 0 plans it before the
// CTA's first barrier, and the roles read its fields per iteration (FmhaBwdSm90aWalk says why).
// Volatile, so the compiler neither hoists the loads out of the loops (the registers the walk
// would hold there are what spilled) nor drops them; no memory clobber, so they do not fence the
// loops' other loads and stores either (the fields never change after that barrier).
struct FmhaBwdSm90aWalkSmem {
  unsigned at;
  FMHA_DEVICE int operator[](int field) const {
    int v;
    asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(at + 4 * field));
    return v;
  }
};

// Whether the kernel can walk (deterministic, causal), the host asked for it (det_up_cells, a
// kernel parameter: launches that never walk neither plan nor read the walk) and this CTA walks.
template <int kMaskKind, bool kDeterministic>
FMHA_DEVICE bool fmha_bwd_sm90a_walks(const FmhaBwdParams& p, const FmhaBwdSm90aWalkSmem& walk) {
  const bool causal =
      kMaskKind == FMHA_MASK_CAUSAL_TOP_LEFT || kMaskKind == FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
  return kDeterministic && causal && p.det_up_cells > 0 && walk[FmhaBwdSm90aWalk::kUp] > 0;
}

template <class Shape, int kMaskKind, bool kDeterministic>
FMHA_DEVICE void fmha_bwd_sm90a_store_walk(const FmhaBwdSm90Params& P, unsigned at) {
  const bool causal =
      kMaskKind == FMHA_MASK_CAUSAL_TOP_LEFT || kMaskKind == FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
  if (!kDeterministic || !causal || P.bwd.det_up_cells <= 0) return;
  const FmhaBwdSm90aWork w = fmha_bwd_sm90a_work<Shape, kMaskKind, kDeterministic>(P.bwd);
  const FmhaBwdSm90aWalk walk = fmha_bwd_sm90a_plan_walk<kMaskKind, Shape::kBlockM, Shape::kBlockN>(
      w, P.bwd.fwd, fmha_bwd_sm90a_walk_up(P.bwd, w));
#pragma unroll
  for (int i = 0; i < FmhaBwdSm90aWalk::kFields; ++i) {
    fmha_st_shared_b32(at + 4 * i, static_cast<unsigned>(walk.field[i]));
  }
}
