// Tile shapes per implementation, arch and head dim, with the reasons they were chosen, and the
// shared-memory footprint each implies (used by the heuristic and by the launch plan).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "codegen/arch.hpp"
#include "fmha_jit/config.hpp"

namespace fmha_jit::codegen {

struct TileShape {
  int block_m, block_n, num_warps, num_stages;
};

TileShape reference_tile(const ArchInfo& arch);

TileShape mma_sm80_fwd_tile(const ArchInfo& arch, const FmhaKernelConfig& config);
// Throws FieldError for a user-set tile the mma_sm80 forward cannot run (`c` has impl and tiles
// resolved).
void check_mma_sm80_fwd_tile(const ArchInfo& arch, const FmhaKernelConfig& c);

// Dynamic shared memory of the mma_sm80 forward: one Q tile and num_stages K/V tile pairs of
// 16-bit elements (templates/fwd/fmha_fwd_sm80.h relies on exactly this size).
int mma_sm80_fwd_smem_bytes(const FmhaKernelConfig& c);

// Throws FieldError (num_stages) unless 1 <= num_stages <= 3. The mma_sm80 tiles call it before
// they size shared memory from the tile: the config fuzzer found num_stages 555555555
// overflowing that sum (int).
void check_stages_range(const FmhaKernelConfig& c);
// Throws FieldError (num_stages) unless `smem_bytes` fits the arch.
void check_smem_fits(const ArchInfo& arch, const FmhaKernelConfig& c, int smem_bytes);

// The mma_sm80 backward (codegen/bwd_tile_shapes.cpp): the tile of its dq_dk_dv stage, which the
// dot_do_o and convert_dq stages share (block_m: the deterministic mode's semaphores count query
// tiles of that size).
TileShape mma_sm80_bwd_tile(const ArchInfo& arch, const FmhaKernelConfig& config);
void check_mma_sm80_bwd_tile(const ArchInfo& arch, const FmhaKernelConfig& c);
// Dynamic shared memory of the dq_dk_dv stage, FmhaBwdSm80Shape::kSmemBytes of
// templates/bwd/fmha_bwd_tiles_sm80.h.
int mma_sm80_bwd_smem_bytes(const FmhaKernelConfig& c);

// The wgmma_sm90a kernels (codegen/sm90a_tile_shapes.cpp). They run on Hopper (configs for sm_90
// or sm_90a); gap() says why they do not serve a config, empty when they do.
bool is_hopper(const ArchInfo& arch);
// The head dims (hdim_q == hdim_v) the family's wgmma_sm90a kernel serves: the one list that the
// gap, the tests and the prebuild sweeps derive from.
const std::vector<int>& wgmma_sm90a_hdims(Family family);
std::string wgmma_sm90a_gap(const FmhaKernelConfig& config);
TileShape wgmma_sm90a_fwd_tile(const FmhaKernelConfig& config);
// Short causal problems: neither length above kShortCausalSeqlen. The forward's tile for them
// where it differs from wgmma_sm90a_fwd_tile (hdim 64 and 256), else nullopt.
inline constexpr std::int64_t kShortCausalSeqlen = 1024;
std::optional<TileShape> wgmma_sm90a_fwd_short_causal_tile(const FmhaKernelConfig& config);
void check_wgmma_sm90a_fwd_tile(const ArchInfo& arch, const FmhaKernelConfig& c);
// FmhaFwdSm90aShape::kSmemBytes of templates/fwd/fmha_fwd_sm90a.h.
int wgmma_sm90a_fwd_smem_bytes(const FmhaKernelConfig& c);
// The backward's dq_dk_dv stage (templates/bwd/fmha_bwd_sm90a.h); the dot_do_o and convert_dq
// stages share its block_m, as in mma_sm80.
TileShape wgmma_sm90a_bwd_tile(const FmhaKernelConfig& config);
void check_wgmma_sm90a_bwd_tile(const ArchInfo& arch, const FmhaKernelConfig& c);
// FmhaBwdSm90aShape::kSmemBytes.
int wgmma_sm90a_bwd_smem_bytes(const FmhaKernelConfig& c);
// The forward's or the backward's, by family.
int wgmma_sm90a_smem_bytes(const FmhaKernelConfig& c);

}  // namespace fmha_jit::codegen
