// Backward stage 2 for Hopper (sm_90a): dQ, dK, dV of one key tile by wgmma, with Q, dO, K, V
// loaded by TMA and dQ added to the fp32 workspace by bulk reduce-add copies. Stages 1 and 3
// (D = rowsum(dO * O), dQ = scale * dq_accum) are the sm_80 ones (bwd/fmha_bwd_sm80.h) with the
// same workspace layout, so the plan is: fmha_bwd_sm80_dot_do_o, fmha_bwd_sm90a_dq_dk_dv,
// fmha_bwd_sm80_convert_dq, all three taking FmhaBwdSm90Params (the first and last read .bwd).
//
// Launch geometry of stage 2 (the dispatcher relies on exactly this):
//   grid  = (ceil(Sk / 128), Hk, B): one CTA per 128 keys of a kv head; in the deterministic
//           mode and under causal masks 1-D, ceil(Sk / 128) x Hk x B CTAs in the order of
//           fmha_bwd_key_tile_cta (deterministic: key tiles in reverse, as in the sm_80 kernel
//           whose protocol this one keeps)
//   block = 384 threads: warpgroup 0 holds the producer (warp 0: every TMA load, plus LSE and D
//           into shared memory) and the dQ writer (warp 1: the reduce-adds and, when
//           deterministic, the semaphores); warpgroups 1 and 2 compute, 64 keys each
//   dynamic shared memory = FmhaBwdSm90aShape::kSmemBytes
//
// With keys as the rows of every score matrix, as in the sm_80 kernel, the products chain
// without any transposition in registers. Per (query head, query tile), consumer warpgroup w
// (keys 64 w .. 64 w + 63 of the tile):
//   S^T = K_w Q^T, dP^T = V_w dO^T                 SS wgmma, K-major operands as loaded
//   P^T = exp2(S^T scale_log2 - LSE log2 e) (masked), dS^T = P^T o (dP^T - D)   in registers
//   dV_w += P^T dO, dK_w += dS^T Q                   RS wgmma: P^T and dS^T are already the A
//                                                    fragments; dO and Q are N-major B operands
//   dS^T -> shared memory (both warpgroups), then dQ block w = dS K                SS wgmma,
//       A = dS^T read M-major, B = K read N-major; block w is 64 x 64: the query rows of
//       warpgroup w when the query tile has 128 rows (hdim 64), its head-dim half otherwise
//   dQ block -> shared memory (fp32, swizzled) -> the writer adds it to dq_accum (TMA reduce-add)
// dK (scaled) and dV stay in registers across all query tiles and heads of the group and are
// written once at the end.
//
// Barriers: kv_full (K and V, once); per Q/dO stage q_full and do_full (TMA bytes + one arrival
// per producer lane after it stored the LSE / D rows) and qdo_empty (one arrival per consumer
// warp after the tile's last MMA); per consumer warpgroup dq_full (its 128 threads wrote the dQ
// block) and dq_empty (the writer's copy has read it). The dS^T buffer alternates between two
// halves by iteration parity: a named barrier over both warpgroups separates writing it from
// reading it, and a warpgroup reaches the next write of the same half only after the other
// passed that barrier again, which it does after its dQ MMA of the previous use completed.
//
// Deterministic mode: the writer adds a query tile's two dQ blocks only once the semaphore of
// (b, h, query tile) counts every later key tile that visits it (the sm_80 order and count,
// fmha_bwd_key_tiles), hands the dQ buffers back once the copies have read them, waits for its
// reductions to complete, and increments it. Only the writer waits; the consumers go on with the
// next tile unless the writer still holds their dQ buffer.
#pragma once

#include "bwd/fmha_bwd_memory_sm80.h"
#include "bwd/fmha_bwd_sm80.h"  // stages 1 and 3
#include "bwd/fmha_bwd_sm90a_dq_turns.h"
#include "bwd/fmha_bwd_sm90a_schedule.h"
#include "bwd/fmha_bwd_sm90a_split.h"
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
    kBarOffset = kDsumOffset + kStages * kBlockM * 4,
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

