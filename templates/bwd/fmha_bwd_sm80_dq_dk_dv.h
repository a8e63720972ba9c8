// Stage 2 of the sm_80+ backward: dK, dV and the dQ partial sums for one tile of kBlockN keys of
// one kv head. Launch geometry, shared memory, tiles, algorithm and the deterministic protocol
// are documented in fmha_bwd_sm80.h.
#pragma once

#include "bwd/fmha_bwd_memory_sm80.h"
#include "bwd/fmha_bwd_tiles_sm80.h"
#include "common/copy_sm80.h"
#include "common/fmha_params.h"
#include "common/mask.h"
#include "common/mma_sm80.h"
#include "common/numeric.h"
#include "common/platform.h"
#include "common/score_mods.h"
#include "common/sequence.h"
#include "common/softmax.h"

#ifndef FMHA_BWD_EARLY_POLL
#define FMHA_BWD_EARLY_POLL 1
#endif

// Copies the valid rows of a staged 16-bit tile to global memory in whole 16-byte chunks.
template <class Tile, int kThreads, class Element>
FMHA_DEVICE void fmha_bwd_store_tile(unsigned smem, Element* gmem, fmha_index_t row_stride,
                                     int rows_valid, int tid) {
  enum { kTotal = Tile::kRows * Tile::kChunks, kIters = (kTotal + kThreads - 1) / kThreads };
#pragma unroll
  for (int i = 0; i < kIters; ++i) {
    const int id = tid + i * kThreads;
    const int row = id / Tile::kChunks;
    const int chunk = id % Tile::kChunks;
    if ((kTotal % kThreads == 0 || id < kTotal) && row < rows_valid) {
      fmha_st_global_128(gmem + row * row_stride + chunk * 8,
                         fmha_ld_shared_128(smem + Tile::offset(row, chunk)));
    }
  }
}

// A copy of a per-warp address whose base the optimizer cannot hoist derivations of (fmha_opaque).
template <class Addr>
FMHA_DEVICE Addr fmha_bwd_fresh(Addr a, unsigned offset) {
  a.base = fmha_opaque(a.base) + offset;
  return a;
}

// The fragment address of a run-time 16-byte chunk c0 along the rows of a swizzled tile, as a
// fresh base for compile-time chunks c0 + 2i below. Valid when c0 is a multiple of 2U and
// 2U divides Tile::kW (i < U): then the chunk's XOR pattern splits into c0's (applied here, once)
// and i's (an immediate in at()), and c0's block of kW chunks is a multiple of kBlockBytes, whose
// addition never touches the swizzled low bits.
template <class Tile>
FMHA_DEVICE FmhaFragAddr<Tile> fmha_bwd_at_chunk(FmhaFragAddr<Tile> a, int c0) {
  a.base = fmha_opaque((a.base ^ static_cast<unsigned>(((c0 % Tile::kW) / 2) * 32)) +
                       static_cast<unsigned>((c0 / Tile::kW) * Tile::kBlockBytes));
  return a;
}

// The same for a run-time row r0 (a multiple of 8, so the swizzle pattern is unchanged): a fresh
// base for compile-time rows r0 + r below.
template <class Tile>
FMHA_DEVICE FmhaFragAddr<Tile> fmha_bwd_at_row(FmhaFragAddr<Tile> a, int r0) {
  a.base = fmha_opaque(a.base + static_cast<unsigned>(r0 * (Tile::kW * 16)));
  return a;
}

// k16 steps per group of an unrolled-by-group k loop: kMax, halved until it divides the step count
// and a swizzle period (kW / 2 steps of two chunks), so that every address inside a group is the
// group's base plus an immediate (fmha_bwd_at_chunk).
template <class Tile, int kSteps, int kMax,
          bool kFits = kMax == 1 || (kSteps % kMax == 0 && (Tile::kW / 2) % kMax == 0)>
struct FmhaBwdGroupSteps {
  enum { value = kMax };
};
template <class Tile, int kSteps, int kMax>
struct FmhaBwdGroupSteps<Tile, kSteps, kMax, false> {
  enum { value = FmhaBwdGroupSteps<Tile, kSteps, kMax / 2>::value };
};

