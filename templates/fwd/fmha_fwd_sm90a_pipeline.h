// The Hopper forward's pipeline (fwd/fmha_fwd_sm90a.h): the shared-memory shape of one
// instantiation, its barriers, and the producer, one thread that issues every TMA copy in the
// order the consumer warpgroups take the tiles.
#pragma once

#include "common/fmha_params.h"
#include "common/mask_fragments.h"
#include "common/platform.h"
#include "common/sequence.h"
#include "fwd/fmha_fwd_sm90a_work.h"
#include "sm90/mbarrier_sm90.h"
#include "sm90/tma_sm90.h"

// Compile-time shape of one instantiation. Mirrored on the host by
// wgmma_sm90a::fwd_smem_bytes (kernels/wgmma_sm90a/tiles.cpp).
template <int kHdim, int kTileM, int kBlockN, int kStages>
struct FmhaFwdSm90aShape {
  enum {
    kBlockM = kTileM,
    kConsumers = kTileM / 64,  // consumer warpgroups, 64 query rows each
    kThreads = 128 * (1 + kConsumers),
    kSlabs = kHdim / 64,  // 64-column slabs of a Q, K, V or O tile
    kQSlabBytes = kBlockM * 128,
    kKVSlabBytes = kBlockN * 128,
    kQBytes = kSlabs * kQSlabBytes,
    kKVBytes = kSlabs * kKVSlabBytes,  // one stage of K (or of V)
    // Two Q buffers when they fit in sm_90's 227 KB beside the K and V stages (and their two
    // extra barriers). Mirrored by wgmma_sm90a::fwd_smem_bytes.
    kQStages =
        2 * kQBytes + 2 * kStages * kKVBytes + (4 + 4 * kStages) * 8 + 1024 <= 227 * 1024 ? 2 : 1,
    kKOffset = kQStages * kQBytes,
    kVOffset = kKOffset + kStages * kKVBytes,
    kBarOffset = kVOffset + kStages * kKVBytes,
    // q_full, q_empty per Q buffer, then k_full, k_empty, v_full, v_empty per K/V stage
    kBarriers = 2 * kQStages + 4 * kStages,
    kSmemBytes = kBarOffset + kBarriers * 8 + 1024,
    kNT = kBlockN / 8,  // n8 score fragments per warp row block
    // N of one P V instruction (wgmma takes N <= 256; 128 keeps one accumulator array per
    // instruction; hdim 192 takes three of N 64, which exist already, rather than two of N 96)
    kON = kHdim % 128 == 0 ? 128 : 64,
    kOChunks = kHdim / kON,
    kKStepsQK = kHdim / 16,
    kKStepsPV = kBlockN / 16,
    kConsumerArrivals = 4 * kConsumers,  // one per consumer warp
    kStageCount = kStages,
    // Registers per thread after setmaxnreg. The sums are what the CTA holds at launch (the
    // launch bounds' share of the 64K file, 168 x 384 or 128 x 512): setmaxnreg.inc waits until
    // the pool has what it asks for, so a larger split never proceeds (32 + 2 x 240 hung on the
    // H200). Two consumers: 240, since at hdim 256 O alone is 128 (232 spilled); three (hdim 64
    // only): 160 hold O 32 + S 64 + P 32.
    kProducerRegs = kConsumers == 2 ? 24 : 32,
    kConsumerRegs = kConsumers == 2 ? 240 : 160,
  };
  static_assert(kTileM == 128 || (kTileM == 192 && kHdim == 64),
                "128 query rows, or 192 (three consumer warpgroups) at hdim 64");
  static_assert(kHdim == 64 || kHdim == 128 || kHdim == 192 || kHdim == 256,
                "hdim 64, 128, 192 or 256");
  static_assert(kBlockN == 64 || kBlockN == 128 || (kBlockN == 80 && kHdim >= 192),
                "wgmma N of Q K^T: 64, 128, or 80 at hdim 192 / 256");
  static_assert(kStages >= 1 && kStages <= 4, "1 to 4 K/V stages");
};

// Barrier ids of the named barriers (0 is __syncthreads): the issuing turn of each consumer
// warpgroup, and each one's epilogue (room for three consumers).
enum {
  kFmhaSm90aBarTurn0 = 1,
  kFmhaSm90aBarEpilogue0 = 4,
};

// Shared-memory addresses of the barriers.
template <class Shape>
struct FmhaFwdSm90aBarriers {
  unsigned base;
  FMHA_DEVICE unsigned q_full(int s) const { return base + 8 * s; }
  FMHA_DEVICE unsigned q_empty(int s) const { return q_full(Shape::kQStages + s); }
  FMHA_DEVICE unsigned k_full(int s) const { return base + 16 * Shape::kQStages + 8 * s; }
  FMHA_DEVICE unsigned k_empty(int s) const { return k_full(Shape::kStageCount + s); }
  FMHA_DEVICE unsigned v_full(int s) const { return k_full(2 * Shape::kStageCount + s); }
  FMHA_DEVICE unsigned v_empty(int s) const { return k_full(3 * Shape::kStageCount + s); }
};

