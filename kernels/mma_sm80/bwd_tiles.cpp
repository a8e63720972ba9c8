// Tiles of the tensor-core backward (templates/bwd/fmha_bwd_sm80*.h). Registers bound these tiles
// more than shared memory: a warp keeps dK and dV of its keys in registers for the whole CTA,
// (hdim_q + hdim_v) / 2 fp32 per thread when it owns 16 keys and the full head dim. The full
// reasoning per row (and the ptxas register counts) is in templates/bwd/fmha_bwd_sm80.h; the rtc
// test compiles every shipped tile and requires 0 spill bytes.
#include <string>

#include "bwd/fmha_bwd_warp_split.h"
#include "kernels/common/tile_checks.hpp"
#include "kernels/mma_sm80/tiles.hpp"

namespace fmha_jit::kernels::mma_sm80 {
namespace {

bool power_of_two(int x) { return x > 0 && (x & (x - 1)) == 0; }

// The warp split comes from templates/bwd/fmha_bwd_warp_split.h, the header the kernel uses, so a
// user-set tile is rejected here with a message instead of a static_assert in the compile log,
// and the shared memory is sized for the split the kernel will pick.
int warps_n_of(const TileShape& t, int hdim_q, int hdim_v) {
  return fmha_bwd_warps_n(hdim_q, hdim_v, t.block_m, t.block_n, t.num_warps);
}

int smem_bytes(const TileShape& t, int hdim_q, int hdim_v) {
  // P^T stays in registers (only dS^T goes to shared memory) when each warp owns all queries.
  const bool p_in_regs = warps_n_of(t, hdim_q, hdim_v) == t.num_warps;
  return 2 * (t.block_n * (hdim_q + hdim_v) + t.num_stages * t.block_m * (hdim_q + hdim_v) +
              t.block_n * t.block_m * (p_in_regs ? 1 : 2)) +
         8 * t.num_stages * t.block_m;
}

}  // namespace

TileShape bwd_tile(const ArchInfo& arch, const FmhaKernelConfig& c) {
  const int hdim_q = c.hdim_q, hdim_v = c.hdim_v;
  // 8 warps throughout: above 128 registers per thread only one CTA fits an SM, and 8 warps hide
  // the latency of the dependent GEMM chain (dP -> dS -> dK, dQ) that 4 could not.
  TileShape t{64, 64, 8, 2};  // hdim 192 and 256: 8 warps on 64 keys split the head dim in two
  if (hdim_q <= 64) {
    // 128 x 128 (FA2's hdim-64 tile): 128-key tiles halve, against 64, the dq_accum reduction
    // traffic and the Q / dO re-reads per key; 128 query rows halve the barriers per key tile.
    t = {128, 128, 8, 2};
  } else if (hdim_q <= 96) {
    t = {64, 128, 8, 2};  // 128 query rows would add 32 registers of dP^T (spills at hdim 128)
  } else if (hdim_q <= 128) {
    // As hdim 96 with one stage: two measured the same or slower (H200, S 8192: 262.2 against
    // 263.6 TFLOP/s). 128 x 128 measured 270.5 but spills 52 bytes on sm_90: dP^T of 32 keys x
    // 64 queries is 64 registers per thread beside the 128 of dK and dV (docs/METHOD.md,
    // "Backward (mma_sm80)").
    t = {64, 128, 8, 1};
  }
  // hdim 256: one stage. A second does not fit sm_80's 163 KB (209 KB); on sm_90 it does but
  // measured slower, 131 against 153 TFLOP/s (H200, bf16, S 8192), and 57 against 128 in the
  // deterministic mode (docs/METHOD.md, "Backward (mma_sm80)").
  if (hdim_q > 192) t.num_stages = 1;
  if (smem_bytes(t, hdim_q, hdim_v) > arch.max_smem_per_block_bytes) t.num_stages = 1;
  // The 99 KB archs (sm_86, sm_89): 4 warps on 64 keys keep the per-warp work of the 8-warp tiles
  // (16 keys, all queries of the tile) at half the footprint; past hdim 128 a warp cannot hold
  // dK and dV of 16 keys, so 32 x 32 with the head dim split over two warps.
  if (smem_bytes(t, hdim_q, hdim_v) > arch.max_smem_per_block_bytes) {
    t = hdim_q <= 128 ? TileShape{64, 64, 4, 1} : TileShape{32, 32, 4, 1};
  }
  return t;
}

int bwd_smem_bytes(const FmhaKernelConfig& c) {
  return smem_bytes({c.block_m, c.block_n, c.num_warps, c.num_stages}, c.hdim_q, c.hdim_v);
}

void check_bwd_tile(const ArchInfo& arch, const FmhaKernelConfig& c) {
  if (c.num_warps != 4 && c.num_warps != 8)
    reject_tile("num_warps", c.num_warps, "0 (heuristic), 4, 8");
  const std::string with = " (with num_warps = " + std::to_string(c.num_warps) +
                           ", hdim_q = " + std::to_string(c.hdim_q) +
                           ", hdim_v = " + std::to_string(c.hdim_v) + ")";
  // The split functions multiply block_m and block_n (fmha_bwd_warp_split.h): bound both before
  // they see them, so that no user value can overflow their int sums.
  if (c.block_n < 16 || c.block_n > 256) {
    reject_tile("block_n", c.block_n, "0 (heuristic), a multiple of 16 from 16 to 256" + with);
  }
  // Phase C splits the queries over the warps in 16-row tiles (one or two per warp).
  if (c.block_m < 32 || c.block_m > 128 || c.block_m % 32 != 0 || !power_of_two(c.block_m) ||
      fmha_bwd_warps_mc(c.hdim_q, c.block_m, c.block_n, c.num_warps) == 0) {
    reject_tile("block_m", c.block_m,
                "0 (heuristic), 32, 64 or 128: a power-of-two multiple of 32 that gives every warp "
                "one or two whole 16-row query tiles and whole 16-column head-dim pairs" +
                    with);
  }
  // Phases A and B split the keys over the warps in 16-row tiles (one or two per warp).
  const TileShape t{c.block_m, c.block_n, c.num_warps, c.num_stages};
  if (c.block_n % 16 != 0 || warps_n_of(t, c.hdim_q, c.hdim_v) == 0) {
    reject_tile(
        "block_n", c.block_n,
        "0 (heuristic), a multiple of 16 that some split of the warps turns into one or two "
        "16-key tiles per warp with whole query fragments and head-dim pairs, e.g. " +
            std::to_string(16 * c.num_warps) + " or " + std::to_string(8 * c.num_warps) + with);
  }
  check_stages_range(c);  // before the size: a huge num_stages would overflow its sum
  check_smem_fits(arch, c, bwd_smem_bytes(c));
}

}  // namespace fmha_jit::kernels::mma_sm80
