#include "codegen/tile_shapes.hpp"

#include <string>

#include "fmha_jit/error.hpp"

namespace fmha_jit::codegen {
namespace {

[[noreturn]] void reject(const char* field, int value, const std::string& accepted) {
  throw FieldError(ErrorCode::invalid_config, field, std::to_string(value), accepted);
}

}  // namespace

TileShape reference_tile(const ArchInfo& arch) {
  // One block per row; 128 threads give each warp (wavefront) a strided share of the keys and
  // enough lanes to cover hdim 256 in two passes. No pipeline.
  constexpr int kThreads = 128;
  return {1, kThreads, kThreads / arch.wave_size, 1};
}

namespace {
int smem_bytes(const TileShape& t, int hdim_q, int hdim_v) {
  return 2 * (t.block_m * hdim_q + t.num_stages * t.block_n * (hdim_q + hdim_v));
}
}  // namespace

TileShape mma_sm80_fwd_tile(const ArchInfo& arch, int hdim_q, int hdim_v) {
  // 128 query rows per block throughout: 32 rows per warp (4 warps) keeps the K/V tile read from
  // shared memory amortised over two m16 tiles; where O and S no longer fit in registers at 32
  // rows per warp, 8 warps of 16 rows each.
  TileShape t{128, 64, 8, 1};  // hdim 256: one stage keeps the CTA at 128 KB
  if (hdim_q <= 64) {
    t = {128, 128, 4, 2};  // small O: long key tiles amortise the softmax
  } else if (hdim_q <= 128) {
    t = {128, 64, 4, 2};  // FA2's shape: O (64 regs) + S (32 regs) per m16 tile
  } else if (hdim_q <= 192) {
    t = {128, 64, 8, 2};  // 16 rows per warp: O + S + Q fragments would not fit at 32
  }
  // Archs with 99 KB of shared memory per block (sm_86, sm_89): first give up the second stage
  // (cp.async of the next tile then overlaps only the softmax), then halve the query rows.
  if (smem_bytes(t, hdim_q, hdim_v) > arch.max_smem_per_block_bytes) t.num_stages = 1;
  if (smem_bytes(t, hdim_q, hdim_v) > arch.max_smem_per_block_bytes) t = {64, 64, 4, 1};
  return t;
}

int mma_sm80_fwd_smem_bytes(const FmhaKernelConfig& c) {
  return smem_bytes({c.block_m, c.block_n, c.num_warps, c.num_stages}, c.hdim_q, c.hdim_v);
}

void check_mma_sm80_fwd_tile(const ArchInfo& arch, const FmhaKernelConfig& c) {
  if (c.num_warps != 4 && c.num_warps != 8) reject("num_warps", c.num_warps, "0 (heuristic), 4, 8");
  const int rows_per_warp = c.block_m / c.num_warps;
  if (c.block_m % (16 * c.num_warps) != 0 || (rows_per_warp != 16 && rows_per_warp != 32)) {
    reject("block_m", c.block_m,
           "0 (heuristic), 16 or 32 rows per warp: " + std::to_string(16 * c.num_warps) + ", " +
               std::to_string(32 * c.num_warps) +
               " (with num_warps = " + std::to_string(c.num_warps) + ")");
  }
  if (c.block_n != 32 && c.block_n != 64 && c.block_n != 128) {
    reject("block_n", c.block_n, "0 (heuristic), 32, 64, 128");
  }
  if (c.num_stages < 1 || c.num_stages > 3)
    reject("num_stages", c.num_stages, "0 (heuristic), 1, 2, 3");
  const int smem = mma_sm80_fwd_smem_bytes(c);
  if (smem > arch.max_smem_per_block_bytes) {
    reject("num_stages", c.num_stages,
           "a tile within " + std::to_string(arch.max_smem_per_block_bytes / 1024) +
               " KB of shared memory on " + std::string(arch.name) + " (this one needs " +
               std::to_string(smem / 1024) + " KB)");
  }
}

}  // namespace fmha_jit::codegen
