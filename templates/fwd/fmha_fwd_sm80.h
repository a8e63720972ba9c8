// FlashAttention-2-style forward kernel on tensor cores (mma.sync m16n8k16), for sm_80 and newer.
//
// Launch geometry (the dispatcher relies on exactly this):
//   grid  = (ceil(seqlen_q / kBlockM), nhead_q, batch)
//   block = kNumWarps * 32 threads (1-D)
//   dynamic shared memory = 2 * (kBlockM * kHdimQ + kStages * kBlockN * (kHdimQ + kHdimV)) bytes
//           (one Q tile, then kStages K tiles, then kStages V tiles, 16-bit elements; the Q region
//           is reused to stage O in the epilogue). Over 48 KB the host must raise
//           CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES.
//   The kernel is entered through a rendered wrapper that declares
//   `extern __shared__ __align__(128) char smem[]` and __launch_bounds__(kNumWarps * 32).
//
// Recommended tiles (kBlockM, kBlockN, kNumWarps, kStages), shared memory per CTA in brackets.
// sm_80 (A100) allows 163 KB per block, sm_90 (H100/H200) 227 KB. Both register files hold two
// 4-warp CTAs at <= 255 registers, so "2 CTAs/SM" below is reached when shared memory allows it.
// TFLOP/s: bf16 on H200, S = 8192, non-causal / causal (harness of this kernel, CUDA events).
//   hdim     sm_80              sm_90              why
//   32/32    128,128,4,2 [40K]  128,128,4,2 [40K]  32 rows/warp; long key tiles amortise the
//                                                  per-tile max/sum shuffles, which dominate at
//                                                  tiny hdim (257 / 237; 128x64 gave 252 / 214)
//   64/64    128,64,4,2 [48K]   128,64,4,2 [48K]   32 rows/warp with Q kept in registers; each K/V
//                                                  fragment feeds two m16 tiles (310 / 290; 8
//                                                  warps x 16 rows: 282 / 269)
//   96/96    128,64,4,2 [72K]   128,64,4,2 [72K]   as hdim 64, Q re-read from smem (322 / 292)
//   128/128  128,64,4,1 [64K]   128,64,4,2 [96K]   32 rows/warp, Q from smem, 255 registers, 2
//                                                  CTAs/SM (363 / 329 at 2 stages, 368 / 319 at
//                                                  1; 8 warps x 16 rows: 258 / 250). sm_80 takes
//                                                  1 stage so that two CTAs fit its 163 KB
//   192/128  128,64,8,2 [128K]  128,64,8,2 [128K]  16 rows/warp: O + S for 32 rows would not fit
//                                                  in 255 registers; 2 stages hide the long K rows
//   192/192  128,64,8,2 [144K]  128,64,8,2 [144K]  as 192/128 (265 / 242; 64x64x4: 221 / 219)
//   256/256  128,64,8,1 [128K]  128,64,8,1 [128K]  16 rows/warp (O alone is 128 registers); a
//                                                  second stage (192K, sm_90 only) measured the
//                                                  same (282 / 257), so the smaller one is kept
// Variants of these tiles compile without spills for every dtype, mask and LSE flag on sm_80 and
// sm_90 (128,64,4,1 spills a few bytes on sm_90 in 4 of 16 variants, hence 2 stages there).
//
// Algorithm. Each CTA owns kBlockM query rows of one (batch, head); warp w owns kMT = kBlockM /
// (16 * kNumWarps) m16 tiles of them. The CTA walks the key tiles that the mask leaves visible
// to any of its rows:
//   S = Q K^T (mma, fp32) -> element-wise mask on boundary tiles only -> online softmax in
//   registers (softmax.h) -> P packed to 16 bits in registers, reused directly as the A operand
//   -> O += P V (mma, V fragments through ldmatrix.trans).
// K and V tiles stream through kStages shared-memory slots each with cp.async. Copies are issued
// as separate commit groups in the order K0 V0 K1 V1 ..., and each iteration issues V[t+S-1]
// before computing S = Q K[t] and K[t+S] before computing P V[t], so the load of one operand
// always overlaps the GEMM on the other; with kStages = 1 this is exactly FA2's scheme.
#pragma once

