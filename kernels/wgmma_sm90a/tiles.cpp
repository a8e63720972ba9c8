// The wgmma_sm90a kernels (templates/fwd/fmha_fwd_sm90a.h, templates/bwd/fmha_bwd_sm90a.h):
// which configs they serve, their tiles and their shared memory.
#include <algorithm>
#include <string>

#include "kernels/common/tile_checks.hpp"
#include "kernels/wgmma_sm90a/tiles.hpp"

namespace fmha_jit::kernels::wgmma_sm90a {
namespace {

// Fixed by the kernels' structure: two consumer warpgroups of 64 rows (wgmma's M) and one
// producer warpgroup; the forward's consumers own 64 query rows each, the backward's 64 keys
// (hdim 64, 128) or a head-dim half of the same 64 keys (hdim 256).
constexpr int kBlockM = 128;
constexpr int kNumWarps = 12;

// The backward's query tile: each consumer warpgroup computes one 64 x 64 dQ block of it, by
// query rows at hdim 64 (a 128-row tile) and by head-dim halves at hdim 128 (64 rows). At hdim
// 128 a 128-row tile would put S^T and dP^T (64 registers each) beside dK and dV (128): over 232.
// At hdim 256 each warpgroup computes two 64 x 64 dQ blocks of a 64-row tile.
int bwd_block_m(int hdim) { return hdim == 64 ? 128 : 64; }

// The backward's key tile: 64 keys per consumer warpgroup, and at hdim 256 one tile of 64 shared
// by both (their dK and dV of 64 keys x 256 columns would need 256 registers each).
int bwd_block_n(int hdim) { return hdim == 256 ? 64 : 128; }

}  // namespace

bool is_hopper(const ArchInfo& arch) { return arch.name == "sm_90" || arch.name == "sm_90a"; }

const std::vector<int>& served_hdims(Family family) {
  // Tiles are stored as 64-column slabs with 128-byte swizzle (one TMA box, one wgmma k-atom):
  // 32 and 96 would need 64- or 32-byte swizzled slabs next to them. The backward at hdim 192
  // would hold dK and dV of 64 keys x 192 columns (192 registers) beside S^T and dP^T (64): more
  // than a consumer's 232, and the hdim 256 kernel's head-dim split is not written for 96-column
  // halves.
  static const std::vector<int> fwd{64, 128, 192, 256};
  static const std::vector<int> bwd{64, 128, 256};
  return family == Family::fwd ? fwd : bwd;
}

std::string config_gap(const FmhaKernelConfig& c) {
  // The forward serves packed batches, sinks and softcap; the backward does not yet, nor the
  // forward at hdim 192, whose 80-key tiles then spilled 60-188 bytes a thread (docs/VARLEN.md).
  if (c.family == Family::bwd || c.hdim_q == 192) {
    if (std::string gap = packed_and_modifier_gap(c); !gap.empty()) return gap;
  }
  if (c.hdim_q != c.hdim_v) return "hdim_q != hdim_v";
  const std::vector<int>& served = served_hdims(c.family);
  if (std::find(served.begin(), served.end(), c.hdim_q) == served.end()) {
    std::string list;
    for (int h : served) list += (list.empty() ? "" : ", ") + std::to_string(h);
    return "hdim " + std::to_string(c.hdim_q) + " (its " + std::string(to_string(c.family)) +
           " serves " + list + ")";
  }
  return {};
}

TileShape fwd_tile(const FmhaKernelConfig& c) {
  // Registers per consumer thread (240 after setmaxnreg): S = block_n / 2, P = block_n / 4 packed,
  // O = hdim / 2, all three live at once (S of tile i is computed while P V of tile i - 1 runs).
  // hdim 64 / 128 take 128-key tiles (S 64 + P 32 + O 64 at hdim 128 leaves room for the softmax
  // state and addresses). At hdim 256 O alone is 128 registers: 128 keys spill (148 bytes), 80
  // keys hold S 40 + P 20 + O 128. Per key, the O rescale (128 multiplies per thread and tile),
  // the turn barriers and the pipeline waits cost 64 / 80 of what 64-key tiles cost; 80 is also
  // what two stages of K and V fit in shared memory beside Q (225 KB of 227; 96 keys need 257).
  // Two stages: the next tile's K and V land while this one's MMAs run (160 KB at hdim 128, and
  // a second Q buffer: fwd_smem_bytes). At hdim 64 a 64 x 128 S tile is too little
  // work per softmax to keep the tensor cores fed from two consumer warpgroups: 192 query rows
  // (three warpgroups, 16 warps) ran 530.8 TFLOP/s against 429.3 with 128 rows (bf16, S 8192,
  // H200), and ahead at S 2048 and 16384, causal or not (docs/METHOD.md, "Hopper forward").
  // A config may still ask for 128 rows or 12 warps. hdim 192 takes 80 keys too: two 128-key K
  // and V stages beside Q need 240 KB; 80 keys leave room for a second Q buffer (216 KB), with
  // O 96 + S 40 + P 20 registers.
  if (c.hdim_q >= 192) return {kBlockM, 80, kNumWarps, 2};
  if (c.hdim_q == 64 && c.block_m != kBlockM && c.num_warps != kNumWarps) return {192, 128, 16, 2};
  return {kBlockM, 128, kNumWarps, 2};
}

std::optional<TileShape> fwd_short_causal_tile(const FmhaKernelConfig& c) {
  // Under a causal mask the tiles on the diagonal do full MMAs for about half the work, and a
  // short problem has few tiles per row: there the long-sequence tiles lose what they gain per
  // key. bf16, H200, heuristic tile -> this one (docs/METHOD.md, "Hopper forward"):
  //   hdim 64, 128 query rows (two consumer warpgroups) instead of 192: S 512 causal 213.6 ->
  //     234.7 TFLOP/s, S 1024 277.6 -> 297.6; it loses at S 2048 and without a mask. 192 rows
  //     also leave S 512 with a partial third tile.
  //   hdim 256, 64 keys instead of 80: S 512 causal 256.8 -> 274.4, S 1024 357.8 -> 367.9; it
  //     loses from S 2048 and without a mask.
  //   hdim 128, 64 keys: slower at every length (S 512 causal 290.1 -> 264.1). hdim 192, 64
  //     keys: even at S 512 / 1024, slower at S 2048; its two Q buffers leave no round trip to
  //     hide.
  if (c.family != Family::fwd) return std::nullopt;
  if (c.hdim_q == 64) return TileShape{kBlockM, 128, kNumWarps, 2};
  if (c.hdim_q == 256) return TileShape{kBlockM, 64, kNumWarps, 2};
  return std::nullopt;
}

TileShape bwd_tile(const FmhaKernelConfig& c) {
  // Two Q/dO stages: the next tile lands while this one's five GEMMs run (~195 KB of 227). At
  // hdim 256 shared memory (~226 KB) holds either two Q stages or one Q stage and a second dQ
  // block per consumer warpgroup (FmhaBwdSm90aHd256Shape). Both modes take the second dQ block
  // (bf16, S 8192, H200). Deterministic: its second dQ round no longer waits for the first
  // round's writer to take its turn (331 -> 407 TFLOP/s causal, 333 -> 398 non-causal).
  // Atomic: 372 -> 447 causal, 380 -> 444 non-causal, once the producers load the LSE / D rows
  // before the stage waits (docs/METHOD.md, "Hopper backward").
  const int stages = c.hdim_q == 256 ? 1 : 2;
  return {bwd_block_m(c.hdim_q), bwd_block_n(c.hdim_q), kNumWarps, stages};
}

int bwd_smem_bytes(const FmhaKernelConfig& c) {
  // kFmhaBwdSm90aWalkBytes (templates/bwd/fmha_bwd_sm90a_schedule.h): the up-down walk.
  constexpr int kWalkBytes = 64;
  const int block_n = bwd_block_n(c.hdim_q);
  const int kv = block_n * c.hdim_q * 2;
  const int q = c.block_m * c.hdim_q * 2;
  const int dq = 64 * 64 * 4;
  if (c.hdim_q == 256) {
    // FmhaBwdSm90aHd256Shape::kSmemBytes: K and V (64 keys), num_stages Q tiles and one dO tile,
    // P^T and dS^T (64 x 64, 16-bit), two 8 KB exchange buffers, 3 - num_stages fp32 dQ blocks
    // per consumer warpgroup, num_stages LSE rows and one D row, 1 + 2 x num_stages + 6 +
    // 2 x dQ blocks mbarriers, the up-down walk, 1 KB of alignment.
    const int tile = block_n * c.block_m * 2;
    const int dq_buffers = 3 - c.num_stages;
    return 2 * kv + (c.num_stages + 1) * q + 2 * tile + 2 * 8192 + 2 * dq_buffers * dq +
           (c.num_stages + 1) * c.block_m * 4 + (1 + 2 * c.num_stages + 6 + 2 * dq_buffers) * 8 +
           kWalkBytes + 1024;
  }
  // FmhaBwdSm90aShape::kSmemBytes: K and V (128 keys), num_stages Q and dO tiles, two halves of
  // dS^T (128 keys x block_m), two fp32 dQ blocks (64 x 64), num_stages LSE and D rows, an
  // 8-byte query-tile slot per stage, 1 + 3 x num_stages + 4 mbarriers, the up-down walk, 1 KB
  // of alignment.
  const int ds = block_n * c.block_m * 2;
  return 2 * kv + 2 * c.num_stages * q + 2 * ds + 2 * dq + 2 * c.num_stages * c.block_m * 4 +
         c.num_stages * 8 + (1 + 3 * c.num_stages + 4) * 8 + kWalkBytes + 1024;
}

int smem_bytes(const FmhaKernelConfig& c) {
  return c.family == Family::fwd ? fwd_smem_bytes(c) : bwd_smem_bytes(c);
}

int fwd_smem_bytes(const FmhaKernelConfig& c) {
  // FmhaFwdSm90aShape::kSmemBytes: one or two Q buffers (block_m rows each; two where they fit in
  // sm_90's 227 KB, so the next tile's Q lands while this one computes), num_stages K and V
  // tiles, 2 mbarriers of 8 bytes per Q buffer and 4 per stage, and 1 KB to align the base to the
  // swizzle period.
  const int q = c.block_m * c.hdim_q * 2;
  const int kv = c.block_n * c.hdim_q * 2;
  const auto bytes = [&](int q_buffers) {
    return q_buffers * q + 2 * c.num_stages * kv + (2 * q_buffers + 4 * c.num_stages) * 8 + 1024;
  };
  return bytes(2) <= 227 * 1024 ? bytes(2) : bytes(1);
}

void check_bwd_tile(const ArchInfo& arch, const FmhaKernelConfig& c) {
  const int block_m = bwd_block_m(c.hdim_q);
  if (c.block_m != block_m) {
    reject_tile("block_m", c.block_m,
                "0 (heuristic), " + std::to_string(block_m) + " (impl wgmma_sm90a backward, hdim " +
                    std::to_string(c.hdim_q) + ")");
  }
  const int block_n = bwd_block_n(c.hdim_q);
  if (c.block_n != block_n) {
    reject_tile("block_n", c.block_n,
                "0 (heuristic), " + std::to_string(block_n) + " (impl wgmma_sm90a backward, hdim " +
                    std::to_string(c.hdim_q) + ")");
  }
  if (c.num_warps != kNumWarps) {
    reject_tile("num_warps", c.num_warps, "0 (heuristic), 12 (impl wgmma_sm90a)");
  }
  const int max_stages = c.hdim_q == 256 ? 2 : 3;
  if (c.num_stages < 1 || c.num_stages > max_stages) {
    reject_tile("num_stages", c.num_stages,
                "0 (heuristic), 1 to " + std::to_string(max_stages) +
                    " (impl wgmma_sm90a backward, hdim " + std::to_string(c.hdim_q) + ")");
  }
  check_smem_fits(arch, c, bwd_smem_bytes(c));
}

void check_fwd_tile(const ArchInfo& arch, const FmhaKernelConfig& c) {
  // 128 rows (two consumer warpgroups) or, at hdim 64, 192 (three): their 160 registers after
  // setmaxnreg hold O, S and P only when O is 32 of them.
  if (c.block_m != kBlockM && (c.block_m != 192 || c.hdim_q != 64)) {
    reject_tile("block_m", c.block_m,
                c.hdim_q == 64 ? "0 (heuristic), 128, 192 (impl wgmma_sm90a, hdim 64)"
                               : "0 (heuristic), 128 (impl wgmma_sm90a)");
  }
  // One producer warpgroup and one consumer warpgroup per 64 rows.
  const int warps = 4 * (1 + c.block_m / 64);
  if (c.num_warps != warps) {
    reject_tile("num_warps", c.num_warps,
                "0 (heuristic), " + std::to_string(warps) + " (impl wgmma_sm90a, block_m " +
                    std::to_string(c.block_m) + ")");
  }
  // hdim 256 with 128-key tiles needs O 128 + S 64 + P 32 registers: more than a consumer has;
  // 80 keys fit there (wgmma N 80), and would only add instructions per key at smaller hdims.
  // At hdim 192 128 keys fit the registers but not shared memory with two stages.
  const bool block_n_ok =
      c.hdim_q > 128 ? c.block_n == 64 || c.block_n == 80 : c.block_n == 64 || c.block_n == 128;
  if (!block_n_ok) {
    reject_tile("block_n", c.block_n,
                c.hdim_q > 128 ? "0 (heuristic), 64, 80 (impl wgmma_sm90a, hdim " +
                                     std::to_string(c.hdim_q) + ")"
                               : "0 (heuristic), 64, 128 (impl wgmma_sm90a)");
  }
  if (c.num_stages < 1 || c.num_stages > 4) {
    reject_tile("num_stages", c.num_stages, "0 (heuristic), 1 to 4 (impl wgmma_sm90a)");
  }
  check_smem_fits(arch, c, fwd_smem_bytes(c));
}

}  // namespace fmha_jit::kernels::wgmma_sm90a
