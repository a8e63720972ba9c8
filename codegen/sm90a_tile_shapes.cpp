// The wgmma_sm90a kernels (templates/fwd/fmha_fwd_sm90a.h, templates/bwd/fmha_bwd_sm90a.h):
// which configs they serve, their tiles and their shared memory.
#include <string>

#include "codegen/tile_shapes.hpp"
#include "fmha_jit/error.hpp"

namespace fmha_jit::codegen {
namespace {

[[noreturn]] void reject(const char* field, int value, const std::string& accepted) {
  throw FieldError(ErrorCode::invalid_config, field, std::to_string(value), accepted);
}

// Fixed by the kernels' structure: two consumer warpgroups of 64 rows (wgmma's M) and one
// producer warpgroup; the forward's consumers own 64 query rows each, the backward's 64 keys.
constexpr int kBlockM = 128;
constexpr int kBwdBlockN = 128;
constexpr int kNumWarps = 12;

// The backward's query tile: each consumer warpgroup computes one 64 x 64 dQ block of it, by
// query rows at hdim 64 (a 128-row tile) and by head-dim halves at hdim 128 (64 rows). At hdim
// 128 a 128-row tile would put S^T and dP^T (64 registers each) beside dK and dV (128): over 232.
int bwd_block_m(int hdim) { return hdim == 64 ? 128 : 64; }

// More stages than shared memory holds: num_stages is the field a user lowers.
void check_stages_fit(const ArchInfo& arch, const FmhaKernelConfig& c, int smem) {
  if (smem > arch.max_smem_per_block_bytes) {
    reject("num_stages", c.num_stages,
           "a tile within " + std::to_string(arch.max_smem_per_block_bytes / 1024) +
               " KB of shared memory (this one needs " + std::to_string(smem / 1024) + " KB)");
  }
}

}  // namespace

bool is_hopper(const ArchInfo& arch) { return arch.name == "sm_90" || arch.name == "sm_90a"; }

std::string wgmma_sm90a_gap(const FmhaKernelConfig& c) {
  if (c.hdim_q != c.hdim_v) return "hdim_q != hdim_v";
  // dK and dV of a warpgroup's 64 keys live in registers for the whole CTA: hdim / 2 fp32 each
  // per thread, 256 at hdim 256 against 232 available.
  if (c.family == Family::bwd && c.hdim_q != 64 && c.hdim_q != 128) {
    return "backward hdim " + std::to_string(c.hdim_q) + " (its backward serves 64, 128)";
  }
  // Tiles are stored as 64-column slabs with 128-byte swizzle (one TMA box, one wgmma k-atom);
  // 32, 96 and 192 would need 64- or 32-byte swizzled slabs next to them.
  if (c.hdim_q != 64 && c.hdim_q != 128 && c.hdim_q != 256) {
    return "hdim " + std::to_string(c.hdim_q) + " (it serves 64, 128, 256)";
  }
  return {};
}

TileShape wgmma_sm90a_fwd_tile(const FmhaKernelConfig& c) {
  // Registers per consumer thread (240 after setmaxnreg): S = block_n / 2, P = block_n / 4 packed,
  // O = hdim / 2. hdim 64 / 128 take 128-key tiles (S 64 + P 32 + O 64 at hdim 128 leaves room
  // for the softmax state and addresses); hdim 256 halves them, since O alone is 128 registers.
  // Two stages: the next tile's K and V land while this one's MMAs run (160 KB at hdim 128,
  // 192 KB at hdim 256). 128 query rows by default; a config may ask for 192 at hdim 64 (three
  // consumer warpgroups, 16 warps), not measured yet, so not the default.
  if (c.hdim_q >= 256) return {kBlockM, 64, kNumWarps, 2};
  if (c.block_m == 192) return {192, 128, 16, 2};
  return {kBlockM, 128, kNumWarps, 2};
}

TileShape wgmma_sm90a_bwd_tile(const FmhaKernelConfig& c) {
  // Two Q/dO stages: the next tile lands while this one's five GEMMs run (~195 KB of 227).
  return {bwd_block_m(c.hdim_q), kBwdBlockN, kNumWarps, 2};
}

int wgmma_sm90a_bwd_smem_bytes(const FmhaKernelConfig& c) {
  // FmhaBwdSm90aShape::kSmemBytes: K and V (128 keys), num_stages Q and dO tiles, two halves of
  // dS^T (128 keys x block_m), two fp32 dQ blocks (64 x 64), num_stages LSE and D rows,
  // 1 + 3 x num_stages + 4 mbarriers, 1 KB of alignment.
  const int kv = kBwdBlockN * c.hdim_q * 2;
  const int q = c.block_m * c.hdim_q * 2;
  const int ds = kBwdBlockN * c.block_m * 2;
  const int dq = 64 * 64 * 4;
  return 2 * kv + 2 * c.num_stages * q + 2 * ds + 2 * dq + 2 * c.num_stages * c.block_m * 4 +
         (1 + 3 * c.num_stages + 4) * 8 + 1024;
}

int wgmma_sm90a_smem_bytes(const FmhaKernelConfig& c) {
  return c.family == Family::fwd ? wgmma_sm90a_fwd_smem_bytes(c) : wgmma_sm90a_bwd_smem_bytes(c);
}

int wgmma_sm90a_fwd_smem_bytes(const FmhaKernelConfig& c) {
  // FmhaFwdSm90aShape::kSmemBytes: Q (block_m rows), num_stages K and V tiles, 2 + 4 x num_stages
  // mbarriers of 8 bytes, and 1 KB to align the base to the swizzle period.
  const int q = c.block_m * c.hdim_q * 2;
  const int kv = c.block_n * c.hdim_q * 2;
  return q + 2 * c.num_stages * kv + (2 + 4 * c.num_stages) * 8 + 1024;
}

void check_wgmma_sm90a_bwd_tile(const ArchInfo& arch, const FmhaKernelConfig& c) {
  const int block_m = bwd_block_m(c.hdim_q);
  if (c.block_m != block_m) {
    reject("block_m", c.block_m,
           "0 (heuristic), " + std::to_string(block_m) + " (impl wgmma_sm90a backward, hdim " +
               std::to_string(c.hdim_q) + ")");
  }
  if (c.block_n != kBwdBlockN) {
    reject("block_n", c.block_n, "0 (heuristic), 128 (impl wgmma_sm90a backward)");
  }
  if (c.num_warps != kNumWarps) {
    reject("num_warps", c.num_warps, "0 (heuristic), 12 (impl wgmma_sm90a)");
  }
  if (c.num_stages < 1 || c.num_stages > 3) {
    reject("num_stages", c.num_stages, "0 (heuristic), 1 to 3 (impl wgmma_sm90a backward)");
  }
  check_stages_fit(arch, c, wgmma_sm90a_bwd_smem_bytes(c));
}

void check_wgmma_sm90a_fwd_tile(const ArchInfo& arch, const FmhaKernelConfig& c) {
  // 128 rows (two consumer warpgroups) or, at hdim 64, 192 (three): their 160 registers after
  // setmaxnreg hold O, S and P only when O is 32 of them.
  if (c.block_m != kBlockM && (c.block_m != 192 || c.hdim_q != 64)) {
    reject("block_m", c.block_m,
           c.hdim_q == 64 ? "0 (heuristic), 128, 192 (impl wgmma_sm90a, hdim 64)"
                          : "0 (heuristic), 128 (impl wgmma_sm90a)");
  }
  // One producer warpgroup and one consumer warpgroup per 64 rows.
  const int warps = 4 * (1 + c.block_m / 64);
  if (c.num_warps != warps) {
    reject("num_warps", c.num_warps,
           "0 (heuristic), " + std::to_string(warps) + " (impl wgmma_sm90a, block_m " +
               std::to_string(c.block_m) + ")");
  }
  // hdim 256 with 128-key tiles needs O 128 + S 64 + P 32 registers: more than a consumer has.
  if (c.block_n != 64 && (c.block_n != 128 || c.hdim_q > 128)) {
    reject("block_n", c.block_n,
           c.hdim_q > 128 ? "0 (heuristic), 64 (impl wgmma_sm90a, hdim 256)"
                          : "0 (heuristic), 64, 128 (impl wgmma_sm90a)");
  }
  if (c.num_stages < 1 || c.num_stages > 4) {
    reject("num_stages", c.num_stages, "0 (heuristic), 1 to 4 (impl wgmma_sm90a)");
  }
  check_stages_fit(arch, c, wgmma_sm90a_fwd_smem_bytes(c));
}

}  // namespace fmha_jit::codegen