// Pieces both stage-2 kernels (this one and fmha_bwd_sm90a_hd256.h) share.

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

// Warp 0 of warpgroup 0: K and V once, then Q and dO by TMA (lane 0) and the LSE and D rows by
// all lanes, stage after stage (LSE as fmha_bwd_sm90a_lse_log2).
template <class Shape, int kMaskKind, bool kDeterministic, bool kWalks>
FMHA_DEVICE void fmha_bwd_sm90a_produce(const FmhaBwdSm90Params& P, unsigned smem,
                                        const FmhaBwdSm90aBarriers<Shape>& bars) {
  enum { kBlockM = Shape::kBlockM, kRatio = Shape::kBlockN / Shape::kBlockM };
  const FmhaFwdParams& f = P.bwd.fwd;
  const FmhaBwdSm90aWork w = fmha_bwd_sm90a_work<Shape, kMaskKind, kDeterministic>(P.bwd);
  const int lane = fmha_lane_id();
  if (lane == 0) {
    fmha_bwd_sm90a_load_kv<Shape>(P, smem, bars.kv_full(), w.n_block * Shape::kBlockN, w.hk, w.b);
  }
  const FmhaBwdSm90aWalkSmem walk{smem + Shape::kWalkOffset};
  const bool walks = kWalks;  // the caller read the walk (runs its loops once per value)
  FmhaRingPos ring{0, 0u};
  for (int it = 0; it < w.num_iters; ++it) {
    const FmhaBwdSm90aVisit visit = fmha_bwd_sm90a_visit<kRatio>(w, walk, walks, it);
    const int h = visit.head;
    const int m0 = visit.m_block * kBlockM;
    const fmha_index_t stat = (static_cast<fmha_index_t>(w.b) * f.nhead_q + h) * f.seqlen_q + m0;
    float lse_rows[kBlockM / 32], d_rows[kBlockM / 32];
    fmha_bwd_sm90a_load_stat_rows<kBlockM>(P, stat, m0, lse_rows, d_rows);
    fmha_mbarrier_wait(bars.qdo_empty(ring.slot), ring.phase ^ 1u);
    if (lane == 0) {
      fmha_mbarrier_arrive_expect_tx(bars.q_full(ring.slot), Shape::kQBytes);
      fmha_mbarrier_arrive_expect_tx(bars.do_full(ring.slot), Shape::kQBytes);
#pragma unroll
      for (int sl = 0; sl < Shape::kSlabs; ++sl) {
        const unsigned off = ring.slot * Shape::kQBytes + sl * Shape::kQSlabBytes;
        fmha_tma_load_4d(smem + Shape::kQOffset + off, P.q_map, bars.q_full(ring.slot), sl * 64, m0,
                         h, w.b);
        fmha_tma_load_4d(smem + Shape::kDoOffset + off, P.do_map, bars.do_full(ring.slot), sl * 64,
                         m0, h, w.b);
      }
    }
    // Both rows in one loop: two fmha_bwd_sm90a_store_stat_rows calls order the stores otherwise,
    // and this order is the SASS that was measured.
    const unsigned stat_slot = ring.slot * kBlockM * 4;
#pragma unroll
    for (int i = 0; i < kBlockM / 32; ++i) {
      const unsigned row = stat_slot + (lane + 32 * i) * 4;
      fmha_st_shared_f32(smem + Shape::kLseOffset + row, lse_rows[i]);
      fmha_st_shared_f32(smem + Shape::kDsumOffset + row, d_rows[i]);
    }
    fmha_mbarrier_arrive(bars.q_full(ring.slot));
    fmha_mbarrier_arrive(bars.do_full(ring.slot));
    ring.advance<Shape::kStageCount>();
  }
}

