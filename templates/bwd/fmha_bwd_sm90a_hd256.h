// Backward stage 2 for Hopper (sm_90a) at head dim 256. The hdim 64 / 128 kernel
// (fmha_bwd_sm90a.h) gives each consumer warpgroup its own 64 keys and keeps their dK and dV in
// registers: 2 x 64 x 256 fp32 over 128 threads is 256 registers each here, more than a consumer
// has. So both consumer warpgroups share one tile of 64 keys and split the head dim instead:
// warpgroup w owns columns 128 w .. 128 w + 127 of dK, dV and dQ (64 + 64 accumulator registers
// for dK and dV, as at hdim 128). The products over the full head dim are split by operand:
//   warpgroup 0: S^T = K Q^T            warpgroup 1: dP^T = V dO^T     (SS wgmma, 64 x 64 x 256)
//   warpgroup 0: P^T (exp2, masks)      warpgroup 1: X = dP^T - D
// then each sends the other the half it needs through shared memory (fp32, 8 KB each way):
//   warpgroup 0: dS^T = P^T o X, queries 0 .. 31      warpgroup 1: the same, queries 32 .. 63
// P^T (from warpgroup 0) and dS^T (both halves) are stored as 16-bit K-major tiles, and both
// warpgroups run the rest as SS wgmma on their head-dim half:
//   dV_w += P^T dO_w, dK_w += dS^T Q_w (N = 128), dQ_w = dS K_w in two 64-column blocks
// which the dQ writer adds to dq_accum by TMA reduce-add, as in the hdim 64 / 128 kernel.
// Each product is computed once; what the split costs is the two exchanges (32 KB of shared
// traffic per query tile against 5 x 1 M MACs) and two named barriers per query tile.
//
// Launch geometry (the dispatcher relies on exactly this):
//   grid  = (ceil(Sk / 64), Hk, B): one CTA per 64 keys of a kv head (1-D in the order of
//           fmha_bwd_key_tile_cta when deterministic or under a causal mask)
//   block = 384 threads: warp 0 produces (TMA, LSE, D), warps 1 and 2 write dQ (one round each),
//           warpgroups 1 and 2 compute
//   dynamic shared memory = FmhaBwdSm90aHd256Shape::kSmemBytes, ~226 KB either way: one Q stage
//           and two dQ blocks per warpgroup (one per round), or two Q stages and one dQ block
//           per warpgroup; dO has one stage (the first of the two to be released), since a
//           second would not fit
//
// Shared-memory buffers and their hand-offs (B1, B2: named barriers over both warpgroups):
//   P^T (16-bit), exchange: written before B1, read after B1 (dV MMA, dS), free once both
//     warpgroups pass B2, which each reaches after its dV MMA completed and its exchange reads;
//   dS^T (16-bit): written between B1 and B2, read after B2 by dK and dQ MMAs, which complete
//     before either warpgroup can pass the next B1.
// Deterministic mode: the writer keeps the semaphore order of fmha_bwd_sm90a.h over 64-key tiles,
// one chain per dQ round (two 16-bit counts in each semaphore, fmha_bwd_sm90a_schedule.h).
#pragma once

#include "bwd/fmha_bwd_sm90a.h"

