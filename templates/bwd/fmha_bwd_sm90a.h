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
// (keys 64 w .. 64 w + 63 of the tile; fmha_bwd_sm90a_consumer.h, which issues each tile's S^T
// under the previous tile's dQ MMA):
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
// warp after the tile's dK / dV MMAs, the last to read Q and dO); per consumer warpgroup dq_full
// (its 128 threads wrote the dQ block) and dq_empty (the writer's copy has read it). The dS^T
// buffer alternates between two halves by iteration parity: a named barrier over both
// warpgroups separates writing it from reading it, and a warpgroup reaches the next write of the
// same half only after the other passed that barrier again, which it does after its dQ MMA of
// the previous use completed.
//
// Deterministic mode: the writer adds a query tile's two dQ blocks only once the semaphore of
// (b, h, query tile) counts every later key tile that visits it (the sm_80 order and count,
// fmha_bwd_key_tiles), hands the dQ buffers back once the copies have read them, waits for its
// reductions to complete, and increments it. Only the writer waits; the consumers go on with the
// next tile unless the writer still holds their dQ buffer.
#pragma once

#include "bwd/fmha_bwd_sm80.h"  // stages 1 and 3
#include "bwd/fmha_bwd_sm90a_common.h"
#include "bwd/fmha_bwd_sm90a_consumer.h"
#include "bwd/fmha_bwd_sm90a_dq_turns.h"

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
      // The query tile's first row, for the consumers' mask; published by this lane's arrival
      // below.
      if (kMaskKind != FMHA_MASK_NONE)
        fmha_st_shared_b32(smem + Shape::kQueryRowOffset + ring.slot * 8, m0);
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
  // The producer's and the dQ writer's loops are compiled once per value of `walks` (a constant
  // false where the kernel cannot walk), so the head-major order runs main's loop code: with the
  // walk behind a flag in every role's loops, MHA causal lost 3-6 % (H100). The consumers'
  // loops are compiled once (fmha_bwd_sm90a_consume says why).
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
  fmha_bwd_sm90a_consume<Element, Shape, kMaskKind, kDeterministic>(P, smem, bars, wg - 1);
}