// The dQ writer, one thread: per query tile, waits for round `round` of both consumer warpgroups'
// 64 x 64 dQ blocks (at Shape::dq_row0 / dq_col0 in the tile) and adds them to dq_accum, 32
// columns per TMA reduce-add; when deterministic, in its turn (fmha_bwd_sm90a_schedule.h). The
// hdim 64 / 128 kernel runs one writer (round 0), the hdim 256 kernel one per round.
template <class Shape, class Barriers, int kMaskKind, bool kDeterministic, bool kWalks>
FMHA_DEVICE void fmha_bwd_sm90a_write_dq(const FmhaBwdSm90Params& P, unsigned smem,
                                         const Barriers& bars, int round) {
  enum { kBlockM = Shape::kBlockM, kRatio = Shape::kBlockN / Shape::kBlockM };
  const FmhaFwdParams& f = P.bwd.fwd;
  const FmhaBwdSm90aWork w = fmha_bwd_sm90a_work<Shape, kMaskKind, kDeterministic>(P.bwd);
  const int num_m = (f.seqlen_q + kBlockM - 1) / kBlockM;
  const FmhaBwdSm90aWalkSmem walk{smem + Shape::kWalkOffset};
  const bool walks = kWalks;  // the caller read the walk (runs its loops once per value)
  int ahead = -1;  // deterministic: this visit's semaphore as read during the previous one
  FmhaBwdSm90aVisit visit = fmha_bwd_sm90a_visit<kRatio>(w, walk, walks, 0);
  for (int it = 0; it < w.num_iters; ++it) {
    const int h = visit.head;
    const int m_block = visit.m_block;
    fmha_mbarrier_wait(bars.dq_full(0, round), it & 1);
    fmha_mbarrier_wait(bars.dq_full(1, round), it & 1);
    int* sem = nullptr;
    if (kDeterministic) {
      sem = fmha_bwd_sm90a_wait_dq_turn<kMaskKind, kBlockM, Shape::kBlockN>(P, w, h, m_block, num_m,
                                                                            round, ahead);
    }
#pragma unroll
    for (int cw = 0; cw < 2; ++cw) {
#pragma unroll
      for (int sl = 0; sl < 2; ++sl) {
        fmha_tma_reduce_add_3d(P.dq_accum_map,
                               smem + Shape::dq_block_offset(cw, round) + sl * 64 * 128,
                               Shape::dq_col0(cw, round) + sl * 32,
                               m_block * kBlockM + Shape::dq_row0(cw), w.b * f.nhead_q + h);
      }
    }
    fmha_bulk_commit_group();
    const int* next = nullptr;
    if (it + 1 < w.num_iters) {
      visit = fmha_bwd_sm90a_visit<kRatio>(w, walk, walks, it + 1);
      if (kDeterministic)
        next = fmha_bwd_sm90a_dq_semaphore(P, w, visit.head, visit.m_block, num_m);
    }
    ahead = fmha_bwd_sm90a_finish_dq_round<Barriers, kDeterministic>(bars, sem, round, next);
  }
  fmha_bulk_wait_group<0>();
}

