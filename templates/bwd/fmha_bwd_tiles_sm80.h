// Building blocks of the sm_80+ backward kernels (fmha_bwd_sm80.h): the compile-time shape and
// warp layout of stage 2 and fragment addressing for per-warp offsets; the tile-level mask
// geometry they share with the Hopper kernels is fmha_bwd_tile_visibility.h.
#pragma once

#include "bwd/fmha_bwd_tile_visibility.h"
#include "bwd/fmha_bwd_warp_split.h"
#include "common/copy_sm80.h"
#include "common/fmha_params.h"
#include "common/mask.h"
#include "common/mask_i32.h"
#include "common/platform.h"

template <int kHdimQ, int kHdimV, int kBlockM, int kBlockN, int kNumWarps, int kStages>
struct FmhaBwdSm80Shape {
  enum {
    kThreads = kNumWarps * 32,
    // Phases A and B: warps split the keys, then the queries (A) / the head dim (B); the split
    // is chosen by fmha_bwd_warp_split.h.
    kWarpsN = fmha_bwd_warps_n(kHdimQ, kHdimV, kBlockM, kBlockN, kNumWarps),
    kWarpsM = kNumWarps / kWarpsN,   // phase A: split of the queries; phase B: of the head dim
    kKT = kBlockN / (16 * kWarpsN),  // m16 key tiles per warp
    kQT = kBlockM / (8 * kWarpsM),   // n8 query fragments per key tile in phase A
    kPInRegs = kWarpsM == 1,
    kDKP = kHdimQ / (16 * kWarpsM),  // 16-column pairs of dK per warp
    kDVP = kHdimV / (16 * kWarpsM),
    // Phase C: warps split the queries, then the head dim (fmha_bwd_warp_split.h).
    kWarpsMC = fmha_bwd_warps_mc(kHdimQ, kBlockM, kBlockN, kNumWarps),
    kWarpsDC = kNumWarps / kWarpsMC,
    kMC = kBlockM / (16 * kWarpsMC),
    kDQP = kHdimQ / (16 * kWarpsDC),
    // S^T is computed in parts of at most 32 query columns per warp (see phase A).
    kSplitS = kQT > 4 ? kQT / 4 : 1,
    // dQ is computed in two halves of the warp's head-dim pairs when it has more than 4 pairs'
    // worth of accumulators (phase C).
    kSplitC = fmha_bwd_dq_parts(kHdimQ, kBlockM, kNumWarps, kWarpsMC),
    // k16 steps per unrolled group in the k loops of phases A and C (fmha_bwd_gemm_t explains
    // why groups); 4 = a whole swizzle period of a 128-byte-wide tile. Phase A takes 4 only
    // without a mask (kUnrollANoMask): with one, the masked copy of the P / dS code keeps more
    // registers live and groups of 4 spilled 4 bytes at hdim 128 (sliding window on sm_80,
    // causal bottom-right deterministic on sm_90). H200, bf16, S 8192:
    // hdim 128 non-causal 271.5 (2) vs 280.4 TFLOP/s (4), causal 257.6 vs 257.0; hdim 64 and
    // 256 within 1 % either way; against 263.8 / 243.4 with the k loops not unrolled.
    kUnrollA = 2,
    kUnrollANoMask = 4,
    kUnrollC = 4,
    kSmemBytes = 2 * (kBlockN * (kHdimQ + kHdimV) + kStages * kBlockM * (kHdimQ + kHdimV) +
                      kBlockN * kBlockM * (kPInRegs ? 1 : 2)) +
                 8 * kStages * kBlockM,
  };
  static_assert(kNumWarps == 4 || kNumWarps == 8, "4 or 8 warps");
  static_assert(kBlockN % 16 == 0 && (kKT == 1 || kKT == 2) && kKT * kWarpsN * 16 == kBlockN,
                "each warp owns one or two m16 key tiles");
  // Power-of-two warp splits keep every per-warp fragment offset foldable (fmha_bwd_frag_addr).
  static_assert((kWarpsM & (kWarpsM - 1)) == 0 && (kWarpsDC & (kWarpsDC - 1)) == 0, "");
  static_assert(kBlockM % 32 == 0 && kQT % 2 == 0, "queries per warp: whole k16 steps");
  static_assert(kQT % kSplitS == 0 && (kQT & (kQT - 1)) == 0, "S^T parts of whole fragments");
  static_assert(kDQP % kSplitC == 0, "dQ parts of whole head-dim pairs");
  static_assert(kMC == 1 || kMC == 2, "one or two m16 query tiles per warp in phase C");
  static_assert(kHdimQ % 32 == 0 && kHdimV % 32 == 0, "hdim must be a multiple of 32");
  static_assert(kDKP * 16 * kWarpsM == kHdimQ && kDVP * 16 * kWarpsM == kHdimV &&
                    kDQP * 16 * kWarpsDC == kHdimQ,
                "head dim split into whole 16-column pairs per warp");
  static_assert(kStages >= 1 && kStages <= 3, "1 to 3 Q/dO stages");
};