// acc[kt][nt] = A B^T over kKSteps k16 steps: A rows (keys) from a [key][d] tile, B rows (queries)
// from a [query][d] tile, both plain ldmatrix; each B fragment pair feeds every key tile. The k
// loop runs in groups of kGroup steps, unrolled inside a group and not across groups: fully
// unrolled, ptxas issues the fragment loads of all k steps up front and the register file
// overflows (hdim 192: 86 registers for phase A become 250+); not unrolled, every step recomputes
// its swizzled addresses and pays the loop's branch and counters (BENCHMARKS.md: 29-54 % more
// instructions than FA2). Each group's bases are opaque, so no load is hoisted across groups.
template <class Mma, int kKT, int kQT, int kKSteps, int kUnroll, class AAddr, class BAddr>
FMHA_DEVICE void fmha_bwd_gemm_t(float (&acc)[kKT][kQT][4], const AAddr& a_addr,
                                 const BAddr& b_addr) {
  enum { kGroup = FmhaBwdGroupSteps<typename AAddr::TileType, kKSteps, kUnroll>::value };
  static_assert(static_cast<int>(AAddr::TileType::kW) == static_cast<int>(BAddr::TileType::kW),
                "A and B tiles share the k extent, hence the swizzle period");
#pragma unroll
  for (int kt = 0; kt < kKT; ++kt) {
#pragma unroll
    for (int nt = 0; nt < kQT; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[kt][nt][e] = 0.f;
    }
  }
#pragma unroll 1
  for (int k0 = 0; k0 < kKSteps; k0 += kGroup) {
    const AAddr ag = fmha_bwd_at_chunk(a_addr, 2 * k0);
    const BAddr bg = fmha_bwd_at_chunk(b_addr, 2 * k0);
#pragma unroll
    for (int ks = 0; ks < kGroup; ++ks) {
      unsigned a[kKT][4];
#pragma unroll
      for (int kt = 0; kt < kKT; ++kt) fmha_ldmatrix_x4(a[kt], ag.at(kt * 16, ks * 2));
#pragma unroll
      for (int np = 0; np < kQT / 2; ++np) {
        unsigned bf[4];
        fmha_ldmatrix_x4(bf, bg.at(np * 16, ks * 2));
#pragma unroll
        for (int kt = 0; kt < kKT; ++kt) {
          Mma::mma(acc[kt][2 * np], a[kt], bf[0], bf[1]);
          Mma::mma(acc[kt][2 * np + 1], a[kt], bf[2], bf[3]);
        }
      }
    }
  }
}

template <class Element, int kHdimQ, int kHdimV, int kMaskKind, bool kDeterministic, bool kVarlen,
          bool kSoftcap, int kBlockM, int kBlockN, int kNumWarps, int kStages>