// The producer: one thread issues every copy, tile after tile, in the consumers' order. Empty
// barriers are waited on with the opposite parity, which a fresh barrier passes at once: every
// slot starts free.
template <class Shape, int kMaskKind, bool kVarlen>
FMHA_DEVICE void fmha_fwd_sm90a_produce(const FmhaFwdSm90Params& P, unsigned smem_q,
                                        const FmhaFwdSm90aBarriers<Shape>& bars) {
  const FmhaFwdParams& p = P.fwd;
  const unsigned smem_k = smem_q + Shape::kKOffset;
  const unsigned smem_v = smem_q + Shape::kVOffset;
  FmhaRingPos ring{0, 0u};
  FmhaFwdSm90aWork w;
  int used = 0;  // tiles taken: a packed batch's tiles past a short sequence are passed over
  for (int iter = 0; fmha_fwd_sm90a_work<kMaskKind>(P, iter, w); ++iter) {
    int m_block, h, b;
    fmha_fwd_sm90a_tile<kMaskKind>(P, w.tile, m_block, h, b);
    const int hk = h / (p.nhead_q / p.nhead_k);
    const int m0 = m_block * Shape::kBlockM;
    const FmhaSequence seq = fmha_sequence<kVarlen>(p, b);
    if (kVarlen && m0 >= seq.seqlen_q) continue;  // the consumers pass it over too
    FmhaMaskGeometry lengths;
    const auto& lens = fmha_lengths<kVarlen>(p, seq, lengths);
    const FmhaBlockKeys keys = fmha_fwd_sm90a_work_keys(
        w, fmha_block_keys<kMaskKind, Shape::kBlockM, Shape::kNT * 8>(m0, lens));
    // A packed batch's maps span all its tokens as one sequence of batch 0.
    const int q_row = kVarlen ? seq.q_row0 + m0 : m0;
    const int k_row0 = kVarlen ? seq.k_row0 : 0;
    const int tb = kVarlen ? 0 : b;
    const int slot_iter = kVarlen ? used : iter;
    ++used;

    // Use slot_iter / kQStages of Q buffer qs: the store of its use before must have read it.
    const int qs = slot_iter % Shape::kQStages;
    const int q_use = slot_iter / Shape::kQStages;
    if (q_use > 0) fmha_mbarrier_wait(bars.q_empty(qs), (q_use - 1) & 1);
    // Rows past seqlen_q arrive as zeros (or, packed, as the next sequence's rows, which no
    // output keeps); the full box counts towards the transaction bytes.
    fmha_mbarrier_arrive_expect_tx(bars.q_full(qs), Shape::kQBytes);
#pragma unroll
    for (int sl = 0; sl < Shape::kSlabs; ++sl) {
      fmha_tma_load_4d(smem_q + qs * Shape::kQBytes + sl * Shape::kQSlabBytes, P.q_map,
                       bars.q_full(qs), sl * 64, q_row, h, tb);
    }
    for (int n_block = keys.n_block_begin; n_block < keys.n_block_end; ++n_block) {
      const int n0 = n_block * Shape::kNT * 8;
      const unsigned k_dst = smem_k + ring.slot * Shape::kKVBytes;
      const unsigned v_dst = smem_v + ring.slot * Shape::kKVBytes;
      fmha_mbarrier_wait(bars.k_empty(ring.slot), ring.phase ^ 1u);
      fmha_mbarrier_arrive_expect_tx(bars.k_full(ring.slot), Shape::kKVBytes);
#pragma unroll
      for (int sl = 0; sl < Shape::kSlabs; ++sl) {
        fmha_tma_load_4d(k_dst + sl * Shape::kKVSlabBytes, P.k_map, bars.k_full(ring.slot), sl * 64,
                         k_row0 + n0, hk, tb);
      }
      fmha_mbarrier_wait(bars.v_empty(ring.slot), ring.phase ^ 1u);
      fmha_mbarrier_arrive_expect_tx(bars.v_full(ring.slot), Shape::kKVBytes);
#pragma unroll
      for (int sl = 0; sl < Shape::kSlabs; ++sl) {
        fmha_tma_load_4d(v_dst + sl * Shape::kKVSlabBytes, P.v_map, bars.v_full(ring.slot), sl * 64,
                         k_row0 + n0, hk, tb);
      }
      ring.advance<Shape::kStageCount>();
    }
  }
}
