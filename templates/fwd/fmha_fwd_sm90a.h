// Forward kernel for Hopper (sm_90a): TMA loads completing on mbarriers, wgmma with accumulators
// in registers, one producer warp and two or three consumer warpgroups, persistent over the tiles.
//
// Launch geometry (the dispatcher relies on exactly this):
//   grid  = (min(num_tiles, multiprocessors), 1, 1): persistent CTAs; CTA c takes one tile of
//           the list num_m_blocks x nhead_q x batch per round (fmha_fwd_sm90a_tile_index/_tile)
//   block = 128 (1 + kBlockM / 64) threads: warpgroup 0 produces (one thread issues every copy),
//           warpgroups 1 .. kBlockM / 64 consume, 64 query rows each (kBlockM = 128 or 192)
//   dynamic shared memory = FmhaFwdSm90aShape::kSmemBytes (fmha_fwd_sm90a_pipeline.h: kQStages Q
//           buffers, kStages K and V stages, barriers, 1 KB to align the 128-byte-swizzled tiles
//           to the 1024-byte period of the pattern)
//   parameter: `const __grid_constant__ FmhaFwdSm90Params` (the copies read the tensor maps in
//           place; a copy of them in registers or local memory would not be a valid map address)
//
// Shared memory holds every tile as slabs of 64 columns (128 bytes per row, 128-byte swizzle: one
// TMA box each), which is the K-major layout wgmma reads for Q and K (A and B of Q K^T) and the
// N-major layout it reads for V (B of P V, transposed), so no tile is ever rearranged.
//
// Per consumer warpgroup and key tile i (FlashAttention-3's schedule):
//   issue S_i = Q K_i^T (SS wgmma) and O += P_{i-1} V_{i-1} (RS wgmma: P from registers)
//   -> wait for S_i only -> mask (boundary tiles) and online softmax of S_i, while the tensor
//   cores still run P_{i-1} V_{i-1} -> wait for it -> rescale O, pack P_i to 16 bits.
// The two warpgroups also take turns issuing their MMAs (named barriers, "ping-pong"), so one
// warpgroup's softmax runs while the other's MMAs occupy the tensor cores.
//
// Pipeline: full barriers count the bytes TMA delivers (one arrival: the producer's expect-tx);
// empty barriers count one arrival per consumer warp (8) once its MMAs no longer read the slot.
// Each Q buffer has a full barrier and an empty one: the O tile of a finished tile is staged in
// its Q buffer and stored by TMA, and a later tile's Q may land there only after that store has
// read it. With two Q buffers (where shared memory has room: hdim <= 128) the next tile's Q lands
// while this one computes, and each consumer confirms the store's read under the next tile's
// first MMA; with one, a tile's Q load waits for the previous tile's store, and every tile starts
// with that round trip (it dominates short tiles: S 512).
#pragma once

#include "common/copy_sm80.h"
#include "common/fmha_params.h"
#include "common/mask_fragments.h"
#include "common/mma_sm80.h"
#include "common/score_mods.h"
#include "common/sequence.h"
#include "common/softmax.h"
#include "fwd/fmha_fwd_sm90a_pipeline.h"
#include "fwd/fmha_fwd_sm90a_split.h"
#include "sm90/mbarrier_sm90.h"
#include "sm90/tma_sm90.h"
#include "sm90/warpgroup_sm90a.h"
#include "sm90/wgmma_sm90a.h"