FMHA_DEVICE void fmha_bwd_sm80_dq_dk_dv(const FmhaBwdParams& p, char* smem) {
  using Shape = FmhaBwdSm80Shape<kHdimQ, kHdimV, kBlockM, kBlockN, kNumWarps, kStages>;
  using Mma = FmhaMmaSm80<Element>;
  using KTile = FmhaSmemTile<kBlockN, kHdimQ>;
  using VTile = FmhaSmemTile<kBlockN, kHdimV>;
  using QTile = FmhaSmemTile<kBlockM, kHdimQ>;
  using DoTile = FmhaSmemTile<kBlockM, kHdimV>;
  using STile = FmhaSmemTile<kBlockN, kBlockM>;  // dS^T and P^T: [key][query]
  enum {
    kThreads = Shape::kThreads,
    kWarpsN = Shape::kWarpsN,
    kWarpsM = Shape::kWarpsM,
    kKT = Shape::kKT,
    kQT = Shape::kQT,
    kPInRegs = Shape::kPInRegs,
    kDKP = Shape::kDKP,
    kDVP = Shape::kDVP,
    kWarpsMC = Shape::kWarpsMC,
    kWarpsDC = Shape::kWarpsDC,
    kMC = Shape::kMC,
    kDQP = Shape::kDQP,
    kKSteps = kBlockM / 16,  // k16 steps over the queries (phase B)
    kUnrollA = kMaskKind == FMHA_MASK_NONE ? Shape::kUnrollANoMask : Shape::kUnrollA,
    // Deterministic mode under causal masks: release a query tile's semaphore one phase later and
    // wait per warp (fmha_bwd_sm80.h, "Deterministic mode"). Measured on the 8-warp tiles only;
    // the 4-warp 32 x 32 tile of hdim 192 for the 99 KB archs spilled 24 bytes with it.
    kLateRelease =
        kDeterministic && kNumWarps == 8 &&
        (kMaskKind == FMHA_MASK_CAUSAL_TOP_LEFT || kMaskKind == FMHA_MASK_CAUSAL_BOTTOM_RIGHT),
    kSplitS = Shape::kSplitS,
    kQTS = kQT / kSplitS,  // n8 fragments of S^T per part
    kSplitC = Shape::kSplitC,
    kDQPP = kDQP / kSplitC,  // head-dim pairs of dQ per part
  };

  const int tid = fmha_thread_idx();
  const int lane = fmha_lane_id();
  const int warp = fmha_warp_id();
  const int hk = fmha_block_idx_y();
  const int b = fmha_block_idx_z();
  // A packed batch launches the longest sequence's key tiles for every sequence; those past a
  // shorter one's keys leave at once (common/sequence.h).
  const FmhaFwdParams& f = p.fwd;
  const FmhaSequence seq = fmha_sequence<kVarlen>(f, b);
  FmhaMaskGeometry lengths;
  const auto& lens = fmha_lengths<kVarlen>(f, seq, lengths);  // this sequence's lengths
  // Key tiles in reverse in the deterministic mode (see its protocol in fmha_bwd_sm80.h).
  const int n_block = kDeterministic
                          ? (lens.seqlen_k + kBlockN - 1) / kBlockN - 1 - fmha_block_idx_x()
                          : fmha_block_idx_x();
  const int group = f.nhead_q / f.nhead_k;
  const int n0 = n_block * kBlockN;
  const int keys_valid = lens.seqlen_k - n0;
  if (kVarlen && (n_block < 0 || keys_valid <= 0)) return;
  // Semaphores are laid out over the longest sequence's query tiles (the workspace's).
  const int num_m = (f.seqlen_q + kBlockM - 1) / kBlockM;
  const FmhaKeyRange m_tiles = fmha_bwd_query_tiles<kMaskKind, kBlockM, kBlockN>(n_block, lens);
  const int m_count = m_tiles.hi > m_tiles.lo ? m_tiles.hi - m_tiles.lo : 0;
  const int num_iters = group * m_count;  // (query head, query tile) pairs, head-major

  const unsigned smem_k = fmha_smem_addr(smem);
  const unsigned smem_v = smem_k + KTile::kBytes;
  const unsigned smem_q = smem_v + VTile::kBytes;
  const unsigned smem_do = smem_q + kStages * QTile::kBytes;
  const unsigned smem_ds = smem_do + kStages * DoTile::kBytes;
  const unsigned smem_pt = smem_ds + STile::kBytes;  // only when !kPInRegs
  const unsigned smem_lse = smem_ds + (kPInRegs ? 1 : 2) * STile::kBytes;
  const unsigned smem_dsum = smem_lse + kStages * kBlockM * 4;

  // Prologue: groups [K V] [tile 0] ... [tile kStages-1].
  fmha_copy_tile_async<KTile, kThreads>(smem_k,
                                        static_cast<const Element*>(f.k) + b * f.k_strides.batch +
                                            hk * f.k_strides.head +
                                            (seq.k_row0 + n0) * f.k_strides.row,
                                        f.k_strides.row, keys_valid, tid);
  fmha_copy_tile_async<VTile, kThreads>(smem_v,
                                        static_cast<const Element*>(f.v) + b * f.v_strides.batch +
                                            hk * f.v_strides.head +
                                            (seq.k_row0 + n0) * f.v_strides.row,
                                        f.v_strides.row, keys_valid, tid);
  fmha_cp_async_commit();

  auto load_tile = [&](int it, int slot) {
    if (it < num_iters) {
      // A fresh thread index: otherwise every per-thread copy address is hoisted out of the loop.
      const int tid = static_cast<int>(fmha_opaque(static_cast<unsigned>(fmha_thread_idx())));
      const int g = it / m_count;
      const int h = hk * group + g;
      const int m0 = (m_tiles.lo + it - g * m_count) * kBlockM;
      const int rows = lens.seqlen_q - m0;
      fmha_copy_tile_async<QTile, kThreads>(smem_q + slot * QTile::kBytes,
                                            static_cast<const Element*>(f.q) +
                                                b * f.q_strides.batch + h * f.q_strides.head +
                                                (seq.q_row0 + m0) * f.q_strides.row,
                                            f.q_strides.row, rows, tid);
      fmha_copy_tile_async<DoTile, kThreads>(smem_do + slot * DoTile::kBytes,
                                             static_cast<const Element*>(p.d_o) +
                                                 b * p.do_strides.batch + h * p.do_strides.head +
                                                 (seq.q_row0 + m0) * p.do_strides.row,
                                             p.do_strides.row, rows, tid);
      // Rows past seqlen_q read LSE = D = 0: with their zero-filled Q and dO that makes P finite
      // and every product they enter exactly 0.
      const fmha_index_t stat = fmha_row_stat0<kVarlen>(f, seq.q_row0, b, h) + m0;
      for (int i = tid; i < 2 * kBlockM; i += kThreads) {
        const bool is_d = i >= kBlockM;
        const int r = is_d ? i - kBlockM : i;
        const float* src = is_d ? p.d_rowsum : f.lse;
        fmha_cp_async_4((is_d ? smem_dsum : smem_lse) + (slot * kBlockM + r) * 4,
                        r < rows ? src + stat + r : src, r < rows);
      }
    }
    fmha_cp_async_commit();  // empty groups keep the wait counts uniform
  };
#pragma unroll
  for (int s = 0; s < kStages; ++s) load_tile(s, s);

  // Warp roles. Phases A and B: keys [kr0, kr0 + 16 kKT); phase A queries [qc0, qc0 + 8 kQT);
  // phase B head-dim pairs warp_m, warp_m + kWarpsM, ... Phase C: queries [mr0, mr0 + 16 kMC),
  // head-dim pairs warp_dc, warp_dc + kWarpsDC, ...
  const int warp_n = warp % kWarpsN;
  const int warp_m = warp / kWarpsN;
  const int kr0 = warp_n * 16 * kKT;
  const int qc0 = warp_m * 8 * kQT;
  const int warp_mc = warp % kWarpsMC;
  const int warp_dc = warp / kWarpsMC;
  const int mr0 = warp_mc * 16 * kMC;

  // Fragment addresses, Q and dO ones for slot 0 (a slot adds a multiple of 1 KB).
  const FmhaFragAddr<KTile> k_a =
      fmha_bwd_frag_addr<KTile>(smem_k, fmha_bwd_lane_a<KTile>(lane), kr0, 0);
  const FmhaFragAddr<VTile> v_a =
      fmha_bwd_frag_addr<VTile>(smem_v, fmha_bwd_lane_a<VTile>(lane), kr0, 0);
  const FmhaFragAddr<QTile> q_b =
      fmha_bwd_frag_addr<QTile>(smem_q, fmha_bwd_lane_b<QTile>(lane), qc0, 0);
  const FmhaFragAddr<DoTile> do_b =
      fmha_bwd_frag_addr<DoTile>(smem_do, fmha_bwd_lane_b<DoTile>(lane), qc0, 0);
  const FmhaFragAddr<QTile> q_t =
      fmha_bwd_frag_addr<QTile>(smem_q, fmha_bwd_lane_a<QTile>(lane), 0, 2 * warp_m);
  const FmhaFragAddr<DoTile> do_t =
      fmha_bwd_frag_addr<DoTile>(smem_do, fmha_bwd_lane_a<DoTile>(lane), 0, 2 * warp_m);
  const FmhaFragAddr<STile> pt_a =
      fmha_bwd_frag_addr<STile>(smem_pt, fmha_bwd_lane_a<STile>(lane), kr0, 0);
  const FmhaFragAddr<STile> ds_a =
      fmha_bwd_frag_addr<STile>(smem_ds, fmha_bwd_lane_a<STile>(lane), kr0, 0);
  const FmhaFragAddr<STile> ds_c =
      fmha_bwd_frag_addr<STile>(smem_ds, fmha_bwd_lane_b<STile>(lane), 0, 2 * kMC * warp_mc);
  const FmhaFragAddr<KTile> k_c =
      fmha_bwd_frag_addr<KTile>(smem_k, fmha_bwd_lane_a<KTile>(lane), 0, 2 * warp_dc);
  // Where this lane's accumulator pairs of P^T / dS^T go (kQT is a power of two, so the warp's
  // first chunk and the fragment index never share bits).
  FmhaPairAddr<STile> s_st;
  s_st.init(0, lane, kr0, qc0 / 8);

  float acc_dk[kKT][2 * kDKP][4];
  float acc_dv[kKT][2 * kDVP][4];
#pragma unroll
  for (int kt = 0; kt < kKT; ++kt) {
#pragma unroll
    for (int i = 0; i < 2 * kDKP; ++i) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc_dk[kt][i][e] = 0.f;
    }
#pragma unroll
    for (int i = 0; i < 2 * kDVP; ++i) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc_dv[kt][i][e] = 0.f;
    }
  }
  const float scale_log2 = f.scale_log2;

  // Deterministic mode: the semaphore of the previous iteration's query tile, released one
  // barrier later (below) rather than behind a barrier of its own.
  int* pending_release = nullptr;
  int slot = 0;
  for (int it = 0; it < num_iters; ++it) {
    const int g = it / m_count;
    const int h = hk * group + g;
    const int m_block = m_tiles.lo + it - g * m_count;
    const int m0 = m_block * kBlockM;
    fmha_cp_async_wait<kStages - 1>();  // tile `it` (and K, V) landed for this thread ...
    fmha_sync_threads();  // ... and for all; the previous phase C no longer reads dS^T
    // The barrier above follows every thread's additions of the previous iteration, so thread 0
    // can release their query tile now. Its gpu fence waits until those reductions are complete
    // in L2; only warp 0 waits for it, while the other warps start phase A (a barrier of its own
    // before the release, as first written, stalled the whole CTA on that round trip every
    // iteration).
    if (kDeterministic && !kLateRelease && tid == 0 && pending_release != nullptr) {
      fmha_semaphore_release_inc(pending_release);
    }

    // Element-wise mask unless every valid row of the query tile sees every key of the tile (this
    // includes the partial last key tile, whose zero-filled keys must get P = 0).
    const int row_last = min(m0 + kBlockM, lens.seqlen_q) - 1;
    const bool tile_full = n0 >= fmha_row_keys_i32<kMaskKind>(row_last, lens).lo &&
                           n0 + kBlockN <= fmha_row_keys_i32<kMaskKind>(m0, lens).hi;

    // ---- Phase A. dP^T = V dO^T first, then S^T = K Q^T in kSplitS column parts, each turned
    // into P and dS and packed to 16 bits as soon as it exists: fp32 S^T / P^T never exists for
    // more than one part at a time, which is what keeps the 128-column tiles under 255 registers.
    float acc_dp[kKT][kQT][4];
    fmha_bwd_gemm_t<Mma, kKT, kQT, kHdimV / 16, kUnrollA>(
        acc_dp, fmha_bwd_fresh(v_a, 0), fmha_bwd_fresh(do_b, slot * DoTile::kBytes));

    // Element-wise mask bounds, per key row of this lane, relative to the lane's first column
    // (query qc0 + 2 (lane % 4)) so that each test compares against a constant offset.
    int mask_lo[kKT][2], mask_hi[kKT][2];
    const int col0 = m0 + qc0 + (lane & 3) * 2;
#pragma unroll
    for (int kt = 0; kt < kKT; ++kt) {
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const FmhaKeyRange qr =
            fmha_bwd_key_queries<kMaskKind>(n0 + kr0 + kt * 16 + hf * 8 + (lane >> 2), lens);
        mask_lo[kt][hf] = qr.lo - col0;
        mask_hi[kt][hf] = qr.hi - col0;
      }
    }

    // P^T and dS^T as 16-bit A operands (k = queries): kept in registers when this warp owns all
    // queries of its keys, otherwise exchanged through shared memory. dS^T always goes to shared
    // memory for phase C.
    unsigned pa[kPInRegs ? kKT : 1][kPInRegs ? kKSteps : 1][4];
    unsigned da[kPInRegs ? kKT : 1][kPInRegs ? kKSteps : 1][4];
    const unsigned ds_st = fmha_opaque(s_st.base) + smem_ds;
    const unsigned pt_st = fmha_opaque(s_st.base) + smem_pt;
    // Lane columns are queries qc0 + nt * 8 + 2 (lane % 4) + {0, 1}.
    const unsigned stat_off = (slot * kBlockM + qc0 + (lane & 3) * 2) * 4;
    const float inf = fmha_uint_as_float(0x7f800000u);