// Fragment addresses (FmhaFragAddr) for a warp whose first row and chunk are runtime values: the
// per-warp part is folded into the base once, so at(row, chunk) still costs one XOR and an
// immediate. row0 must be a multiple of 8 and chunk0 even; the compile-time chunk c later passed
// to at() must add to chunk0 without carries between their bits modulo the tile's block width
// kW. That holds for the warp splits used here: either chunk0 < 2P with every c a multiple of 2P
// (P a power of two: head-dim columns interleaved over P warps, 16 columns at a time), or
// chunk0 a multiple of 2P with every c below 2P (a warp's contiguous query rows in phase C).
template <class Tile>
FMHA_DEVICE FmhaFragAddr<Tile> fmha_bwd_frag_addr(unsigned tile_base, unsigned lane_x, int row0,
                                                  int chunk0) {
  FmhaFragAddr<Tile> a;
  a.base = tile_base +
           static_cast<unsigned>((chunk0 / Tile::kW) * Tile::kBlockBytes + row0 * (Tile::kW * 16)) +
           (lane_x ^ static_cast<unsigned>(((chunk0 % Tile::kW) / 2) * 32));
  return a;
}

// Lane roles of ldmatrix.x4 (see FmhaFragAddr). lane_a: matrices (rows 0-7, chunk 0), (rows 8-15,
// chunk 0), (0-7, 1), (8-15, 1): an A operand from [m][k] rows, or a B operand pair (two n8
// tiles) from [k][n] rows with .trans. lane_b: (0-7, 0), (0-7, 1), (8-15, 0), (8-15, 1): a B
// operand pair from [n][k] rows, or an A operand from [k][m] rows with .trans.
template <class Tile>
FMHA_DEVICE unsigned fmha_bwd_lane_a(int lane) {
  return FmhaFragAddr<Tile>::lane_term((lane & 7) + ((lane >> 3) & 1) * 8, lane >> 4);
}
template <class Tile>
FMHA_DEVICE unsigned fmha_bwd_lane_b(int lane) {
  return FmhaFragAddr<Tile>::lane_term((lane & 7) + (lane >> 4) * 8, (lane >> 3) & 1);
}

// Per-lane addresses of accumulator pairs (row g, columns 2t, 2t+1 of an n8 fragment; lane =
// 4g + t) in a swizzled 16-bit tile, for a warp whose rows start at row0 (a multiple of 8) and
// whose fragments start at chunk0. As with FmhaFragAddr, everything but one XOR folds into
// immediates: with row = row0 + g + r (r a multiple of 8) the swizzle depends on g only, and
// chunk0 + c must not carry between the bits of chunk0 and c modulo kW (chunk0 a multiple of a
// power of two exceeding every c, or of kW).
template <class Tile>
struct FmhaPairAddr {
  unsigned base;

  FMHA_DEVICE void init(unsigned tile_base, int lane, int row0, int chunk0) {
    const int g = lane >> 2;
    base = tile_base +
           static_cast<unsigned>((chunk0 / Tile::kW) * Tile::kBlockBytes +
                                 (row0 + g) * (Tile::kW * 16) + (lane & 3) * 4) +
           static_cast<unsigned>(((chunk0 % Tile::kW) ^ Tile::swizzle(g)) * 16);
  }
  // r: compile-time multiple of 8; c: compile-time chunk offset.
  FMHA_DEVICE unsigned at(int r, int c) const {
    return (base ^ static_cast<unsigned>((c % Tile::kW) * 16)) +
           static_cast<unsigned>((c / Tile::kW) * Tile::kBlockBytes + r * (Tile::kW * 16));
  }
};
