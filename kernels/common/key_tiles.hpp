// Which key tiles each query tile sees under a config's mask, as the tiled kernels compute it:
// the unit of work of their launch plans and schedules.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "fmha_jit/config.hpp"
#include "fmha_jit/problem.hpp"

namespace fmha_jit::kernels {

std::size_t align_up(std::size_t n, std::size_t a);

// Key tiles of block_n keys a kv head's sequence spans: the backward's stage-2 CTAs per
// (kv head, batch) pair.
std::int64_t key_tiles(const FmhaKernelConfig& canonical, const FmhaProblem& problem);
// Key tiles [lo, hi) that query tile m (block_m rows) sees under the config's mask: from its
// first row's first visible key to its last row's last one (the ends never decrease with the
// row), as the kernels compute it; empty (hi <= lo) where no row sees a key.
struct TileRange {
  std::int64_t lo = 0, hi = 0;
};
TileRange query_tile_key_tiles(const FmhaKernelConfig& canonical, const FmhaProblem& problem,
                               std::int64_t m);
// Query tiles of block_m rows that see each key tile of block_n keys under the config's mask:
// the backward's work per key tile and query head.
std::vector<std::int64_t> bwd_key_tile_query_tiles(const FmhaKernelConfig& canonical,
                                                   const FmhaProblem& problem);

}  // namespace fmha_jit::kernels