// Compile-time shape. Mirrored on the host by codegen::wgmma_sm90a_bwd_smem_bytes.
template <int kStages>
struct FmhaBwdSm90aHd256Shape {
  enum {
    kHdim = 256,
    kBlockM = 64,
    kBlockN = 64,
    kThreads = 384,
    kSlabs = kHdim / 64,
    kKVSlabBytes = kBlockN * 128,  // also the P^T and dS^T tiles (64 keys x 64 queries)
    kQSlabBytes = kBlockM * 128,
    kKVBytes = kSlabs * kKVSlabBytes,
    kQBytes = kSlabs * kQSlabBytes,
    kXchgBytes = 8 * 128 * 8,     // one warpgroup's 32 query columns: 8 float2 x 128 threads
    kDqBlockBytes = 64 * 64 * 4,  // one 64 x 64 fp32 dQ block, 2 slabs of 32 columns
    kKOffset = 0,
    kVOffset = kKVBytes,
    kQOffset = 2 * kKVBytes,
    kDoOffset = kQOffset + kStages * kQBytes,
    kPOffset = kDoOffset + kQBytes,
    kDsOffset = kPOffset + kKVSlabBytes,
    kXchgOffset = kDsOffset + kKVSlabBytes,
    // dQ staging per consumer warpgroup: one block per round where shared memory has room (one
    // Q stage, the heuristic's choice in both modes), so that round 1's block does not wait for
    // round 0's writer (in the deterministic mode, for its turn); otherwise one block the two
    // rounds take in turn.
    kDqBuffers = 3 - kStages,
    kDqOffset = kXchgOffset + 2 * kXchgBytes,
    kLseOffset = kDqOffset + 2 * kDqBuffers * kDqBlockBytes,
    kDsumOffset = kLseOffset + kStages * kBlockM * 4,
    kBarOffset = kDsumOffset + kBlockM * 4,
    kBarriers = 1 + 2 * kStages + 2 + 4 + 2 * kDqBuffers,
    kWalkOffset = kBarOffset + kBarriers * 8,  // the up-down walk (FmhaBwdSm90aWalk)
    kSmemBytes = kWalkOffset + kFmhaBwdSm90aWalkBytes + 1024,
    // What FmhaBwdSm90aMma reads: S^T / dP^T over the whole head dim, dQ over 64 keys.
    kKStepsHdim = kHdim / 16,
    kKStepsQuery = kBlockM / 16,
    kKStepsKey = kBlockN / 16,
    kDN = 128,  // each warpgroup's head-dim half: N of its dK, dV MMAs
    kDChunks = 1,
    kQueryNT = kBlockM / 8,
    kProducerArrivals = 1 + 32,
    kConsumerWarpArrivals = 8,
    kStageCount = kStages,
    kSplitTail = 0,  // no split tail (fmha_bwd_key_tile_cta): its grid rows did not need one
  };
  // Where warpgroup w's 64 x 64 dQ block of round `round` lies in the query tile (the writer,
  // fmha_bwd_sm90a_write_dq): all 64 rows, columns 64 round .. of its head-dim half.
  FMHA_DEVICE static int dq_row0(int /*w*/) { return 0; }
  FMHA_DEVICE static int dq_col0(int w, int round) { return 128 * w + 64 * round; }
  // Warpgroup w's staging block of round `round`, and how many times a round of iteration `it`
  // finds that block used before (the parity of its dq_empty wait).
  FMHA_DEVICE static int dq_block_offset(int w, int round) {
    return kDqOffset + (w * kDqBuffers + round % kDqBuffers) * kDqBlockBytes;
  }
  FMHA_DEVICE static int dq_block_uses(int it, int round) {
    return kDqBuffers == 2 ? it : 2 * it + round;
  }
  static_assert(kStages == 1 || kStages == 2, "1 or 2 Q stages fit beside one dO stage");
};

template <class Shape>
struct FmhaBwdSm90aHd256Barriers {
  unsigned base;
  FMHA_DEVICE unsigned kv_full() const { return base; }
  FMHA_DEVICE unsigned q_full(int s) const { return base + 8 + 8 * s; }
  FMHA_DEVICE unsigned q_empty(int s) const { return q_full(Shape::kStageCount + s); }
  FMHA_DEVICE unsigned do_full() const { return q_full(2 * Shape::kStageCount); }
  FMHA_DEVICE unsigned do_empty() const { return do_full() + 8; }
  // One dq_full per round: each round has its own writer thread, and a parity wait on a barrier
  // both rounds completed could pass on the other round's phase.
  FMHA_DEVICE unsigned dq_full(int w, int round) const {
    return do_full() + 16 + 16 * round + 8 * w;
  }
  FMHA_DEVICE unsigned dq_empty(int w, int round) const {
    return do_full() + 48 + 16 * (round % Shape::kDqBuffers) + 8 * w;
  }
};

// Named barriers of the two consumer warpgroups (fmha_bwd_sm90a_consumer.h's use id 1).
enum { kFmhaBwdHd256BarExchange = 1, kFmhaBwdHd256BarDs = 2 };