#include "common/copy_sm80.h"
#include "common/fmha_params.h"
#include "common/mask.h"
#include "common/mask_fragments.h"
#include "common/mma_sm80.h"
#include "common/numeric.h"
#include "common/platform.h"
#include "common/score_mods.h"
#include "common/sequence.h"
#include "common/softmax.h"

// Compile-time shape of one instantiation.
template <int kHdimQ, int kHdimV, int kBlockM, int kBlockN, int kNumWarps, int kStages>
struct FmhaFwdSm80Shape {
  enum {
    kThreads = kNumWarps * 32,
    kMT = kBlockM / (16 * kNumWarps),  // m16 tiles per warp
    kNT = kBlockN / 8,                 // n8 score fragments per m16 tile
    kDT = kHdimV / 8,                  // n8 output fragments per m16 tile
    kKStepsQK = kHdimQ / 16,
    kKStepsPV = kBlockN / 16,
    // Q held as mma A fragments for the whole kernel when that and the two accumulators stay
    // under 176 registers, which leaves ~80 for fragments in flight, addresses and softmax state
    // (beyond it the 255-register tiles spilled); otherwise each warp re-reads its Q rows from
    // shared memory per key tile (one more ldmatrix per 16x16 block, amortised over kNT tiles).
    kQRegs = kMT * kHdimQ / 4,
    kAccRegs = kMT * (kHdimV + kBlockN) / 2,
    kQInRegs = (kQRegs + kAccRegs < 176) ? 1 : 0,
  };
  static_assert(kBlockM % (16 * kNumWarps) == 0 && (kMT == 1 || kMT == 2),
                "each warp owns one or two m16 tiles");
  static_assert(kBlockN % 16 == 0, "key tiles are whole k16 steps of P V");
  static_assert(kHdimQ % 32 == 0 && kHdimV % 32 == 0, "hdim must be a multiple of 32");
  static_assert(kHdimV <= kHdimQ, "O is staged in the Q region");
  static_assert(kStages >= 1 && kStages <= 3, "1 to 3 K/V stages");
};

// Q fragments, either resident in registers or re-read from shared memory on demand. The
// register array collapses to one element when unused.
template <class Shape>
struct FmhaQFragments {
  unsigned reg[Shape::kQInRegs ? Shape::kMT : 1][Shape::kQInRegs ? Shape::kKStepsQK : 1][4];
};

template <class Element, int kHdimQ, int kHdimV, int kMaskKind, bool kWriteLse, bool kVarlen,
          bool kSinks, bool kSoftcap, int kBlockM, int kBlockN, int kNumWarps, int kStages>