#pragma unroll
    for (int part = 0; part < kSplitS; ++part) {
      float acc_s[kKT][kQTS][4];
      {
        FmhaFragAddr<QTile> qb = fmha_bwd_fresh(q_b, slot * QTile::kBytes);
        qb.base += part * kQTS * 8 * (QTile::kW * 16);  // whole groups of 8 rows
        fmha_bwd_gemm_t<Mma, kKT, kQTS, kHdimQ / 16, kUnrollA>(acc_s, fmha_bwd_fresh(k_a, 0), qb);
      }
      // P and dS of this part. Tiles where every valid row sees every key (tile_full) take a
      // copy without the element mask: its compare and select per element were about 10 % of
      // the instructions at hdim 64 (ncu opcode counts, BENCHMARKS.md).
      // (Two unrolled copies behind a uniform branch: NVRTC treats generic lambdas as host code.)
#pragma unroll
      for (int copy = 0; copy < 2; ++copy) {
        const bool masked = copy == 1;
        if (masked == tile_full) continue;
#pragma unroll
        for (int nts = 0; nts < kQTS; ++nts) {
          const int nt = part * kQTS + nts;
          const FmhaF32x2 l = fmha_ld_shared_f32x2(smem_lse + stat_off + nt * 32);
          const FmhaF32x2 d = fmha_ld_shared_f32x2(smem_dsum + stat_off + nt * 32);
          // LSE = -inf (a row that saw no key) gives exp2(s - inf) = 0: no gradient, no inf * 0.
          const float lse2[2] = {l.x == -inf ? inf : l.x * FMHA_LOG2E,
                                 l.y == -inf ? inf : l.y * FMHA_LOG2E};
          const float dsum[2] = {d.x, d.y};
#pragma unroll
          for (int kt = 0; kt < kKT; ++kt) {
#pragma unroll
            for (int hf = 0; hf < 2; ++hf) {
              float pr[2], ds[2];
#pragma unroll
              for (int e = 0; e < 2; ++e) {
                const int c = nt * 8 + e;
                float score = acc_s[kt][nts][2 * hf + e];
                // Softcap: P of the capped score; dS takes the cap's derivative, 1 - tanh^2
                // (times the scale, which dQ and dK apply later as without a cap).
                float t = 0.f;
                if (kSoftcap) {
                  t = fmha_tanh(score * f.softcap_scale);
                  score = f.softcap * t;
                }
                float v = fmha_softmax_exp2(__fmaf_rn(score, scale_log2, -lse2[e]));
                if (masked && (c < mask_lo[kt][hf] || c >= mask_hi[kt][hf])) v = 0.f;
                pr[e] = v;
                ds[e] = v * (acc_dp[kt][nt][2 * hf + e] - dsum[e]);
                if (kSoftcap) ds[e] *= 1.f - t * t;
              }
              const unsigned pv = Mma::pack(pr[0], pr[1]);
              const unsigned dv = Mma::pack(ds[0], ds[1]);
              FmhaPairAddr<STile> at;
              at.base = ds_st;
              fmha_st_shared_b32(at.at(kt * 16 + hf * 8, nt), dv);
              if (kPInRegs) {
                pa[kPInRegs ? kt : 0][kPInRegs ? nt / 2 : 0][(nt % 2) * 2 + hf] = pv;
                da[kPInRegs ? kt : 0][kPInRegs ? nt / 2 : 0][(nt % 2) * 2 + hf] = dv;
              } else {
                at.base = pt_st;
                fmha_st_shared_b32(at.at(kt * 16 + hf * 8, nt), pv);
              }
            }
          }
        }
      }
    }
    if (!kPInRegs) fmha_sync_threads();  // P^T and dS^T of all query columns are in place

    // Deterministic mode: the semaphore of this query tile and the count to wait for (see the
    // protocol in fmha_bwd_sm80.h); polled once ahead of the dQ GEMM, below.
    int* sem = kDeterministic
                   ? p.semaphores + (static_cast<fmha_index_t>(b) * f.nhead_q + h) * num_m + m_block
                   : nullptr;
    int sem_seen = -1;