// Warp 0: K and V once; then per query tile Q with its LSE rows (kStages deep) and dO with its D
// rows (one deep), as in fmha_bwd_sm90a_produce.
template <class Shape, int kMaskKind, bool kDeterministic, bool kWalks>
FMHA_DEVICE void fmha_bwd_sm90a_hd256_produce(const FmhaBwdSm90Params& P, unsigned smem,
                                              const FmhaBwdSm90aHd256Barriers<Shape>& bars) {
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
    float lse_rows[kBlockM / 32], d_rows[kBlockM / 32];  // loaded ahead of both waits below
    fmha_bwd_sm90a_load_stat_rows<kBlockM>(P, stat, m0, lse_rows, d_rows);
    fmha_mbarrier_wait(bars.q_empty(ring.slot), ring.phase ^ 1u);
    if (lane == 0) {
      fmha_mbarrier_arrive_expect_tx(bars.q_full(ring.slot), Shape::kQBytes);
#pragma unroll
      for (int sl = 0; sl < Shape::kSlabs; ++sl) {
        fmha_tma_load_4d(
            smem + Shape::kQOffset + ring.slot * Shape::kQBytes + sl * Shape::kQSlabBytes, P.q_map,
            bars.q_full(ring.slot), sl * 64, m0, h, w.b);
      }
    }
    fmha_bwd_sm90a_store_stat_rows<kBlockM>(smem + Shape::kLseOffset + ring.slot * kBlockM * 4,
                                            lse_rows);
    fmha_mbarrier_arrive(bars.q_full(ring.slot));

    fmha_mbarrier_wait(bars.do_empty(), (it & 1) ^ 1);
    if (lane == 0) {
      fmha_mbarrier_arrive_expect_tx(bars.do_full(), Shape::kQBytes);
#pragma unroll
      for (int sl = 0; sl < Shape::kSlabs; ++sl) {
        fmha_tma_load_4d(smem + Shape::kDoOffset + sl * Shape::kQSlabBytes, P.do_map,
                         bars.do_full(), sl * 64, m0, h, w.b);
      }
    }
    fmha_bwd_sm90a_store_stat_rows<kBlockM>(smem + Shape::kDsumOffset, d_rows);
    fmha_mbarrier_arrive(bars.do_full());
    ring.advance<Shape::kStageCount>();
  }
}

// acc (64 keys x 128 columns) += A B, A = a 64 x 64 16-bit tile (keys x queries, K-major, one
// swizzled slab), B = the columns [col0, col0 + 128) of a query tile read N-major.
template <class Element, class Shape>
FMHA_DEVICE void fmha_bwd_sm90a_hd256_accumulate(float (&acc)[64], unsigned a_tile, unsigned q_tile,
                                                 int col0) {
  using Mma = FmhaBwdSm90aMma<Element, Shape>;
#pragma unroll
  for (int ks = 0; ks < Shape::kKStepsQuery; ++ks) {
    FmhaWgmma<Element, 128, 1>::ss(
        acc, Mma::kmajor(a_tile, Shape::kKVSlabBytes, ks),
        Mma::mnmajor(q_tile + (col0 / 64) * Shape::kQSlabBytes, Shape::kQSlabBytes, ks), 1);
  }
}

// A 16-bit 64 x 64 tile (rows = keys, 128-byte swizzle) from an S^T-layout accumulator: this
// lane's elements of n8 blocks [kJ0, kJ1).
template <class Element, int kJ0, int kJ1>
FMHA_DEVICE void fmha_bwd_sm90a_hd256_store_tile(unsigned tile, const float (&v)[32], int key_row) {
  const int lane = fmha_lane_id();
#pragma unroll
  for (int j = kJ0; j < kJ1; ++j) {
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int r = key_row + hf * 8;
      fmha_st_shared_b32(tile + r * 128 + ((j ^ (r & 7)) << 4) + (lane & 3) * 4,
                         FmhaMmaSm80<Element>::pack(v[4 * j + 2 * hf], v[4 * j + 2 * hf + 1]));
    }
  }
}

