// The consumer warpgroups of the hdim 64 / 128 Hopper backward (fmha_bwd_sm90a.h): per query
// tile S^T, dP^T, P^T and dS^T, dV and dK, dS^T to shared memory and the dQ block, with the next
// tile's S^T issued under this one's dQ; then dK and dV once.
#pragma once

#include "bwd/fmha_bwd_sm90a_common.h"
#include "bwd/fmha_bwd_sm90a_split.h"

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
  // One k-step of acc += A B: A (keys x queries) from registers, its 16 queries from 16 ks on, B
  // = those rows of the query tile (Q or dO) read N-major.
  FMHA_DEVICE static void accumulate_step(float (&acc)[Shape::kDChunks][Shape::kDN / 2],
                                          const unsigned (&a)[4], unsigned q_tile, int ks) {
#pragma unroll
    for (int c = 0; c < Shape::kDChunks; ++c) {
      FmhaWgmma<Element, Shape::kDN, 1>::rs(
          acc[c], a,
          mnmajor(q_tile + c * (Shape::kDN / 64) * Shape::kQSlabBytes, Shape::kQSlabBytes, ks), 1);
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

// A consumer warpgroup's registers across its query tiles: the dK and dV accumulators, the scores
// (each tile's S^T is computed at the end of the previous tile's code), and dP^T and dQ.
template <class Shape>
struct FmhaBwdSm90aConsumerRegs {
  float dk[Shape::kDChunks][Shape::kDN / 2];
  float dv[Shape::kDChunks][Shape::kDN / 2];
  float s[Shape::kBlockM / 2];
  float dp[Shape::kBlockM / 2];
  float dq[32];
};

// Issues S^T = K_w Q^T of the Q stage at `ring` once it has landed (one wgmma group).
template <class Element, class Shape>
FMHA_DEVICE void fmha_bwd_sm90a_issue_scores(const FmhaBwdSm90aBarriers<Shape>& bars, unsigned smem,
                                             int cw, const FmhaRingPos& ring,
                                             float (&s)[Shape::kBlockM / 2]) {
  fmha_mbarrier_wait(bars.q_full(ring.slot), ring.phase);
  fmha_wgmma_fence();
  FmhaBwdSm90aMma<Element, Shape>::scores(s, smem + Shape::kKOffset + cw * 64 * 128,
                                          smem + Shape::kQOffset + ring.slot * Shape::kQBytes);
  fmha_wgmma_commit();
}

// One query tile of consumer warpgroup cw, software-pipelined by one product: the tile's S^T was
// computed before (by the previous tile, or before the first), and unless kLast the next tile's
// S^T is issued right after this tile's dQ MMA, so that the tensor cores have work queued while
// the warpgroup waits for the writer and stores this tile's dQ block. No MMA stays in flight from
// one tile's code to the next: with the next S^T still pending at the loop's back edge, ptxas
// did not see that the wait after the next dP^T's issue retires it, and serialized every wgmma.
// (dP^T issued before the dQ block's store as well kept s, dp and dq in flight at once, and
// ptxas serialized the MMAs and spilled.)
template <class Element, class Shape, int kMaskKind, bool kLast>
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
  };
  const FmhaFwdParams& f = P.bwd.fwd;
  const int lane = fmha_lane_id();
  const int warp_in_wg = (fmha_thread_idx() / 32) % 4;
  const int n0 = w.n_block * Shape::kBlockN;
  const int key_row = cw * 64 + warp_in_wg * 16 + (lane >> 2);  // this lane's first key row
  const unsigned q_tile = smem + Shape::kQOffset + ring.slot * Shape::kQBytes;
  const unsigned do_tile = smem + Shape::kDoOffset + ring.slot * Shape::kQBytes;
  const unsigned stat_slot = ring.slot * kBlockM * 4 + (lane & 3) * 8;

  fmha_mbarrier_wait(bars.do_full(ring.slot), ring.phase);
  // The stage's query tile, from the producer (fmha_bwd_sm90a_consume says why); only a mask
  // reads it.
  const int m0 =
      kMaskKind == FMHA_MASK_NONE
          ? 0
          : static_cast<int>(fmha_ld_shared_b32(smem + Shape::kQueryRowOffset + ring.slot * 8));
  fmha_wgmma_fence();
  Mma::scores(r.dp, smem + Shape::kVOffset + cw * 64 * 128, do_tile);
  fmha_wgmma_commit();

  // P^T in place of S^T (complete since the previous tile) while dP^T is computed.
  fmha_wgmma_fence_operands(r.s);
  fmha_bwd_sm90a_probabilities<kNT>(
      r.s, smem + Shape::kLseOffset + stat_slot, f.scale_log2,
      fmha_bwd_sm90a_tile_full<kMaskKind, kBlockM, Shape::kBlockN>(m0, n0, f), seen, m0);
  fmha_wgmma_wait<0>();  // dP^T
  fmha_wgmma_fence_operands(r.dp);

  // P^T and dS^T = P^T o (dP^T - D) as 16-bit A fragments (k = queries), 16 queries at a time,
  // and each k-step of dV += P^T dO and dK += dS^T Q issued as soon as its fragments are packed,
  // so that the tensor cores run the first steps while the warpgroup packs the next. Issued after
  // all the packing, they left the tensor cores idle through it, both warpgroups packing at once
  // (the main kernel at hdim 128 S 2048: 1.33 -> 1.31 ms). Packing all of P^T first
  // (under dP^T, or to issue dV before dS^T) keeps P^T's fp32 values, its fragments and dP^T live
  // together: 16 bytes of spills, and ptxas serialized every wgmma (C7512). Each step's fence
  // orders its own fragments' writes.
  unsigned pa[kKSteps][4];
  unsigned da[kKSteps][4];
#pragma unroll
  for (int ks = 0; ks < kKSteps; ++ks) {
#pragma unroll
    for (int j = 2 * ks; j < 2 * ks + 2; ++j) {
      const FmhaF32x2 d = fmha_ld_shared_f32x2(smem + Shape::kDsumOffset + stat_slot + j * 32);
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int i = 4 * j + 2 * hf;
        pa[ks][(j % 2) * 2 + hf] = Pack::pack(r.s[i], r.s[i + 1]);
        da[ks][(j % 2) * 2 + hf] =
            Pack::pack(r.s[i] * (r.dp[i] - d.x), r.s[i + 1] * (r.dp[i + 1] - d.y));
      }
    }
    fmha_wgmma_fence();
    Mma::accumulate_step(r.dv, pa[ks], do_tile, ks);
    Mma::accumulate_step(r.dk, da[ks], q_tile, ks);
  }
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
    fmha_bwd_sm90a_issue_scores<Element, Shape>(bars, smem, cw, ring, r.s);
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