// One consumer warpgroup's MMAs. Descriptors as in the forward (fmha_fwd_sm90a.h): K-major
// operands step 32 bytes per k16 inside a 128-byte swizzle atom and one slab per 64 columns;
// N- or M-major ones step 16 rows (2048 bytes) per k16, with 64-column slabs LBO apart.
template <class Element, class Shape>
struct FmhaBwdSm90aMma {
  enum { kBlockM = Shape::kBlockM };
  FMHA_DEVICE static unsigned long long kmajor(unsigned base, int slab_bytes, int ks) {
    return fmha_wgmma_desc(base + (ks / 4) * slab_bytes + (ks % 4) * 32, 16, 1024,
                           kFmhaSwizzle128B);
  }
  FMHA_DEVICE static unsigned long long mnmajor(unsigned base, int slab_bytes, int ks) {
    return fmha_wgmma_desc(base + ks * 16 * 128, slab_bytes, 1024, kFmhaSwizzle128B);
  }
  // S^T = K_w Q^T (or dP^T = V_w dO^T): A = 64 key rows at `kv_rows`, B = the query tile.
  FMHA_DEVICE static void scores(float (&s)[kBlockM / 2], unsigned kv_rows, unsigned q_tile) {
#pragma unroll
    for (int ks = 0; ks < Shape::kKStepsHdim; ++ks) {
      FmhaWgmma<Element, kBlockM, 0>::ss(s, kmajor(kv_rows, Shape::kKVSlabBytes, ks),
                                         kmajor(q_tile, Shape::kQSlabBytes, ks), ks > 0);
    }
  }
  // acc += A B with A (keys x queries) from registers, B = the query tile read N-major.
  FMHA_DEVICE static void accumulate(float (&acc)[Shape::kDChunks][Shape::kDN / 2],
                                     const unsigned (&a)[Shape::kKStepsQuery][4], unsigned q_tile) {
#pragma unroll
    for (int ks = 0; ks < Shape::kKStepsQuery; ++ks) {
#pragma unroll
      for (int c = 0; c < Shape::kDChunks; ++c) {
        FmhaWgmma<Element, Shape::kDN, 1>::rs(
            acc[c], a[ks],
            mnmajor(q_tile + c * (Shape::kDN / 64) * Shape::kQSlabBytes, Shape::kQSlabBytes, ks),
            1);
      }
    }
  }
  // dQ block = dS K: A = dS^T (keys x 64 queries) read M-major, B = K's 64 columns read N-major.
  FMHA_DEVICE static void dq(float (&acc)[32], unsigned ds_slab, unsigned k_slab) {
#pragma unroll
    for (int ks = 0; ks < Shape::kKStepsKey; ++ks) {
      FmhaWgmma<Element, 64, 1>::template ss<1>(acc, mnmajor(ds_slab, Shape::kKVSlabBytes, ks),
                                                mnmajor(k_slab, Shape::kKVSlabBytes, ks), ks > 0);
    }
  }
};

// A consumer warpgroup's registers across its query tiles: the dK and dV accumulators, and the
// scores, dP^T and dQ accumulators that stay in flight from one tile's code to the next.
template <class Shape>
struct FmhaBwdSm90aConsumerRegs {
  float dk[Shape::kDChunks][Shape::kDN / 2];
  float dv[Shape::kDChunks][Shape::kDN / 2];
  float s[Shape::kBlockM / 2];
  float dp[Shape::kBlockM / 2];
  float dq[32];
};