// Consumer warpgroup kCw (a template parameter: which n8 blocks of S^T it sends and which it
// keeps must be compile-time indices, or the accumulators would go to local memory). `walks` is
// a runtime flag here, unlike in the producer and the dQ writers: the consumer takes only the
// query tile from its visit, for the mask, and a second copy of its loop (128 HGMMA) cost a third
// of the deterministic causal kernel's cold compile (NVRTC on 2 cores: 2.6-3.3 s -> 1.95 s;
// docs/METHOD.md, "Compile time"). Its speed held (H100, bf16 causal deterministic: GQA 8:2
// S 16384 343 against 343 TFLOP/s, S 8192 377 against 377, MHA S 16384 410 against 410, S 2048
// 296 against 296).
template <class Element, class Shape, int kMaskKind, bool kDeterministic, int kCw>
FMHA_DEVICE void fmha_bwd_sm90a_hd256_consume(const FmhaBwdSm90Params& P, unsigned smem,
                                              const FmhaBwdSm90aHd256Barriers<Shape>& bars,
                                              bool walks) {
  using Mma = FmhaBwdSm90aMma<Element, Shape>;
  enum { kBlockM = Shape::kBlockM, kRatio = Shape::kBlockN / Shape::kBlockM };
  const FmhaFwdParams& f = P.bwd.fwd;
  const FmhaBwdSm90aWork w = fmha_bwd_sm90a_work<Shape, kMaskKind, kDeterministic>(P.bwd);
  const int lane = fmha_lane_id();
  const int tid_in_wg = fmha_thread_idx() % 128;
  const int warp_in_wg = tid_in_wg / 32;
  const int n0 = w.n_block * Shape::kBlockN;
  const int key_row = warp_in_wg * 16 + (lane >> 2);  // this lane's first key row
  constexpr int col0 = 128 * kCw;                     // this warpgroup's head-dim half
  const unsigned p_tile = smem + Shape::kPOffset;
  const unsigned ds_tile = smem + Shape::kDsOffset;
  // Exchange slots: float2 number (j % 4) * 2 + hf of this thread at 8 (128 k + tid) bytes, so a
  // warp's 32 lanes touch 256 consecutive bytes. Warpgroup 0 sends P^T of queries 32 .. 63,
  // warpgroup 1 sends X of queries 0 .. 31.
  const unsigned send = smem + Shape::kXchgOffset + kCw * Shape::kXchgBytes + tid_in_wg * 8;
  const unsigned recv = smem + Shape::kXchgOffset + (1 - kCw) * Shape::kXchgBytes + tid_in_wg * 8;
  constexpr int j_mine = kCw == 0 ? 0 : 4;  // the n8 blocks of dS^T this warpgroup computes
  const float scale_log2 = f.scale_log2;

  float dk[1][64];  // one chunk of N = 128: the layout fmha_bwd_sm90a_store_dkdv takes
  float dv[1][64];
#pragma unroll
  for (int i = 0; i < 64; ++i) dk[0][i] = dv[0][i] = 0.f;

  FmhaKeyRange seen[2];
#pragma unroll
  for (int hf = 0; hf < 2; ++hf)
    seen[hf] = fmha_bwd_key_queries<kMaskKind>(n0 + key_row + hf * 8, f);

  const FmhaBwdSm90aWalkSmem walk{smem + Shape::kWalkOffset};
  fmha_mbarrier_wait(bars.kv_full(), 0);
  FmhaRingPos ring{0, 0u};
  for (int it = 0; it < w.num_iters; ++it) {
    const int m0 = fmha_bwd_sm90a_visit<kRatio>(w, walk, walks, it).m_block * kBlockM;
    const unsigned q_tile = smem + Shape::kQOffset + ring.slot * Shape::kQBytes;
    const unsigned do_tile = smem + Shape::kDoOffset;
    const unsigned col_pair = (lane & 3) * 8;  // this lane's two columns of an n8 block, fp32

    // t = S^T (warpgroup 0) or dP^T (warpgroup 1), then P^T or X = dP^T - D in place.
    float t[32];
    fmha_mbarrier_wait(bars.q_full(ring.slot), ring.phase);
    fmha_mbarrier_wait(bars.do_full(), it & 1);
    fmha_wgmma_fence();
    if (kCw == 0) {
      Mma::scores(t, smem + Shape::kKOffset, q_tile);
    } else {
      Mma::scores(t, smem + Shape::kVOffset, do_tile);
    }
    fmha_wgmma_commit();
    fmha_wgmma_wait<0>();
    fmha_wgmma_fence_operands(t);
    if (kCw == 0) {
      fmha_bwd_sm90a_probabilities<8>(
          t, smem + Shape::kLseOffset + ring.slot * kBlockM * 4 + col_pair, scale_log2,
          fmha_bwd_sm90a_tile_full<kMaskKind, kBlockM, Shape::kBlockN>(m0, n0, f), seen, m0);
      fmha_bwd_sm90a_hd256_store_tile<Element, 0, 8>(p_tile, t, key_row);
    } else {
      const unsigned dsum = smem + Shape::kDsumOffset + col_pair;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const FmhaF32x2 d = fmha_ld_shared_f32x2(dsum + j * 32);
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          t[4 * j + 2 * hf] -= d.x;
          t[4 * j + 2 * hf + 1] -= d.y;
        }
      }
    }
    // Send the other warpgroup's half: the n8 blocks it computes dS^T for.