#if FMHA_BWD_EARLY_POLL == 2
    if (kDeterministic && tid == 0) sem_seen = fmha_semaphore_poll(sem);
#endif

    // ---- Phase B: dV += P^T dO, dK += dS^T Q.
    {
      const FmhaFragAddr<DoTile> dot = fmha_bwd_fresh(do_t, slot * DoTile::kBytes);
      const FmhaFragAddr<QTile> qt = fmha_bwd_fresh(q_t, slot * QTile::kBytes);
      const FmhaFragAddr<STile> pta = fmha_bwd_fresh(pt_a, 0);
      const FmhaFragAddr<STile> dsa = fmha_bwd_fresh(ds_a, 0);
#pragma unroll
      for (int ks = 0; ks < kKSteps; ++ks) {
        // P^T / dS^T fragments in registers are indexed by ks, so this loop must unroll fully.
        // (A CTA fence per product and k step, once used to keep ptxas from hoisting later
        // loads, is not needed since the S^T split and cost 20 %: H200, hdim 128, 190 -> 228.)
        unsigned a[kKT][4];
#pragma unroll
        for (int kt = 0; kt < kKT; ++kt) {
          if (kPInRegs) {
#pragma unroll
            for (int e = 0; e < 4; ++e) a[kt][e] = pa[kPInRegs ? kt : 0][kPInRegs ? ks : 0][e];
          } else {
            fmha_ldmatrix_x4(a[kt], pta.at(kt * 16, ks * 2));
          }
        }
#pragma unroll
        for (int dp = 0; dp < kDVP; ++dp) {
          unsigned bo[4];
          fmha_ldmatrix_x4_trans(bo, dot.at(ks * 16, 2 * kWarpsM * dp));
#pragma unroll
          for (int kt = 0; kt < kKT; ++kt) {
            Mma::mma(acc_dv[kt][2 * dp], a[kt], bo[0], bo[1]);
            Mma::mma(acc_dv[kt][2 * dp + 1], a[kt], bo[2], bo[3]);
          }
        }
#pragma unroll
        for (int kt = 0; kt < kKT; ++kt) {
          if (kPInRegs) {
#pragma unroll
            for (int e = 0; e < 4; ++e) a[kt][e] = da[kPInRegs ? kt : 0][kPInRegs ? ks : 0][e];
          } else {
            fmha_ldmatrix_x4(a[kt], dsa.at(kt * 16, ks * 2));
          }
        }
#pragma unroll
        for (int dp = 0; dp < kDKP; ++dp) {
          unsigned bq[4];
          fmha_ldmatrix_x4_trans(bq, qt.at(ks * 16, 2 * kWarpsM * dp));
#pragma unroll
          for (int kt = 0; kt < kKT; ++kt) {
            Mma::mma(acc_dk[kt][2 * dp], a[kt], bq[0], bq[1]);
            Mma::mma(acc_dk[kt][2 * dp + 1], a[kt], bq[2], bq[3]);
          }
        }
      }
    }

    fmha_sync_threads();  // dS^T complete for phase C; Q, dO, LSE, D of this slot are free
    // Causal masks: the previous iteration's query tile is released here instead (fmha_bwd_sm80.h).
    if (kLateRelease && tid == 0 && pending_release != nullptr) {
      fmha_semaphore_release_inc(pending_release);
    }
    load_tile(it + kStages, slot);

    // ---- Phase C: dQ (unscaled) = dS K, A operand read transposed from dS^T, in kSplitC parts
    // of the warp's head-dim pairs (part q: pairs q * kDQPP ...), each added to dq_accum before
    // the next is computed, so that at most kDQPP pairs of fp32 dQ are live beside dK and dV.
    const FmhaFragAddr<STile> dsc = fmha_bwd_fresh(ds_c, 0);
    const FmhaFragAddr<KTile> kc = fmha_bwd_fresh(k_c, 0);
    float* dq_rows = p.dq_accum + (fmha_row_stat0<kVarlen>(f, seq.q_row0, b, h) + m0) * kHdimQ;
    const int rows_valid = lens.seqlen_q - m0;
    // This lane's first element; the others are at compile-time offsets from it.
    float* dq_lane = dq_rows + (mr0 + (lane >> 2)) * kHdimQ + warp_dc * 16 + (lane & 3) * 2;