FMHA_DEVICE void fmha_fwd_sm80(const FmhaFwdParams& p, char* smem) {
  using Shape = FmhaFwdSm80Shape<kHdimQ, kHdimV, kBlockM, kBlockN, kNumWarps, kStages>;
  using Mma = FmhaMmaSm80<Element>;
  using QTile = FmhaSmemTile<kBlockM, kHdimQ>;
  using KTile = FmhaSmemTile<kBlockN, kHdimQ>;
  using VTile = FmhaSmemTile<kBlockN, kHdimV>;
  using OTile = FmhaSmemTile<kBlockM, kHdimV>;
  enum {
    kThreads = Shape::kThreads,
    kMT = Shape::kMT,
    kNT = Shape::kNT,
    kDT = Shape::kDT,
    kQInRegs = Shape::kQInRegs,
  };

  const int tid = fmha_thread_idx();
  const int lane = fmha_lane_id();
  const int warp = fmha_warp_id();

  const int h = fmha_block_idx_y();
  const int b = fmha_block_idx_z();
  // A packed batch launches the longest sequence's m-blocks for every sequence; those past a
  // shorter one's rows leave at once (common/sequence.h).
  const FmhaSequence seq = fmha_sequence<kVarlen>(p, b);
  FmhaMaskGeometry lengths;
  const auto& lens = fmha_lengths<kVarlen>(p, seq, lengths);  // this sequence's lengths
  // Causal masks make later m-blocks cost more (they see more keys): launching them first lets
  // the short ones fill in the tail of the wave instead of leaving one long block last.
  const int num_m_blocks = (lens.seqlen_q + kBlockM - 1) / kBlockM;
  const bool heavy_first =
      kMaskKind == FMHA_MASK_CAUSAL_TOP_LEFT || kMaskKind == FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
  const int m_block = heavy_first ? num_m_blocks - 1 - fmha_block_idx_x() : fmha_block_idx_x();
  if (kVarlen && (m_block < 0 || m_block >= num_m_blocks)) return;
  const int hk = h / (p.nhead_q / p.nhead_k);
  const int m0 = m_block * kBlockM;
  const int rows_valid = lens.seqlen_q - m0;

  const FmhaBlockKeys keys = fmha_block_keys<kMaskKind, kBlockM, kBlockN>(m0, lens);
  const int n_block_begin = keys.n_block_begin;
  const int n_block_end = keys.n_block_end;
  const int full_lo = keys.full_lo;
  const int full_hi = keys.full_hi;

  const Element* q_ptr = static_cast<const Element*>(p.q) + b * p.q_strides.batch +
                         h * p.q_strides.head + (seq.q_row0 + m0) * p.q_strides.row;
  const Element* k_ptr = static_cast<const Element*>(p.k) + b * p.k_strides.batch +
                         hk * p.k_strides.head + seq.k_row0 * p.k_strides.row;
  const Element* v_ptr = static_cast<const Element*>(p.v) + b * p.v_strides.batch +
                         hk * p.v_strides.head + seq.k_row0 * p.v_strides.row;

  const unsigned smem_q = fmha_smem_addr(smem);
  const unsigned smem_k = smem_q + QTile::kBytes;
  const unsigned smem_v = smem_k + kStages * KTile::kBytes;

  auto load_k = [&](int n_block, int slot) {
    if (n_block < n_block_end) {
      const int n0 = n_block * kBlockN;
      fmha_copy_tile_async<KTile, kThreads>(smem_k + slot * KTile::kBytes,
                                            k_ptr + n0 * p.k_strides.row, p.k_strides.row,
                                            lens.seqlen_k - n0, tid);
    }
    fmha_cp_async_commit();  // empty groups keep the wait counts uniform
  };
  auto load_v = [&](int n_block, int slot) {
    if (n_block < n_block_end) {
      const int n0 = n_block * kBlockN;
      fmha_copy_tile_async<VTile, kThreads>(smem_v + slot * VTile::kBytes,
                                            v_ptr + n0 * p.v_strides.row, p.v_strides.row,
                                            lens.seqlen_k - n0, tid);
    }
    fmha_cp_async_commit();
  };

  // Prologue: groups [Q K0] V0 K1 V1 ... K[S-1], i.e. 2S - 1 groups in flight.
  fmha_copy_tile_async<QTile, kThreads>(smem_q, q_ptr, p.q_strides.row, rows_valid, tid);
#pragma unroll
  for (int s = 0; s < kStages; ++s) {
    if (s > 0) load_v(n_block_begin + s - 1, s - 1);
    load_k(n_block_begin + s, s);
  }

  // Per-lane ldmatrix geometry (see FmhaFragAddr).
  const int warp_row0 = warp * 16 * kMT;
  // A operand (Q): matrices (rows 0-7, k 0-7) (rows 8-15, k 0-7) (rows 0-7, k 8-15) (8-15, 8-15).
  const unsigned q_lane =
      FmhaFragAddr<QTile>::lane_term((lane & 7) + ((lane >> 3) & 1) * 8, lane >> 4);
  // B operand from K ([n][k] rows): matrices (n 0-7, k 0-7) (n 0-7, k 8-15) (n 8-15, k 0-7) ...
  const unsigned k_lane =
      FmhaFragAddr<KTile>::lane_term((lane & 7) + (lane >> 4) * 8, (lane >> 3) & 1);
  // B operand from V ([k][n] rows, transposed): (k 0-7, n 0-7) (k 8-15, n 0-7) (k 0-7, n 8-15) ...
  const unsigned v_lane =
      FmhaFragAddr<VTile>::lane_term((lane & 7) + ((lane >> 3) & 1) * 8, lane >> 4);
  FmhaFragAddr<QTile> q_addr;
  q_addr.init(smem_q + warp_row0 * (QTile::kW * 16), q_lane);

  FmhaQFragments<Shape> qf;
  auto load_q_frag = [&](unsigned(&r)[4], int mt, int ks) {
    fmha_ldmatrix_x4(r, q_addr.at(mt * 16, ks * 2));
  };

  float acc_o[kMT][kDT][4];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int dt = 0; dt < kDT; ++dt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc_o[mt][dt][e] = 0.f;
    }
  }
  FmhaOnlineSoftmax<kMT, kNT> softmax;
  softmax.init();
  const float scale_log2 = p.scale_log2;  // log2(e) under a softcap (common/score_mods.h)

  if (kQInRegs) {
    fmha_cp_async_wait<2 * kStages - 2>();  // the group holding Q
    fmha_sync_threads();
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
      for (int ks = 0; ks < Shape::kKStepsQK; ++ks) {
        load_q_frag(qf.reg[kQInRegs ? mt : 0][kQInRegs ? ks : 0], mt, ks);
      }
    }
  }

  int slot = 0;  // K/V slot of the current tile
  for (int n_block = n_block_begin; n_block < n_block_end; ++n_block) {
    const int n0 = n_block * kBlockN;
    fmha_cp_async_wait<2 * kStages - 2>();  // K[t] has landed (for this thread) ...
    fmha_sync_threads();                    // ... for all threads, and V[t-1] is no longer read
    load_v(n_block + kStages - 1, slot == 0 ? kStages - 1 : slot - 1);

    // S = Q K^T.
    float s[kMT][kNT][4];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) s[mt][nt][e] = 0.f;
      }
    }
    FmhaFragAddr<KTile> k_addr;
    k_addr.init(smem_k + slot * KTile::kBytes, k_lane);