#pragma unroll
    for (int jj = 0; jj < 4; ++jj) {
      const int j = (4 - j_mine) + jj;
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        fmha_st_shared_f32x2(send + (jj * 2 + hf) * 128 * 8, t[4 * j + 2 * hf],
                             t[4 * j + 2 * hf + 1]);
      }
    }
    fmha_fence_proxy_async_shared();  // P^T is read by the dV MMAs below
    // Unaligned: the two warpgroups run two instantiations of this function (kCw).
    fmha_named_barrier_sync_unaligned(kFmhaBwdHd256BarExchange, 256);

    fmha_wgmma_fence();
    fmha_bwd_sm90a_hd256_accumulate<Element, Shape>(dv[0], p_tile, do_tile, col0);
    fmha_wgmma_commit();

    // dS^T = P^T o X on this warpgroup's 32 queries: one factor here, the other received.
    float ds[32];
#pragma unroll
    for (int jj = 0; jj < 4; ++jj) {
      const int j = j_mine + jj;
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const FmhaF32x2 o = fmha_ld_shared_f32x2(recv + (jj * 2 + hf) * 128 * 8);
        ds[4 * j + 2 * hf] = t[4 * j + 2 * hf] * o.x;
        ds[4 * j + 2 * hf + 1] = t[4 * j + 2 * hf + 1] * o.y;
      }
    }
    fmha_bwd_sm90a_hd256_store_tile<Element, j_mine, j_mine + 4>(ds_tile, ds, key_row);
    fmha_fence_proxy_async_shared();
    fmha_wgmma_wait<0>();
    fmha_wgmma_fence_operands(dv[0]);
    // dO and D are no longer read by this warp (dV was its last reader).
    __syncwarp();
    if (lane == 0) fmha_mbarrier_arrive(bars.do_empty());
    // Both halves of dS^T are in place (unaligned, as above).
    fmha_named_barrier_sync_unaligned(kFmhaBwdHd256BarDs, 256);

    float dq[32];
    fmha_wgmma_fence();
    fmha_bwd_sm90a_hd256_accumulate<Element, Shape>(dk[0], ds_tile, q_tile, col0);
    Mma::dq(dq, ds_tile, smem + Shape::kKOffset + (col0 / 64) * Shape::kKVSlabBytes);
    fmha_wgmma_commit();
#pragma unroll
    for (int round = 0; round < 2; ++round) {
      if (round == 1) {
        fmha_wgmma_fence();
        Mma::dq(dq, ds_tile, smem + Shape::kKOffset + (col0 / 64 + 1) * Shape::kKVSlabBytes);
        fmha_wgmma_commit();
      }
      fmha_wgmma_wait<0>();
      fmha_wgmma_fence_operands(dq);
      if (round == 0) {
        fmha_wgmma_fence_operands(dk[0]);
        // Q and LSE of this stage are no longer read by this warp.
        __syncwarp();
        if (lane == 0) fmha_mbarrier_arrive(bars.q_empty(ring.slot));
      }
      // The dQ block into shared memory (fp32, 2 slabs of 32 columns, 128-byte swizzle) once
      // the writer has copied the previous one.
      fmha_mbarrier_wait(bars.dq_empty(kCw, round), (Shape::dq_block_uses(it, round) & 1) ^ 1);
      fmha_bwd_sm90a_store_dq_block(smem + Shape::dq_block_offset(kCw, round), dq);
      fmha_fence_proxy_async_shared();
      fmha_mbarrier_arrive(bars.dq_full(kCw, round));
    }
    ring.advance<Shape::kStageCount>();
  }

  fmha_bwd_sm90a_store_dkdv<Element, 1, 128>(P.bwd, w, n0 + key_row, col0, dk, dv);
}