// One query tile of consumer warpgroup cw, software-pipelined by one product: the tile's S^T was
// computed before (by the previous tile, or before the first), and unless kLast the next tile's
// S^T is issued right after this tile's dQ MMA, so that the tensor cores have work queued while
// the warpgroup waits for the writer and stores this tile's dQ block. No MMA stays in flight from
// one tile's code to the next: with the next S^T still pending at the loop's back edge, ptxas
// did not see that the wait after the next dP^T's issue retires it, and serialized every wgmma.
// (dP^T issued before the dQ block's store as well kept s, dp and dq in flight at once, and
// ptxas serialized the MMAs and spilled.)
template <class Element, class Shape, int kMaskKind, bool kWalks, bool kLast>
FMHA_DEVICE void fmha_bwd_sm90a_consume_tile(const FmhaBwdSm90Params& P, unsigned smem,
                                             const FmhaBwdSm90aBarriers<Shape>& bars,
                                             const FmhaBwdSm90aWork& w, int cw, int it,
                                             FmhaRingPos& ring, const FmhaKeyRange (&seen)[2],
                                             FmhaBwdSm90aConsumerRegs<Shape>& r) {
  using Mma = FmhaBwdSm90aMma<Element, Shape>;
  using Pack = FmhaMmaSm80<Element>;
  enum {
    kBlockM = Shape::kBlockM,
    kNT = Shape::kQueryNT,
    kKSteps = Shape::kKStepsQuery,
    kDChunks = Shape::kDChunks,
    kRatio = Shape::kBlockN / Shape::kBlockM,
  };
  const FmhaFwdParams& f = P.bwd.fwd;
  const int lane = fmha_lane_id();
  const int warp_in_wg = (fmha_thread_idx() / 32) % 4;
  const int n0 = w.n_block * Shape::kBlockN;
  const int key_row = cw * 64 + warp_in_wg * 16 + (lane >> 2);  // this lane's first key row
  const FmhaBwdSm90aWalkSmem walk{smem + Shape::kWalkOffset};
  const bool walks = kWalks;
  const int m0 = fmha_bwd_sm90a_visit<kRatio>(w, walk, walks, it).m_block * kBlockM;
  const unsigned q_tile = smem + Shape::kQOffset + ring.slot * Shape::kQBytes;
  const unsigned do_tile = smem + Shape::kDoOffset + ring.slot * Shape::kQBytes;
  const unsigned stat_slot = ring.slot * kBlockM * 4 + (lane & 3) * 8;

  fmha_mbarrier_wait(bars.do_full(ring.slot), ring.phase);
  fmha_wgmma_fence();
  Mma::scores(r.dp, smem + Shape::kVOffset + cw * 64 * 128, do_tile);
  fmha_wgmma_commit();

  // P^T in place of S^T (complete since the previous tile) while dP^T is computed.
  fmha_wgmma_fence_operands(r.s);
  fmha_bwd_sm90a_probabilities<kNT>(
      r.s, smem + Shape::kLseOffset + stat_slot, f.scale_log2,
      fmha_bwd_sm90a_tile_full<kMaskKind, kBlockM, Shape::kBlockN>(m0, n0, f), seen, m0);
  fmha_wgmma_wait<0>();
  fmha_wgmma_fence_operands(r.dp);

  // dS^T, and both as 16-bit A fragments (k = queries).
  unsigned pa[kKSteps][4];
  unsigned da[kKSteps][4];
#pragma unroll
  for (int j = 0; j < kNT; ++j) {
    const FmhaF32x2 d = fmha_ld_shared_f32x2(smem + Shape::kDsumOffset + stat_slot + j * 32);
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int i = 4 * j + 2 * hf;
      pa[j / 2][(j % 2) * 2 + hf] = Pack::pack(r.s[i], r.s[i + 1]);
      da[j / 2][(j % 2) * 2 + hf] =
          Pack::pack(r.s[i] * (r.dp[i] - d.x), r.s[i + 1] * (r.dp[i + 1] - d.y));
    }
  }
  fmha_wgmma_fence();
  Mma::accumulate(r.dv, pa, do_tile);
  Mma::accumulate(r.dk, da, q_tile);
  fmha_wgmma_commit();

  // dS^T into this iteration's half of the buffer (rows = keys, 64-query slabs, swizzled).
  const unsigned ds = smem + Shape::kDsOffset + (it & 1) * Shape::kDsBytes;
#pragma unroll
  for (int j = 0; j < kNT; ++j) {
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int row = key_row + hf * 8;
      const int col = j * 8;
      fmha_st_shared_b32(ds + (col / 64) * Shape::kKVSlabBytes + row * 128 +
                             ((((col % 64) / 8) ^ (row & 7)) << 4) + (lane & 3) * 4,
                         da[j / 2][(j % 2) * 2 + hf]);
    }
  }
  fmha_fence_proxy_async_shared();
  // Both warpgroups' dS^T rows are in place. A warpgroup reaches the next write of this half (two
  // tiles on) only after the other passed this barrier once more, which it does after its dQ MMA
  // of this half completed.
  fmha_named_barrier_sync(1, 256);

  fmha_wgmma_fence();
  Mma::dq(r.dq, ds + (Shape::dq_row0(cw) / 64) * Shape::kKVSlabBytes,
          smem + Shape::kKOffset + (Shape::dq_col0(cw, 0) / 64) * Shape::kKVSlabBytes);
  fmha_wgmma_commit();
  fmha_wgmma_wait<1>();  // dK and dV, the stage's last readers of Q and dO