#pragma unroll
    for (int ks = 0; ks < Shape::kKStepsQK; ++ks) {
      unsigned a[kMT][4];
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        if (kQInRegs) {
#pragma unroll
          for (int e = 0; e < 4; ++e) a[mt][e] = qf.reg[kQInRegs ? mt : 0][kQInRegs ? ks : 0][e];
        } else {
          load_q_frag(a[mt], mt, ks);
        }
      }
#pragma unroll
      for (int np = 0; np < kNT / 2; ++np) {
        unsigned kb[4];
        fmha_ldmatrix_x4(kb, k_addr.at(np * 16, ks * 2));
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          Mma::mma(s[mt][2 * np], a[mt], kb[0], kb[1]);
          Mma::mma(s[mt][2 * np + 1], a[mt], kb[2], kb[3]);
        }
      }
    }

    if (kSoftcap) {
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
          for (int e = 0; e < 4; ++e) s[mt][nt][e] = fmha_softcap(p, s[mt][nt][e]);
        }
      }
    }

    // Element-wise mask, only on tiles that some valid row does not see entirely (including the
    // partial last tile, whose out-of-range keys were zero-filled and must not count).
    const bool tile_full = n0 >= full_lo && n0 + kBlockN <= full_hi;
    if (!tile_full) {
      fmha_mask_fragments<kMaskKind>(s, m0 + warp_row0 + (lane >> 2), n0, lane, lens);
    }

    float alpha[2 * kMT];
    softmax.update(s, scale_log2, alpha);
    // P packed to 16 bits right away: it halves the registers the scores hold while the next K
    // copy is issued and P V runs, which is where the 32-rows-per-warp tiles peak.
    unsigned pa[kMT][Shape::kKStepsPV][4];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
      for (int ks = 0; ks < Shape::kKStepsPV; ++ks) {
        pa[mt][ks][0] = Mma::pack(s[mt][2 * ks][0], s[mt][2 * ks][1]);
        pa[mt][ks][1] = Mma::pack(s[mt][2 * ks][2], s[mt][2 * ks][3]);
        pa[mt][ks][2] = Mma::pack(s[mt][2 * ks + 1][0], s[mt][2 * ks + 1][1]);
        pa[mt][ks][3] = Mma::pack(s[mt][2 * ks + 1][2], s[mt][2 * ks + 1][3]);
      }
    }
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
      for (int dt = 0; dt < kDT; ++dt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) acc_o[mt][dt][e] *= alpha[mt * 2 + (e >> 1)];
      }
    }

    fmha_cp_async_wait<2 * kStages - 2>();  // V[t] has landed ...
    fmha_sync_threads();                    // ... for all threads, and K[t] is no longer read
    load_k(n_block + kStages, slot);

    // O += P V, P taken straight from registers.
    FmhaFragAddr<VTile> v_addr;
    v_addr.init(smem_v + slot * VTile::kBytes, v_lane);
