// The wgmma_sm90a forward (templates/fwd/fmha_fwd_sm90a.h): which configs it serves, its tiles
// and their shared memory.
#include <string>

#include "codegen/tile_shapes.hpp"
#include "fmha_jit/error.hpp"

namespace fmha_jit::codegen {
namespace {

[[noreturn]] void reject(const char* field, int value, const std::string& accepted) {
  throw FieldError(ErrorCode::invalid_config, field, std::to_string(value), accepted);
}

// Fixed by the kernel's structure: two consumer warpgroups of 64 rows (wgmma's M) and one
// producer warpgroup.
constexpr int kBlockM = 128;
constexpr int kNumWarps = 12;

}  // namespace

bool is_hopper(const ArchInfo& arch) { return arch.name == "sm_90" || arch.name == "sm_90a"; }

std::string wgmma_sm90a_gap(const FmhaKernelConfig& c) {
  if (c.family != Family::fwd) return "the backward has no wgmma_sm90a kernel yet";
  if (c.hdim_q != c.hdim_v) return "hdim_q != hdim_v";
  // Tiles are stored as 64-column slabs with 128-byte swizzle (one TMA box, one wgmma k-atom);
  // 32, 96 and 192 would need 64- or 32-byte swizzled slabs next to them.
  if (c.hdim_q != 64 && c.hdim_q != 128 && c.hdim_q != 256) {
    return "hdim " + std::to_string(c.hdim_q) + " (it serves 64, 128, 256)";
  }
  return {};
}

TileShape wgmma_sm90a_fwd_tile(const FmhaKernelConfig& c) {
  // Registers per consumer thread (232 after setmaxnreg): S = block_n / 2, P = block_n / 4 packed,
  // O = hdim / 2. hdim 64 / 128 take 128-key tiles (S 64 + P 32 + O 64 at hdim 128 leaves room
  // for the softmax state and addresses); hdim 256 halves them, since O alone is 128 registers.
  // Two stages: the next tile's K and V land while this one's MMAs run (160 KB at hdim 128,
  // 192 KB at hdim 256).
  if (c.hdim_q >= 256) return {kBlockM, 64, kNumWarps, 2};
  return {kBlockM, 128, kNumWarps, 2};
}

int wgmma_sm90a_fwd_smem_bytes(const FmhaKernelConfig& c) {
  // FmhaFwdSm90aShape::kSmemBytes: Q (128 rows), num_stages K and V tiles, 2 + 4 x num_stages
  // mbarriers of 8 bytes, and 1 KB to align the base to the swizzle period.
  const int q = kBlockM * c.hdim_q * 2;
  const int kv = c.block_n * c.hdim_q * 2;
  return q + 2 * c.num_stages * kv + (2 + 4 * c.num_stages) * 8 + 1024;
}

void check_wgmma_sm90a_fwd_tile(const ArchInfo& arch, const FmhaKernelConfig& c) {
  if (c.block_m != kBlockM) reject("block_m", c.block_m, "0 (heuristic), 128 (impl wgmma_sm90a)");
  if (c.num_warps != kNumWarps) {
    reject("num_warps", c.num_warps, "0 (heuristic), 12 (impl wgmma_sm90a)");
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
  const int smem = wgmma_sm90a_fwd_smem_bytes(c);
  if (smem > arch.max_smem_per_block_bytes) {
    reject("num_stages", c.num_stages,
           "a tile within " + std::to_string(arch.max_smem_per_block_bytes / 1024) +
               " KB of shared memory (this one needs " + std::to_string(smem / 1024) + " KB)");
  }
}

}  // namespace fmha_jit::codegen