// One consumer warpgroup's MMAs. Descriptors: K-major operands (Q, K) step 32 bytes along k
// inside a 128-byte swizzle atom and one slab per 64 columns; 8-row groups are 1024 bytes apart.
// V is the N-major B operand: 16 key rows (2048 bytes) per k16 step, 64-column slabs
// kKVSlabBytes apart along N.
template <class Element, class Shape>
struct FmhaFwdSm90aMma {
  enum { kBlockN = Shape::kNT * 8 };
  FMHA_DEVICE static unsigned long long q_desc(unsigned smem_q, int row0, int ks) {
    return fmha_wgmma_desc(smem_q + (ks / 4) * Shape::kQSlabBytes + row0 * 128 + (ks % 4) * 32, 16,
                           1024, kFmhaSwizzle128B);
  }
  FMHA_DEVICE static unsigned long long k_desc(unsigned smem_k, int ks) {
    return fmha_wgmma_desc(smem_k + (ks / 4) * Shape::kKVSlabBytes + (ks % 4) * 32, 16, 1024,
                           kFmhaSwizzle128B);
  }
  FMHA_DEVICE static unsigned long long v_desc(unsigned smem_v, int chunk, int ks) {
    return fmha_wgmma_desc(smem_v + chunk * (Shape::kON / 64) * Shape::kKVSlabBytes + ks * 16 * 128,
                           Shape::kKVSlabBytes, 1024, kFmhaSwizzle128B);
  }
  // S = Q K^T over the head dim (the first step overwrites S).
  FMHA_DEVICE static void qk(float (&s)[kBlockN / 2], unsigned smem_q, int row0, unsigned smem_k) {
#pragma unroll
    for (int ks = 0; ks < Shape::kKStepsQK; ++ks) {
      FmhaWgmma<Element, kBlockN, 0>::ss(s, q_desc(smem_q, row0, ks), k_desc(smem_k, ks), ks > 0);
    }
  }
  // O += P V, P as the A operand from registers, over k-steps [kFirst, kEnd) of 16 keys.
  template <int kFirst = 0, int kEnd = Shape::kKStepsPV>
  FMHA_DEVICE static void pv(float (&o)[Shape::kOChunks][Shape::kON / 2],
                             const unsigned (&pa)[Shape::kKStepsPV][4], unsigned smem_v) {
#pragma unroll
    for (int ks = kFirst; ks < kEnd; ++ks) {
#pragma unroll
      for (int c = 0; c < Shape::kOChunks; ++c) {
        FmhaWgmma<Element, Shape::kON, 1>::rs(o[c], pa[ks], v_desc(smem_v, c, ks), 1);
      }
    }
  }
};

// The rows of one tile the epilogue writes: its first row in the sequence, the query head and
// batch, and in a packed batch the sequence's first row in the tensors and its length.
struct FmhaFwdSm90aRows {
  int m0, h, b;
  int q_row0, seqlen_q;  // packed batches only
};

// Rows [0, seqlen_q - first) (at most 64) of one consumer warpgroup's staged O (16 bits, in the
// 128-byte-swizzled slabs the O map describes), written with 16-byte stores by its 128 threads:
// a packed batch's tile that reaches past its sequence's last row, where a box would write into
// the next sequence's rows.
template <class Element, class Shape>
FMHA_DEVICE void fmha_fwd_sm90a_store_rows(const FmhaFwdParams& p, unsigned staged,
                                           const FmhaFwdSm90aRows& t, int first, int thread) {
  enum { kChunks = Shape::kSlabs * 8 };  // 16-byte chunks per row
  const int rows = t.seqlen_q - first < 64 ? t.seqlen_q - first : 64;
  Element* o = static_cast<Element*>(p.o) + t.h * p.o_strides.head +
               static_cast<fmha_index_t>(t.q_row0 + first) * p.o_strides.row;
  for (int i = thread; i < rows * kChunks; i += 128) {
    const int r = i / kChunks;
    const int c = i % kChunks;
    const unsigned addr =
        staged + (c / 8) * Shape::kQSlabBytes + r * 128 + (((c % 8) ^ (r & 7)) << 4);
    fmha_st_global_128(o + r * p.o_strides.row + c * 8, fmha_ld_shared_128(addr));
  }
}

// Counts this warp out of a K or V slot once its MMAs have read it.
FMHA_DEVICE void fmha_fwd_sm90a_release(unsigned empty_bar) {
  __syncwarp();
  if (fmha_lane_id() == 0) fmha_mbarrier_arrive(empty_bar);
}

