// Tiles of the tensor-core forward (templates/fwd/fmha_fwd_sm80.h) and the shared memory each
// needs.
#include <string>

#include "kernels/common/tile_checks.hpp"
#include "kernels/mma_sm80/tiles.hpp"

namespace fmha_jit::kernels::mma_sm80 {
namespace {
int smem_bytes(const TileShape& t, int hdim_q, int hdim_v) {
  return 2 * (t.block_m * hdim_q + t.num_stages * t.block_n * (hdim_q + hdim_v));
}
}  // namespace

TileShape fwd_tile(const ArchInfo& arch, const FmhaKernelConfig& c) {
  // 128 query rows per block throughout: 32 rows per warp (4 warps) amortises each K/V fragment
  // read from shared memory over two m16 tiles; where O and S no longer fit in registers at 32
  // rows per warp, 8 warps of 16 rows each. TFLOP/s quoted are bf16, S 8192, H200, non-causal.
  const int hdim_q = c.hdim_q, hdim_v = c.hdim_v;
  // hdim 256: O alone is 128 registers, so 16 rows per warp. Where two CTAs of 64 x 64 with
  // 4 warps fit on an SM (2 x 96 KB: sm_90, not sm_80's 163 KB), those: the same 8 warps per SM
  // as one 128 x 64 CTA of 8, but the two CTAs' barriers are independent, so one's softmax
  // overlaps the other's GEMMs (FA2's choice; H200, S 8192: 323.5 against 279.9 TFLOP/s, same
  // HMMA and shared-memory traffic per ncu; docs/METHOD.md, "Forward (mma_sm80)"). Else
  // 128 x 64 with 8 warps (a second stage measured equal).
  TileShape t{128, 64, 8, 1};
  if (2 * smem_bytes({64, 64, 4, 1}, hdim_q, hdim_v) <= arch.max_smem_per_block_bytes) {
    t = {64, 64, 4, 1};
  }
  if (hdim_q <= 32) {
    t = {128, 128, 4, 2};  // long key tiles spread the per-tile softmax cost
  } else if (hdim_q <= 64) {
    // 128-key tiles run at 342 against 310 for 64-key tiles, but the masked variants then spill
    // (mask predicates add live registers): those take the 64-key tile.
    t = c.mask == MaskKind::none ? TileShape{128, 128, 4, 2} : TileShape{128, 64, 4, 2};
  } else if (hdim_q <= 128) {
    // FA2's shape, two CTAs per SM: keep two stages only while two CTAs still fit (sm_80's 163 KB
    // hold two hdim-128 CTAs with one stage, 64 KB each, but not with two, 96 KB each).
    t = {128, 64, 4, 2};
    if (2 * smem_bytes(t, hdim_q, hdim_v) > arch.max_smem_per_block_bytes) t.num_stages = 1;
  } else if (hdim_q <= 192) {
    t = {128, 64, 8, 2};  // 16 rows per warp: O and S of 32 rows would not fit in 255 registers
  }
  // Archs with 99 KB of shared memory per block (sm_86, sm_89): first give up the second stage
  // (cp.async of the next tile then overlaps only the softmax), then halve the query rows.
  if (smem_bytes(t, hdim_q, hdim_v) > arch.max_smem_per_block_bytes) t.num_stages = 1;
  if (smem_bytes(t, hdim_q, hdim_v) > arch.max_smem_per_block_bytes) t = {64, 64, 4, 1};
  return t;
}

int fwd_smem_bytes(const FmhaKernelConfig& c) {
  return smem_bytes({c.block_m, c.block_n, c.num_warps, c.num_stages}, c.hdim_q, c.hdim_v);
}

void check_fwd_tile(const ArchInfo& arch, const FmhaKernelConfig& c) {
  if (c.num_warps != 4 && c.num_warps != 8)
    reject_tile("num_warps", c.num_warps, "0 (heuristic), 4, 8");
  const int rows_per_warp = c.block_m / c.num_warps;
  if (c.block_m % (16 * c.num_warps) != 0 || (rows_per_warp != 16 && rows_per_warp != 32)) {
    reject_tile("block_m", c.block_m,
                "0 (heuristic), 16 or 32 rows per warp: " + std::to_string(16 * c.num_warps) +
                    ", " + std::to_string(32 * c.num_warps) +
                    " (with num_warps = " + std::to_string(c.num_warps) + ")");
  }
  if (c.block_n != 32 && c.block_n != 64 && c.block_n != 128) {
    reject_tile("block_n", c.block_n, "0 (heuristic), 32, 64, 128");
  }
  check_stages_range(c);  // before the size: a huge num_stages would overflow its sum
  check_smem_fits(arch, c, fwd_smem_bytes(c));
}

}  // namespace fmha_jit::kernels::mma_sm80