#pragma unroll
  for (int c = 0; c < kDChunks; ++c) {
    fmha_wgmma_fence_operands(r.dk[c]);
    fmha_wgmma_fence_operands(r.dv[c]);
  }
  fmha_wgmma_fence_operands(pa);
  fmha_wgmma_fence_operands(da);
  // Q, dO, LSE and D of this stage are no longer read by this warp.
  __syncwarp();
  if (lane == 0) fmha_mbarrier_arrive(bars.qdo_empty(ring.slot));
  ring.advance<Shape::kStageCount>();
  if (!kLast) {
    fmha_mbarrier_wait(bars.q_full(ring.slot), ring.phase);
    fmha_wgmma_fence();
    Mma::scores(r.s, smem + Shape::kKOffset + cw * 64 * 128,
                smem + Shape::kQOffset + ring.slot * Shape::kQBytes);
    fmha_wgmma_commit();
    fmha_wgmma_wait<1>();  // this tile's dQ; the next tile's S^T runs on
  } else {
    fmha_wgmma_wait<0>();
  }
  fmha_wgmma_fence_operands(r.dq);

  // The dQ block into shared memory (fp32, 2 slabs of 32 columns, 128-byte swizzle: the box of
  // the dq_accum map) once the writer has copied the previous one.
  fmha_mbarrier_wait(bars.dq_empty(cw), (it & 1) ^ 1);
  fmha_bwd_sm90a_store_dq_block(smem + Shape::dq_block_offset(cw, 0), r.dq);
  fmha_fence_proxy_async_shared();
  fmha_mbarrier_arrive(bars.dq_full(cw));
  if (!kLast) {
    fmha_wgmma_wait<0>();  // the next tile's S^T
    fmha_wgmma_fence_operands(r.s);
  }
}

template <class Element, class Shape, int kMaskKind, bool kDeterministic, bool kWalks>
FMHA_DEVICE void fmha_bwd_sm90a_consume(const FmhaBwdSm90Params& P, unsigned smem,
                                        const FmhaBwdSm90aBarriers<Shape>& bars, int cw) {
  const FmhaFwdParams& f = P.bwd.fwd;
  const FmhaBwdSm90aWork w = fmha_bwd_sm90a_work<Shape, kMaskKind, kDeterministic>(P.bwd);
  const int lane = fmha_lane_id();
  const int warp_in_wg = (fmha_thread_idx() / 32) % 4;
  const int n0 = w.n_block * Shape::kBlockN;
  const int key_row = cw * 64 + warp_in_wg * 16 + (lane >> 2);  // this lane's first key row

  FmhaBwdSm90aConsumerRegs<Shape> r;
#pragma unroll
  for (int c = 0; c < Shape::kDChunks; ++c) {
#pragma unroll
    for (int i = 0; i < Shape::kDN / 2; ++i) r.dk[c][i] = r.dv[c][i] = 0.f;
    // Opaque: one register each before the first MMA is issued. Zeros folded into one constant
    // became register copies at the loop's entry, under the first tile's S^T, and ptxas then
    // serialized every wgmma of the kernel.
    fmha_wgmma_fence_operands(r.dk[c]);
    fmha_wgmma_fence_operands(r.dv[c]);
  }

  // The queries each of this lane's two key rows sees (fmha_bwd_key_queries), used on tiles
  // that some valid row does not see entirely.
  FmhaKeyRange seen[2];
#pragma unroll
  for (int hf = 0; hf < 2; ++hf)
    seen[hf] = fmha_bwd_key_queries<kMaskKind>(n0 + key_row + hf * 8, f);

  fmha_mbarrier_wait(bars.kv_full(), 0);
  if (w.num_iters > 0) {
    FmhaRingPos ring{0, 0u};
    fmha_mbarrier_wait(bars.q_full(0), 0);
    fmha_wgmma_fence();
    FmhaBwdSm90aMma<Element, Shape>::scores(r.s, smem + Shape::kKOffset + cw * 64 * 128,
                                            smem + Shape::kQOffset);
    fmha_wgmma_commit();
    fmha_wgmma_wait<0>();
    fmha_wgmma_fence_operands(r.s);
    for (int it = 0; it + 1 < w.num_iters; ++it) {
      fmha_bwd_sm90a_consume_tile<Element, Shape, kMaskKind, kWalks, false>(P, smem, bars, w, cw,
                                                                            it, ring, seen, r);
    }
    fmha_bwd_sm90a_consume_tile<Element, Shape, kMaskKind, kWalks, true>(
        P, smem, bars, w, cw, w.num_iters - 1, ring, seen, r);
  }

  if (w.part >= 0) {
    // A part of a split key tile: the flag word is the dS^T buffer's first, which no MMA reads
    // once both warpgroups are at the split's first barrier.
    fmha_bwd_sm90a_split_dkdv<Element, Shape::kBlockN, Shape::kDChunks, Shape::kDN>(
        P.bwd, w, key_row, r.dk, r.dv, smem + Shape::kDsOffset, 2);
  } else {
    fmha_bwd_sm90a_store_dkdv<Element, Shape::kDChunks, Shape::kDN>(P.bwd, w, n0 + key_row, 0,
                                                                    r.dk, r.dv);
  }
}