#pragma unroll
    for (int ks = 0; ks < Shape::kKStepsPV; ++ks) {
#pragma unroll
      for (int dp = 0; dp < kDT / 2; ++dp) {
        unsigned vb[4];
        fmha_ldmatrix_x4_trans(vb, v_addr.at(ks * 16, dp * 2));
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          Mma::mma(acc_o[mt][2 * dp], pa[mt][ks], vb[0], vb[1]);
          Mma::mma(acc_o[mt][2 * dp + 1], pa[mt][ks], vb[2], vb[3]);
        }
      }
    }
    slot = slot + 1 == kStages ? 0 : slot + 1;
  }

  // Epilogue: normalise, stage O through the Q region as 16-bit, then write whole 16-byte chunks.
  float inv_sum[2 * kMT];
  float lse[2 * kMT];
  if (kSinks) {
    softmax.finalize_with_sink(scale_log2, p.sinks[h] * FMHA_LOG2E, inv_sum, lse);
  } else {
    softmax.finalize(scale_log2, inv_sum, lse);
  }

  fmha_cp_async_wait<0>();
  fmha_sync_threads();  // every warp is done with Q/K/V shared memory
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int row = warp_row0 + mt * 16 + hf * 8 + (lane >> 2);
      const float inv = inv_sum[mt * 2 + hf];
#pragma unroll
      for (int dt = 0; dt < kDT; ++dt) {
        const unsigned v = Mma::pack(acc_o[mt][dt][2 * hf] * inv, acc_o[mt][dt][2 * hf + 1] * inv);
        fmha_st_shared_b32(smem_q + OTile::offset(row, dt) + (lane & 3) * 4, v);
      }
    }
  }

  if (kWriteLse && p.lse != nullptr && (lane & 3) == 0) {
    float* lse_ptr = p.lse + (fmha_row_stat0<kVarlen>(p, seq.q_row0, b, h) + m0);
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int row = warp_row0 + mt * 16 + hf * 8 + (lane >> 2);
        if (row < rows_valid) lse_ptr[row] = lse[mt * 2 + hf];
      }
    }
  }
  fmha_sync_threads();

  Element* o_ptr = static_cast<Element*>(p.o) + b * p.o_strides.batch + h * p.o_strides.head +
                   (seq.q_row0 + m0) * p.o_strides.row;
  enum { kOChunks = kBlockM * OTile::kChunks, kOIters = (kOChunks + kThreads - 1) / kThreads };
#pragma unroll
  for (int i = 0; i < kOIters; ++i) {
    const int id = tid + i * kThreads;
    const int row = id / OTile::kChunks;
    const int chunk = id % OTile::kChunks;
    if ((kOChunks % kThreads == 0 || id < kOChunks) && row < rows_valid) {
      const FmhaU32x4 v = fmha_ld_shared_128(smem_q + OTile::offset(row, chunk));
      fmha_st_global_128(o_ptr + row * p.o_strides.row + chunk * 8, v);
    }
  }
}