template <class Element, class Shape, int kMaskKind, bool kWriteLse, bool kVarlen, bool kSinks,
          bool kSoftcap>
FMHA_DEVICE void fmha_fwd_sm90a_consume(const FmhaFwdSm90Params& P, unsigned smem_q,
                                        const FmhaFwdSm90aBarriers<Shape>& bars, int cw) {
  using Mma = FmhaFwdSm90aMma<Element, Shape>;
  using Pack = FmhaMmaSm80<Element>;
  enum {
    kNT = Shape::kNT,
    kBlockN = kNT * 8,
    kON = Shape::kON,
    kOChunks = Shape::kOChunks,
    kKStepsPV = Shape::kKStepsPV,
  };
  // Whether a warpgroup's last key block may be narrow (fmha_fwd_sm90a_wg_keys: 128-key blocks
  // under a mask that cuts them along a diagonal).
  constexpr bool kMayNarrow = kMaskKind != FMHA_MASK_NONE && kBlockN == 128;
  const FmhaFwdParams& p = P.fwd;
  const unsigned smem_k = smem_q + Shape::kKOffset;
  const unsigned smem_v = smem_q + Shape::kVOffset;
  const int lane = fmha_lane_id();
  const int warp_in_wg = (fmha_thread_idx() / 32) % 4;
  const int wg_row0 = cw * 64;  // this warpgroup's first row within the block
  // The warpgroups issue their MMAs in turn, 0, 1, (2,) 0, ...: each waits for its turn and
  // passes it on to the next. Each barrier joins the waiting warpgroup and the one before it.
  const int turn_mine = kFmhaSm90aBarTurn0 + cw;
  const int turn_other = kFmhaSm90aBarTurn0 + (cw + 1) % Shape::kConsumers;
  const float scale_log2 = p.scale_log2;  // log2(e) under a softcap (common/score_mods.h)
  // A row's normalisation and LSE, the head's sink in the denominator of a sinks kernel.
  auto finalize = [&](FmhaOnlineSoftmax<1, Shape::kNT>& sm, int h, float(&inv_sum)[2],
                      float(&lse)[2]) {
    if (kSinks) {
      sm.finalize_with_sink(scale_log2, p.sinks[h] * FMHA_LOG2E, inv_sum, lse);
    } else {
      sm.finalize(scale_log2, inv_sum, lse);
    }
  };

  // Warpgroup 0 issues first: the last one hands it the first turn.
  if (cw == Shape::kConsumers - 1) fmha_named_barrier_arrive(turn_other, 256);

  // With two Q buffers a tile's O is staged and stored in the next tile's iteration, under that
  // tile's first Q K^T: the tensor cores have work while the warpgroup converts O to 16 bits,
  // stages it, writes the LSE and waits on its epilogue barriers. (With one, the next Q lands
  // only after this O's store has read the buffer.) The tile's own iteration normalises O into
  // `pending`: that multiply is the last write of those registers, so no register a wgmma
  // defined crosses the loop's back edge. O itself carried across (or a plain copy of it, which
  // ptxas folds back into O) made ptxas wait for the next S_0 where the epilogue read it (C7517),
  // and spilled.
  // Unmasked kernels only: measured (H200, bf16) against the kernel without it
  // and with the per-warpgroup key end: hdim 128 S 2048 637 -> 650 TFLOP/s, S 8192 679 -> 690;
  // causal rows lost 0.8-2.5 % instead (hdim 128 S 8192 651 -> 640, GQA 32:8 S 2048 594 -> 579).
  // Not in a packed batch: the pending tile's sequence held across the next tile spilled the
  // 160-register consumers of hdim 64.
  constexpr bool kLateEpilogue = Shape::kQStages == 2 && kMaskKind == FMHA_MASK_NONE && !kVarlen;
  // A finished tile whose store is still to issue (iter < 0: none); iter counts the tiles taken.
  struct Pending {
    int iter;
    FmhaFwdSm90aRows rows;
    float o[kOChunks][kON / 2];  // normalised, in the accumulators' layout
    float lse[2];
  };
  Pending pending;
  pending.iter = -1;

  // Two adjacent columns of this lane's row half hf, staged as 16 bits in this warpgroup's rows
  // of a Q buffer (the same swizzled slabs the O tensor map describes).
  auto stage = [&](unsigned q_buf, int hf, int col, unsigned v) {
    const int r = wg_row0 + warp_in_wg * 16 + hf * 8 + (lane >> 2);  // row in the block
    const unsigned addr = q_buf + (col / 64) * Shape::kQSlabBytes + r * 128 +
                          ((((col % 64) / 8) ^ (r & 7)) << 4) + (lane & 3) * 4;
    fmha_st_shared_b32(addr, v);
  };
  auto write_lse = [&](const FmhaFwdSm90aRows& t, const float(&lse)[2]) {
    const int row0 = t.m0 + wg_row0 + warp_in_wg * 16 + (lane >> 2);
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int seqlen_q = kVarlen ? t.seqlen_q : p.seqlen_q;
      if (kWriteLse && p.lse != nullptr && (lane & 3) == 0 && row0 + hf * 8 < seqlen_q) {
        p.lse[fmha_row_stat0<kVarlen>(p, t.q_row0, t.b, t.h) + row0 + hf * 8] = lse[hf];
      }
    }
  };
  // Once the staged rows are complete: one thread stores them. Rows past seqlen_q fall outside
  // the O tensor map and are not written. A packed batch's map holds the next sequence's rows
  // there, so the warpgroup that reaches past its sequence's end copies its valid rows itself.
  auto store = [&](unsigned q_buf, const FmhaFwdSm90aRows& t) {
    const int first = t.m0 + wg_row0;  // this warpgroup's first row in the sequence
    if (kVarlen && first + 64 > t.seqlen_q) {
      fmha_named_barrier_sync(kFmhaSm90aBarEpilogue0 + cw, 128);
      fmha_fwd_sm90a_store_rows<Element, Shape>(p, q_buf + wg_row0 * 128, t, first,
                                                fmha_thread_idx() % 128);
      if (Shape::kQStages == 1) {
        // Every thread's reads of the staging rows are done before the next Q may land there.
        fmha_named_barrier_sync(kFmhaSm90aBarEpilogue0 + cw, 128);
        if (fmha_thread_idx() % 128 == 0) fmha_mbarrier_arrive(bars.q_empty(0));
      }
      return;
    }
    fmha_fence_proxy_async_shared();
    fmha_named_barrier_sync(kFmhaSm90aBarEpilogue0 + cw, 128);
    if (fmha_thread_idx() % 128 == 0) {
#pragma unroll
      for (int sl = 0; sl < Shape::kSlabs; ++sl) {
        fmha_tma_store_4d(P.o_map, q_buf + sl * Shape::kQSlabBytes + wg_row0 * 128, sl * 64,
                          kVarlen ? t.q_row0 + first : first, t.h, kVarlen ? 0 : t.b);
      }
      fmha_bulk_commit_group();
      if (Shape::kQStages == 1) {
        fmha_bulk_wait_group_read<0>();  // the next tile's Q may overwrite the staging rows
        fmha_mbarrier_arrive(bars.q_empty(0));
      }
    }
  };
  // A warpgroup's O rows times factor[row half], as 16 bits into q_buf's staging rows.
  auto stage_o = [&](unsigned q_buf, const float(&x)[kOChunks][kON / 2], const float(&factor)[2]) {
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
#pragma unroll
      for (int c = 0; c < kOChunks; ++c) {
#pragma unroll
        for (int j = 0; j < kON / 8; ++j) {
          stage(
              q_buf, hf, c * kON + j * 8,
              Pack::pack(x[c][4 * j + 2 * hf] * factor[hf], x[c][4 * j + 2 * hf + 1] * factor[hf]));
        }
      }
    }
  };
  // The deferred part of the pending tile's epilogue, under the next tile's S_0 (or after the
  // last tile): its Q buffer is the one that S_0 does not read. Every warp of the warpgroup is
  // past the pending tile's last MMA once all reach the barrier, so no wgmma still reads the rows.
  auto store_pending = [&]() {
    const unsigned q_buf = smem_q + (pending.iter % Shape::kQStages) * Shape::kQBytes;
    fmha_named_barrier_sync(kFmhaSm90aBarEpilogue0 + cw, 128);
    const float normalised[2] = {1.f, 1.f};
    stage_o(q_buf, pending.o, normalised);
    write_lse(pending.rows, pending.lse);
    store(q_buf, pending.rows);
  };

  FmhaRingPos ring{0, 0u};
  int used = 0;  // tiles taken (fmha_fwd_sm90a_produce)
  for (int iter = 0;; ++iter) {
    FmhaFwdSm90aWork w;
    if (!fmha_fwd_sm90a_work<kMaskKind>(P, iter, w)) break;
    int m_block, h, b;
    fmha_fwd_sm90a_tile<kMaskKind>(P, w.tile, m_block, h, b);
    const int m0 = m_block * Shape::kBlockM;
    const FmhaSequence seq = fmha_sequence<kVarlen>(p, b);
    if (kVarlen && m0 >= seq.seqlen_q) continue;  // past a shorter sequence's rows
    FmhaMaskGeometry lengths;
    const auto& lens = fmha_lengths<kVarlen>(p, seq, lengths);
    const int slot_iter = kVarlen ? used : iter;
    ++used;
    FmhaFwdSm90aRows rows;
    rows.m0 = m0;
    rows.h = h;
    rows.b = b;
    rows.q_row0 = kVarlen ? seq.q_row0 : 0;
    rows.seqlen_q = kVarlen ? seq.seqlen_q : 0;
    const FmhaBlockKeys keys =
        fmha_fwd_sm90a_work_keys(w, fmha_block_keys<kMaskKind, Shape::kBlockM, kBlockN>(m0, lens));
    const int row0 = m0 + wg_row0 + warp_in_wg * 16 + (lane >> 2);  // this lane's first row

    float o[kOChunks][kON / 2];
#pragma unroll
    for (int c = 0; c < kOChunks; ++c) {
#pragma unroll
      for (int i = 0; i < kON / 2; ++i) o[c][i] = 0.f;
    }
    float s[1][kNT][4];
    float(&s_flat)[kBlockN / 2] = reinterpret_cast<float(&)[kBlockN / 2]>(s);
    unsigned pa[kKStepsPV][4];
    FmhaOnlineSoftmax<1, kNT> softmax;
    softmax.init();

    // Mask on tiles that some valid row does not see entirely, then fold into the softmax.
    auto scores_to_probabilities = [&](int n_block, float(&alpha)[2]) {
      const int n0 = n_block * kBlockN;
      if (kSoftcap) {
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
          for (int e = 0; e < 4; ++e) s[0][nt][e] = fmha_softcap(p, s[0][nt][e]);
        }
      }
      if (!(n0 >= keys.full_lo && n0 + kBlockN <= keys.full_hi)) {
        fmha_mask_fragments<kMaskKind>(s, row0, n0, lane, lens);
      }
      softmax.update(s, scale_log2, alpha);
    };
    auto pack_p = [&]() {
#pragma unroll
      for (int ks = 0; ks < kKStepsPV; ++ks) {
        pa[ks][0] = Pack::pack(s[0][2 * ks][0], s[0][2 * ks][1]);
        pa[ks][1] = Pack::pack(s[0][2 * ks][2], s[0][2 * ks][3]);
        pa[ks][2] = Pack::pack(s[0][2 * ks + 1][0], s[0][2 * ks + 1][1]);
        pa[ks][3] = Pack::pack(s[0][2 * ks + 1][2], s[0][2 * ks + 1][3]);
      }
    };

    // This tile's Q buffer; with two, the previous tile's O store still reads the other one
    // until its storing thread confirms the read (release_previous_q, under this tile's first
    // MMA issued after that store).
    const int qs = slot_iter % Shape::kQStages;
    const unsigned q_buf = smem_q + qs * Shape::kQBytes;
    bool q_release_due = Shape::kQStages == 2 && slot_iter > 0;
    auto release_previous_q = [&]() {
      if (q_release_due && fmha_thread_idx() % 128 == 0) {
        fmha_bulk_wait_group_read<0>();
        fmha_mbarrier_arrive(bars.q_empty(qs ^ 1));
      }
      q_release_due = false;
    };
    // This warpgroup's rows may stop short of the tile's last key blocks (causal and window
    // masks): it skips the blocks from mine.n_end on, and the P V of block mine.n_end - 1 may
    // stop at its first 64 keys (its P is zero past them).
    const FmhaFwdSm90aWgKeys mine =
        fmha_fwd_sm90a_wg_keys<kMaskKind, kBlockN>(keys, m0 + wg_row0, lens);

    fmha_mbarrier_wait(bars.q_full(qs), (slot_iter / Shape::kQStages) & 1);
    if (keys.n_block_end > keys.n_block_begin) {
      // Key tile 0: S only, and the previous tile's store under it. Both branches issue their
      // own copy of that store: an S_0 in flight across a join with a path that has none made
      // ptxas serialise the kernel's wgmma.
      fmha_mbarrier_wait(bars.k_full(ring.slot), ring.phase);
      fmha_named_barrier_sync(turn_mine, 256);
      fmha_wgmma_fence();
      Mma::qk(s_flat, q_buf, wg_row0, smem_k + ring.slot * Shape::kKVBytes);
      fmha_wgmma_commit();
      fmha_named_barrier_arrive(turn_other, 256);
      if (kLateEpilogue && pending.iter >= 0) store_pending();
      if (!kLateEpilogue) release_previous_q();  // under the MMA
      fmha_wgmma_wait<0>();
      fmha_wgmma_fence_operands(s_flat);
      fmha_fwd_sm90a_release(bars.k_empty(ring.slot));
      float alpha[2];
      scores_to_probabilities(keys.n_block_begin, alpha);
      pack_p();
      FmhaRingPos prev = ring;
      ring.advance<Shape::kStageCount>();

      for (int n_block = keys.n_block_begin + 1; n_block < mine.n_end; ++n_block) {
        fmha_mbarrier_wait(bars.k_full(ring.slot), ring.phase);
        fmha_mbarrier_wait(bars.v_full(prev.slot), prev.phase);
        fmha_named_barrier_sync(turn_mine, 256);
        fmha_wgmma_fence();
        Mma::qk(s_flat, q_buf, wg_row0, smem_k + ring.slot * Shape::kKVBytes);
        fmha_wgmma_commit();
        Mma::pv(o, pa, smem_v + prev.slot * Shape::kKVBytes);
        fmha_wgmma_commit();
        fmha_named_barrier_arrive(turn_other, 256);
        release_previous_q();  // under the MMAs
        fmha_wgmma_wait<1>();  // S_i is ready; P_{i-1} V_{i-1} may still run
        fmha_wgmma_fence_operands(s_flat);
        fmha_fwd_sm90a_release(bars.k_empty(ring.slot));
        scores_to_probabilities(n_block, alpha);
        fmha_wgmma_wait<0>();
#pragma unroll
        for (int c = 0; c < kOChunks; ++c) fmha_wgmma_fence_operands(o[c]);
        fmha_wgmma_fence_operands(pa);
        fmha_fwd_sm90a_release(bars.v_empty(prev.slot));
#pragma unroll
        for (int c = 0; c < kOChunks; ++c) {
#pragma unroll
          for (int i = 0; i < kON / 2; ++i) o[c][i] *= alpha[(i >> 1) & 1];
        }
        pack_p();
        prev = ring;
        ring.advance<Shape::kStageCount>();
      }

      // The last tile's P V.
      fmha_mbarrier_wait(bars.v_full(prev.slot), prev.phase);
      fmha_named_barrier_sync(turn_mine, 256);
      fmha_wgmma_fence();
      if (!kMayNarrow) {
        Mma::pv(o, pa, smem_v + prev.slot * Shape::kKVBytes);
      } else {
        // The halves in one group: Q K^T at N 64 instead (saving its half too) made ptxas
        // serialise every wgmma of the kernel, and so did a branch between a full and a half
        // P V; this shape costs one fence, here and where ptxas injects one at the join.
        Mma::template pv<0, kKStepsPV / 2>(o, pa, smem_v + prev.slot * Shape::kKVBytes);
        if (!mine.narrow) {
          fmha_wgmma_fence();
          Mma::template pv<kKStepsPV / 2, kKStepsPV>(o, pa, smem_v + prev.slot * Shape::kKVBytes);
        }
      }
      fmha_wgmma_commit();
      fmha_named_barrier_arrive(turn_other, 256);
      release_previous_q();  // under the MMA (a tile of one block issued none before)
      fmha_wgmma_wait<0>();
#pragma unroll
      for (int c = 0; c < kOChunks; ++c) fmha_wgmma_fence_operands(o[c]);
      fmha_fwd_sm90a_release(bars.v_empty(prev.slot));
      // Blocks past this warpgroup's rows: no MMA, but a turn each (the warpgroups alternate
      // strictly, so each takes as many turns per tile as the tile has blocks, plus one), and
      // their slots counted free once loaded: an arrival before the load could count towards the
      // slot's previous use, which another warpgroup may still read. After the release above:
      // with one K / V stage the producer loads these blocks only once it has the slot back.
      for (int n_block = mine.n_end; n_block < keys.n_block_end; ++n_block) {
        fmha_mbarrier_wait(bars.k_full(ring.slot), ring.phase);
        fmha_mbarrier_wait(bars.v_full(ring.slot), ring.phase);
        fmha_fwd_sm90a_release(bars.k_empty(ring.slot));
        fmha_fwd_sm90a_release(bars.v_empty(ring.slot));
        fmha_named_barrier_sync(turn_mine, 256);
        fmha_named_barrier_arrive(turn_other, 256);
        ring.advance<Shape::kStageCount>();
      }
    } else {
      if (kLateEpilogue && pending.iter >= 0) store_pending();
      release_previous_q();
    }
    pending.iter = -1;  // stored, if there was one

    // Epilogue: normalise, write the LSE, stage O as 16 bits in this warpgroup's rows of the Q
    // buffer, then one thread stores it. With two Q buffers (outside the split tail, whose
    // segments end in fmha_fwd_sm90a_split_finish, at the end of their own iteration), only the
    // normalisation and the LSE here, the rest under the next tile's S_0 (store_pending).
    float inv_sum[2];
    if (kLateEpilogue && !fmha_fwd_sm90a_in_split<kMaskKind>(P, iter)) {
      finalize(softmax, h, inv_sum, pending.lse);
#pragma unroll
      for (int c = 0; c < kOChunks; ++c) {
#pragma unroll
        for (int j = 0; j < kON / 2; ++j) {
          pending.o[c][j] = o[c][j] * inv_sum[(j >> 1) & 1];
        }
      }
      pending.iter = slot_iter;
      pending.rows = rows;
      continue;
    }
    if (kLateEpilogue) {
      // Nothing is pending after a split tile, but `pending.o` is written on every path into the
      // next tile: otherwise the last tile's stayed live through the key loop (and spilled).
#pragma unroll
      for (int c = 0; c < kOChunks; ++c) {
#pragma unroll
        for (int i = 0; i < kON / 2; ++i) pending.o[c][i] = 0.f;
      }
    }
    // Every warp of the warpgroup is past its last MMA, so no wgmma still reads these Q rows.
    fmha_named_barrier_sync(kFmhaSm90aBarEpilogue0 + cw, 128);
    float lse[2];
    if (fmha_fwd_sm90a_in_split<kMaskKind>(P, iter)) {
      // A segment of a split tile: only the warpgroup that completes the tile stores it, from
      // every segment's partial. The flag word is its first staging row, free until it stages.
      if (!fmha_fwd_sm90a_split_finish<kMaskKind, kOChunks, kON>(P, iter, Shape::kConsumers, cw, o,
                                                                 softmax, q_buf + wg_row0 * 128,
                                                                 kFmhaSm90aBarEpilogue0 + cw)) {
        if (Shape::kQStages == 1 && fmha_thread_idx() % 128 == 0) {
          fmha_mbarrier_arrive(bars.q_empty(0));  // no store reads the buffer
        }
        continue;
      }
      finalize(softmax, h, inv_sum, lse);
      fmha_fwd_sm90a_split_stage<kMaskKind, kOChunks, kON>(
          P, iter, Shape::kConsumers, cw, softmax.row_max, inv_sum,
          [&](int hf, int col, float x, float y) { stage(q_buf, hf, col, Pack::pack(x, y)); });
    } else {
      finalize(softmax, h, inv_sum, lse);
      stage_o(q_buf, o, inv_sum);
    }
    write_lse(rows, lse);
    store(q_buf, rows);
  }
  if (kLateEpilogue && pending.iter >= 0) store_pending();
  if (fmha_thread_idx() % 128 == 0) fmha_bulk_wait_group<0>();
}