template <class Element, int kMaskKind, bool kDeterministic, int kStages>
FMHA_DEVICE void fmha_bwd_sm90a_hd256_dq_dk_dv(const FmhaBwdSm90Params& P, char* smem_raw) {
  using Shape = FmhaBwdSm90aHd256Shape<kStages>;
  const unsigned smem = (fmha_smem_addr(smem_raw) + 1023u) & ~1023u;
  const FmhaBwdSm90aHd256Barriers<Shape> bars{smem + Shape::kBarOffset};
  const int tid = fmha_thread_idx();
  if (tid == 0) {
    fmha_bwd_sm90a_prefetch_maps(P);
    fmha_mbarrier_init(bars.kv_full(), 1);
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      fmha_mbarrier_init(bars.q_full(s), Shape::kProducerArrivals);
      // Both consumer warpgroups read Q (S^T, dK) and release it: 8 warps.
      fmha_mbarrier_init(bars.q_empty(s), Shape::kConsumerWarpArrivals);
    }
    fmha_mbarrier_init(bars.do_full(), Shape::kProducerArrivals);
    fmha_mbarrier_init(bars.do_empty(), Shape::kConsumerWarpArrivals);
#pragma unroll
    for (int cw = 0; cw < 2; ++cw) {
      fmha_mbarrier_init(bars.dq_full(cw, 0), 128);
      fmha_mbarrier_init(bars.dq_full(cw, 1), 128);
#pragma unroll
      for (int buf = 0; buf < Shape::kDqBuffers; ++buf)
        fmha_mbarrier_init(bars.dq_empty(cw, buf), 1);
    }
    fmha_mbarrier_init_fence();
    fmha_bwd_sm90a_store_walk<Shape, kMaskKind, kDeterministic>(P, smem + Shape::kWalkOffset);
  }
  fmha_sync_threads();
  // The producer's and the dQ writers' loops once per value of `walks`, as in
  // fmha_bwd_sm90a_dq_dk_dv; the consumers' once (fmha_bwd_sm90a_hd256_consume says why).
  const bool walks = fmha_bwd_sm90a_walks<kMaskKind, kDeterministic>(
      P.bwd, FmhaBwdSm90aWalkSmem{smem + Shape::kWalkOffset});
  const int wg = fmha_warpgroup_idx();
  if (wg == 0) {
    fmha_setmaxnreg_dec<40>();  // 40 + 2 x 232 within the 168 x 384 of the launch
    const int warp = fmha_warp_id();
    if (warp == 0) {
      if (walks)
        fmha_bwd_sm90a_hd256_produce<Shape, kMaskKind, kDeterministic, true>(P, smem, bars);
      else
        fmha_bwd_sm90a_hd256_produce<Shape, kMaskKind, kDeterministic, false>(P, smem, bars);
    }
    // Warps 1 and 2: one dQ writer per round, so that one round's wait for its adds to complete
    // (deterministic mode) overlaps the other's. One thread doing both spent two L2 round trips
    // per query tile, more than the tile's MMAs at S 16384 (H200, bf16, deterministic / atomic:
    // 0.91 with one semaphore held across both rounds, 0.85 with one per round and one writer,
    // 0.90 with two writers; causal 0.85, 0.79, 0.85). Each writer hands its round's dQ blocks
    // back (dq_empty) once its copies have read them.
    if ((warp == 1 || warp == 2) && fmha_lane_id() == 0) {
      using Bars = FmhaBwdSm90aHd256Barriers<Shape>;
      if (walks)
        fmha_bwd_sm90a_write_dq<Shape, Bars, kMaskKind, kDeterministic, true>(P, smem, bars,
                                                                              warp - 1);
      else
        fmha_bwd_sm90a_write_dq<Shape, Bars, kMaskKind, kDeterministic, false>(P, smem, bars,
                                                                               warp - 1);
    }
    return;
  }
  fmha_setmaxnreg_inc<232>();
  if (wg == 1) {
    fmha_bwd_sm90a_hd256_consume<Element, Shape, kMaskKind, kDeterministic, 0>(P, smem, bars,
                                                                               walks);
  } else {
    fmha_bwd_sm90a_hd256_consume<Element, Shape, kMaskKind, kDeterministic, 1>(P, smem, bars,
                                                                               walks);
  }
}
