#include "kernels/common/key_tiles.hpp"

#include <algorithm>

#include "common/mask.h"

namespace fmha_jit::kernels {

std::size_t align_up(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }

std::int64_t key_tiles(const FmhaKernelConfig& c, const FmhaProblem& p) {
  return (p.seqlen_k + c.block_n - 1) / c.block_n;
}

TileRange query_tile_key_tiles(const FmhaKernelConfig& c, const FmhaProblem& p, std::int64_t m) {
  const int mask = static_cast<int>(c.mask);
  const int first = static_cast<int>(m * c.block_m);
  const int last = static_cast<int>(std::min<std::int64_t>(p.seqlen_q, first + c.block_m)) - 1;
  const FmhaKeyRange lo = fmha_visible_keys(mask, first, p.seqlen_q, p.seqlen_k, -1, -1);
  const FmhaKeyRange hi = fmha_visible_keys(mask, last, p.seqlen_q, p.seqlen_k, -1, -1);
  if (hi.hi <= lo.lo) return {};
  return {lo.lo / c.block_n, (hi.hi + c.block_n - 1) / c.block_n};
}

std::vector<std::int64_t> bwd_key_tile_query_tiles(const FmhaKernelConfig& c,
                                                   const FmhaProblem& p) {
  // Each key tile counts the query tiles that see it (query_tile_key_tiles; a difference array).
  const std::int64_t num_m = (p.seqlen_q + c.block_m - 1) / c.block_m;
  const std::int64_t num_n = key_tiles(c, p);
  std::vector<std::int64_t> diff(static_cast<std::size_t>(num_n) + 1, 0);
  for (std::int64_t m = 0; m < num_m; ++m) {
    const TileRange seen = query_tile_key_tiles(c, p, m);
    if (seen.hi <= seen.lo) continue;
    diff[static_cast<std::size_t>(seen.lo)] += 1;
    diff[static_cast<std::size_t>(std::min(seen.hi, num_n))] -= 1;
  }
  std::vector<std::int64_t> tiles(static_cast<std::size_t>(num_n));
  std::int64_t running = 0;
  for (std::size_t n = 0; n < tiles.size(); ++n) tiles[n] = running += diff[n];
  return tiles;
}

}  // namespace fmha_jit::kernels