template <class Element, int kHdim, int kMaskKind, bool kWriteLse, bool kVarlen, bool kSinks,
          bool kSoftcap, int kBlockM, int kBlockN, int kStages>
FMHA_DEVICE void fmha_fwd_sm90a(const FmhaFwdSm90Params& P, char* smem_raw) {
  using Shape = FmhaFwdSm90aShape<kHdim, kBlockM, kBlockN, kStages>;
  // The 128-byte swizzle repeats every 1024 bytes and the descriptors and the O staging assume
  // tiles that start on that period; dynamic shared memory is only 16-byte aligned.
  const unsigned smem_q = (fmha_smem_addr(smem_raw) + 1023u) & ~1023u;
  const FmhaFwdSm90aBarriers<Shape> bars{smem_q + Shape::kBarOffset};
  const int tid = fmha_thread_idx();
  if (tid == 0) {
    fmha_tma_prefetch_map(P.q_map);
    fmha_tma_prefetch_map(P.k_map);
    fmha_tma_prefetch_map(P.v_map);
    fmha_tma_prefetch_map(P.o_map);
#pragma unroll
    for (int s = 0; s < Shape::kQStages; ++s) {
      fmha_mbarrier_init(bars.q_full(s), 1);
      // One arrival per consumer warpgroup (its storing thread).
      fmha_mbarrier_init(bars.q_empty(s), Shape::kConsumers);
    }
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      fmha_mbarrier_init(bars.k_full(s), 1);
      fmha_mbarrier_init(bars.v_full(s), 1);
      fmha_mbarrier_init(bars.k_empty(s), Shape::kConsumerArrivals);
      fmha_mbarrier_init(bars.v_empty(s), Shape::kConsumerArrivals);
    }
    fmha_mbarrier_init_fence();
  }
  fmha_sync_threads();
  const int wg = fmha_warpgroup_idx();
  if (wg == 0) {
    fmha_setmaxnreg_dec<Shape::kProducerRegs>();
    if (tid == 0) fmha_fwd_sm90a_produce<Shape, kMaskKind, kVarlen>(P, smem_q, bars);
    return;
  }
  fmha_setmaxnreg_inc<Shape::kConsumerRegs>();
  fmha_fwd_sm90a_consume<Element, Shape, kMaskKind, kWriteLse, kVarlen, kSinks, kSoftcap>(
      P, smem_q, bars, wg - 1);
}