#if FMHA_BWD_EARLY_POLL == 1
    if (kDeterministic && (kLateRelease ? lane : tid) == 0) sem_seen = fmha_semaphore_poll(sem);
#endif
#pragma unroll
    for (int part = 0; part < kSplitC; ++part) {
      float acc_dq[kMC][2 * kDQPP][4];
#pragma unroll
      for (int mt = 0; mt < kMC; ++mt) {
#pragma unroll
        for (int i = 0; i < 2 * kDQPP; ++i) {
#pragma unroll
          for (int e = 0; e < 4; ++e) acc_dq[mt][i][e] = 0.f;
        }
      }
      // k = keys, along the rows of both tiles: grouped as in fmha_bwd_gemm_t (any group size
      // keeps the swizzle, so only the step count limits it).
      enum { kGroupC = kBlockN / 16 % Shape::kUnrollC == 0 ? Shape::kUnrollC : 1 };
#pragma unroll 1
      for (int k0 = 0; k0 < kBlockN / 16; k0 += kGroupC) {
        const FmhaFragAddr<STile> dsg = fmha_bwd_at_row(dsc, k0 * 16);
        const FmhaFragAddr<KTile> kg = fmha_bwd_at_row(kc, k0 * 16);
#pragma unroll
        for (int ks = 0; ks < kGroupC; ++ks) {
          unsigned a[kMC][4];
#pragma unroll
          for (int mt = 0; mt < kMC; ++mt) fmha_ldmatrix_x4_trans(a[mt], dsg.at(ks * 16, 2 * mt));
#pragma unroll
          for (int dpp = 0; dpp < kDQPP; ++dpp) {
            const int dp = part * kDQPP + dpp;
            unsigned bk[4];
            fmha_ldmatrix_x4_trans(bk, kg.at(ks * 16, 2 * kWarpsDC * dp));
#pragma unroll
            for (int mt = 0; mt < kMC; ++mt) {
              Mma::mma(acc_dq[mt][2 * dpp], a[mt], bk[0], bk[1]);
              Mma::mma(acc_dq[mt][2 * dpp + 1], a[mt], bk[2], bk[3]);
            }
          }
        }
      }

      // Deterministic mode: before the first addition, wait until the key tiles after this one
      // that visit this query tile (fmha_bwd_key_tiles, the function that decided the visit)
      // have added theirs.
      if (kDeterministic && part == 0) {
        if ((kLateRelease ? lane : tid) == 0) {
          const int count =
              fmha_bwd_key_tiles<kMaskKind, kBlockM, kBlockN>(m_block, lens).hi - 1 - n_block;
          if (sem_seen != count) fmha_semaphore_wait_eq(sem, count);
        }
        if (kLateRelease) {
          __syncwarp();
        } else {
          fmha_sync_threads();
        }
      }
#pragma unroll
      for (int mt = 0; mt < kMC; ++mt) {
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          if (mr0 + mt * 16 + hf * 8 + (lane >> 2) < rows_valid) {
#pragma unroll
            for (int i = 0; i < 2 * kDQPP; ++i) {
              const int dp = part * kDQPP + i / 2;
              float* dst = dq_lane + (mt * 16 + hf * 8) * kHdimQ + dp * kWarpsDC * 16 + (i % 2) * 8;
              const float x = acc_dq[mt][i][2 * hf];
              const float y = acc_dq[mt][i][2 * hf + 1];
              // Both modes reduce in L2 (fire-and-forget, no load round trip); the
              // deterministic one only after its predecessors' reductions are complete (the
              // semaphore), so every element receives its fp32 additions in a fixed order.
              fmha_red_add_f32x2(dst, x, y);
            }
          }
        }
      }
    }
    pending_release = sem;
    slot = slot + 1 == kStages ? 0 : slot + 1;
  }

  // Epilogue: dK (scaled) and dV staged as 16-bit through the K and V tiles, then written out.
  fmha_cp_async_wait<0>();
  fmha_sync_threads();  // every warp is done with K and V (and has issued its last additions)
  if (kDeterministic && tid == 0 && pending_release != nullptr) {
    fmha_semaphore_release_inc(pending_release);
  }
  const float scale = f.scale;