// The consumers take only the query tile from a visit, for the mask, and read it from the stage
// (the producer stores it with the LSE and D rows), so their code does not depend on the walk.
// A copy of the tile's code per walk order (with the last tile's copy, four) took the
// deterministic causal kernel's cold NVRTC compile to 2.7-3.2 s on 2 cores; with one copy it
// takes 1.5-1.6 s (docs/METHOD.md, "Compile time"). The walk behind a runtime flag here,
// computing the visit per tile as the producer does, lost 1.5-3.4 % on deterministic causal rows
// (H100); reading the stage gained 1.5-4 %.
template <class Element, class Shape, int kMaskKind, bool kDeterministic>
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
    fmha_bwd_sm90a_issue_scores<Element, Shape>(bars, smem, cw, ring, r.s);
    fmha_wgmma_wait<0>();
    fmha_wgmma_fence_operands(r.s);
    for (int it = 0; it + 1 < w.num_iters; ++it) {
      fmha_bwd_sm90a_consume_tile<Element, Shape, kMaskKind, false>(P, smem, bars, w, cw, it, ring,
                                                                    seen, r);
    }
    fmha_bwd_sm90a_consume_tile<Element, Shape, kMaskKind, true>(P, smem, bars, w, cw,
                                                                 w.num_iters - 1, ring, seen, r);
  }

  if (w.part >= 0) {
    // A part of a split key tile: the flag word is the dS^T buffer's first, which no MMA reads
    // once both warpgroups are at the split's first barrier.
    fmha_bwd_sm90a_split_dkdv<Element, Shape::kBlockN, Shape::kDChunks, Shape::kDN>(
        P.bwd, w, key_row, r.dk, r.dv, smem + Shape::kDsOffset, 2);
  } else {
    fmha_bwd_sm90a_store_dkdv<Element, Shape::kDChunks, Shape::kDN>(P.bwd, w, n0 + key_row, 0, r.dk,
                                                                    r.dv);
  }
}
