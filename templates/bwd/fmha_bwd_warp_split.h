// How the warps of the backward's stage 2 (fmha_bwd_sm80_dq_dk_dv.h) share a tile. One
// definition for the kernel (FmhaBwdSm80Shape) and the host (kernels/mma_sm80/bwd_tiles.cpp, which
// validates user tiles and sizes the shared memory from it), so they cannot disagree: plain
// constexpr integer functions, no includes, valid host C++ and device code alike.
//
// Why a cost model: the mma.sync backward is bound by shared-memory reads, not by the tensor
// cores. Every warp reads, per query tile, the fragments of its operand rows and columns from
// shared memory; which rows and columns depends on the split, and the split that minimises those
// bytes per warp is the fastest. The costs below count 16-bit elements read (and written, for
// the P^T / dS^T exchange) by one warp per query tile.
#pragma once

// Under a GPU compiler (NVRTC admits no host functions) these are host and device functions.
#if defined(__CUDACC__) || defined(__CUDACC_RTC__) || defined(__HIPCC__) || defined(__HIP__)
#define FMHA_SPLIT_FN __host__ __device__ constexpr
#else
#define FMHA_SPLIT_FN constexpr
#endif

// Phases A and B. Warps split the keys (warps_n blocks of 16 or 32 keys) and, within them, the
// queries of phase A / the head dim of phase B (warps_m = warps / warps_n):
//   A: dP^T = V dO^T and S^T = K Q^T read the warp's key rows of V and K and its query rows of
//      dO and Q.
//   B: dV += P^T dO and dK += dS^T Q read the warp's head-dim columns of dO and Q for all queries
//      of the tile, plus P^T and dS^T of its keys from shared memory when warps_m > 1 (then
//      phase A wrote them there; with warps_m == 1 they stay in registers and only dS^T is
//      written, for phase C).
FMHA_SPLIT_FN bool fmha_bwd_split_ab_valid(int hdim_q, int hdim_v, int block_m, int block_n,
                                           int warps, int warps_n) {
  const int warps_m = warps / warps_n;
  const int key_tiles = block_n / (16 * warps_n);
  const int query_frags = block_m / (8 * warps_m);
  return warps % warps_n == 0 && block_n % (16 * warps_n) == 0 &&
         (key_tiles == 1 || key_tiles == 2) && block_m % (8 * warps_m) == 0 && query_frags >= 2 &&
         (query_frags & (query_frags - 1)) == 0 && hdim_q % (16 * warps_m) == 0 &&
         hdim_v % (16 * warps_m) == 0;
}

FMHA_SPLIT_FN int fmha_bwd_split_ab_cost(int hdim_q, int hdim_v, int block_m, int block_n,
                                         int warps, int warps_n) {
  const int warps_m = warps / warps_n;
  const int keys = block_n / warps_n;     // key rows of one warp
  const int queries = block_m / warps_m;  // query columns of one warp in phase A
  const int a = (keys + queries) * (hdim_q + hdim_v);
  const int b = block_m * (hdim_q + hdim_v) / warps_m + (warps_m > 1 ? 2 * keys * block_m : 0);
  const int written = (warps_m > 1 ? 2 : 1) * keys * queries;
  return a + b + written;
}

// The cheapest valid warps_n; on a tie the larger one (P^T and dS^T stay in registers, no extra
// barrier). 0 when no split is valid (the host reports the tile, the kernel static_asserts).
FMHA_SPLIT_FN int fmha_bwd_warps_n(int hdim_q, int hdim_v, int block_m, int block_n, int warps) {
  int best = 0;
  int best_cost = 0;
  for (int wn = warps; wn >= 1; wn /= 2) {
    if (!fmha_bwd_split_ab_valid(hdim_q, hdim_v, block_m, block_n, warps, wn)) continue;
    const int cost = fmha_bwd_split_ab_cost(hdim_q, hdim_v, block_m, block_n, warps, wn);
    if (best == 0 || cost < best_cost) {
      best = wn;
      best_cost = cost;
    }
  }
  return best;
}

// Phase C, dQ = dS K: warps split the queries (warps_mc blocks of 16 or 32) and the head dim
// (warps_dc = warps / warps_mc). A warp reads dS for its queries and all keys, once per part
// of its head-dim columns, and K for all keys and its columns. Its fp32 dQ accumulators,
// query_tiles * dq_pairs * 8 per thread, are computed in two parts when that exceeds 32.
FMHA_SPLIT_FN int fmha_bwd_dq_parts(int hdim_q, int block_m, int warps, int warps_mc) {
  return (block_m / (16 * warps_mc)) * (hdim_q / (16 * (warps / warps_mc))) > 4 ? 2 : 1;
}

FMHA_SPLIT_FN bool fmha_bwd_split_c_valid(int hdim_q, int block_m, int warps, int warps_mc) {
  const int warps_dc = warps / warps_mc;
  const int query_tiles = block_m / (16 * warps_mc);
  const int dq_pairs = hdim_q / (16 * warps_dc);
  return warps % warps_mc == 0 && block_m % (16 * warps_mc) == 0 &&
         (query_tiles == 1 || query_tiles == 2) && hdim_q % (16 * warps_dc) == 0 && dq_pairs >= 1 &&
         (fmha_bwd_dq_parts(hdim_q, block_m, warps, warps_mc) == 1 || dq_pairs % 2 == 0);
}

FMHA_SPLIT_FN int fmha_bwd_split_c_cost(int hdim_q, int block_m, int block_n, int warps,
                                        int warps_mc) {
  return block_n * (fmha_bwd_dq_parts(hdim_q, block_m, warps, warps_mc) * block_m / warps_mc +
                    hdim_q * warps_mc / warps);
}

// The cheapest valid warps_mc; on a tie the larger one (fewer accumulators per thread).
FMHA_SPLIT_FN int fmha_bwd_warps_mc(int hdim_q, int block_m, int block_n, int warps) {
  int best = 0;
  int best_cost = 0;
  for (int mc = warps; mc >= 1; mc /= 2) {
    if (!fmha_bwd_split_c_valid(hdim_q, block_m, warps, mc)) continue;
    const int cost = fmha_bwd_split_c_cost(hdim_q, block_m, block_n, warps, mc);
    if (best == 0 || cost < best_cost) {
      best = mc;
      best_cost = cost;
    }
  }
  return best;
}