#pragma unroll
  for (int kt = 0; kt < kKT; ++kt) {
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int row = kr0 + kt * 16 + hf * 8 + (lane >> 2);
#pragma unroll
      for (int i = 0; i < 2 * kDKP; ++i) {
        fmha_st_shared_b32(
            smem_k + KTile::offset(row, 2 * ((i / 2) * kWarpsM + warp_m) + i % 2) + (lane & 3) * 4,
            Mma::pack(acc_dk[kt][i][2 * hf] * scale, acc_dk[kt][i][2 * hf + 1] * scale));
      }
#pragma unroll
      for (int i = 0; i < 2 * kDVP; ++i) {
        fmha_st_shared_b32(
            smem_v + VTile::offset(row, 2 * ((i / 2) * kWarpsM + warp_m) + i % 2) + (lane & 3) * 4,
            Mma::pack(acc_dv[kt][i][2 * hf], acc_dv[kt][i][2 * hf + 1]));
      }
    }
  }
  fmha_sync_threads();
  fmha_bwd_store_tile<KTile, kThreads>(smem_k,
                                       static_cast<Element*>(p.d_k) + b * p.dk_strides.batch +
                                           hk * p.dk_strides.head +
                                           (seq.k_row0 + n0) * p.dk_strides.row,
                                       p.dk_strides.row, keys_valid, tid);
  fmha_bwd_store_tile<VTile, kThreads>(smem_v,
                                       static_cast<Element*>(p.d_v) + b * p.dv_strides.batch +
                                           hk * p.dv_strides.head +
                                           (seq.k_row0 + n0) * p.dv_strides.row,
                                       p.dv_strides.row, keys_valid, tid);
}