template <class Element, int kHdim, int kMaskKind, bool kDeterministic, int kBlockM, int kStages>
FMHA_DEVICE void fmha_bwd_sm90a_dq_dk_dv(const FmhaBwdSm90Params& P, char* smem_raw) {
  using Shape = FmhaBwdSm90aShape<kHdim, kBlockM, kStages>;
  // Every swizzled tile starts on the 1024-byte period of the 128-byte swizzle.
  const unsigned smem = (fmha_smem_addr(smem_raw) + 1023u) & ~1023u;
  const FmhaBwdSm90aBarriers<Shape> bars{smem + Shape::kBarOffset};
  const int tid = fmha_thread_idx();
  if (tid == 0) {
    fmha_bwd_sm90a_prefetch_maps(P);
    fmha_mbarrier_init(bars.kv_full(), 1);
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      fmha_mbarrier_init(bars.q_full(s), Shape::kProducerArrivals);
      fmha_mbarrier_init(bars.do_full(s), Shape::kProducerArrivals);
      fmha_mbarrier_init(bars.qdo_empty(s), Shape::kConsumerWarpArrivals);
    }
#pragma unroll
    for (int cw = 0; cw < 2; ++cw) {
      fmha_mbarrier_init(bars.dq_full(cw), 128);
      fmha_mbarrier_init(bars.dq_empty(cw), 1);
    }
    fmha_mbarrier_init_fence();
    fmha_bwd_sm90a_store_walk<Shape, kMaskKind, kDeterministic>(P, smem + Shape::kWalkOffset);
  }
  fmha_sync_threads();
  // Each role's loops are compiled once per value of `walks` (a constant false where the kernel
  // cannot walk), so the head-major order runs main's loop code: with the walk behind a flag in
  // the loops, MHA causal lost 3-6 % (session 23).
  const bool walks = fmha_bwd_sm90a_walks<kMaskKind, kDeterministic>(
      P.bwd, FmhaBwdSm90aWalkSmem{smem + Shape::kWalkOffset});
  const int wg = fmha_warpgroup_idx();
  if (wg == 0) {
    // 40 + 2 x 232 registers x 128 threads: what the CTA was given at launch (168 x 384); more
    // would leave setmaxnreg.inc waiting forever (FmhaFwdSm90aShape).
    fmha_setmaxnreg_dec<40>();
    const int warp = fmha_warp_id();
    if (warp == 0) {
      if (walks)
        fmha_bwd_sm90a_produce<Shape, kMaskKind, kDeterministic, true>(P, smem, bars);
      else
        fmha_bwd_sm90a_produce<Shape, kMaskKind, kDeterministic, false>(P, smem, bars);
    }
    if (warp == 1 && fmha_lane_id() == 0) {
      using Bars = FmhaBwdSm90aBarriers<Shape>;
      if (walks)
        fmha_bwd_sm90a_write_dq<Shape, Bars, kMaskKind, kDeterministic, true>(P, smem, bars, 0);
      else
        fmha_bwd_sm90a_write_dq<Shape, Bars, kMaskKind, kDeterministic, false>(P, smem, bars, 0);
    }
    return;
  }
  fmha_setmaxnreg_inc<232>();
  if (walks)
    fmha_bwd_sm90a_consume<Element, Shape, kMaskKind, kDeterministic, true>(P, smem, bars, wg - 1);
  else
    fmha_bwd_sm90a_consume<Element, Shape, kMaskKind, kDeterministic, false>(P, smem, bars, wg - 1);
}
