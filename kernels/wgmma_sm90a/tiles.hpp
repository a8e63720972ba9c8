// Which configs the wgmma_sm90a kernels serve, their tiles and their shared memory (tiles.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/arch.hpp"
#include "fmha_jit/config.hpp"
#include "kernels/family.hpp"

namespace fmha_jit::kernels::wgmma_sm90a {

// Configs for sm_90 or sm_90a.
bool is_hopper(const ArchInfo& arch);
// The head dims (hdim_q == hdim_v) the family's kernel serves: the one list that the gap, the
// tests and the prebuild sweeps derive from.
const std::vector<int>& served_hdims(Family family);
// Why the kernels do not serve `config` on Hopper, empty when they do.
std::string config_gap(const FmhaKernelConfig& config);

TileShape fwd_tile(const FmhaKernelConfig& config);
// Short causal problems: neither length above kShortCausalSeqlen. The forward's tile for them
// where it differs from fwd_tile (hdim 64 and 256), else nullopt.
inline constexpr std::int64_t kShortCausalSeqlen = 1024;
std::optional<TileShape> fwd_short_causal_tile(const FmhaKernelConfig& config);
void check_fwd_tile(const ArchInfo& arch, const FmhaKernelConfig& c);
// FmhaFwdSm90aShape::kSmemBytes of templates/fwd/fmha_fwd_sm90a_pipeline.h.
int fwd_smem_bytes(const FmhaKernelConfig& c);
// The backward's dq_dk_dv stage (templates/bwd/fmha_bwd_sm90a.h); the dot_do_o and convert_dq
// stages share its block_m, as in mma_sm80.
TileShape bwd_tile(const FmhaKernelConfig& config);
void check_bwd_tile(const ArchInfo& arch, const FmhaKernelConfig& c);
// FmhaBwdSm90aShape::kSmemBytes (FmhaBwdSm90aHd256Shape at hdim 256).
int bwd_smem_bytes(const FmhaKernelConfig& c);
// The forward's or the backward's, by family.
int smem_bytes(const FmhaKernelConfig& c);

}  // namespace fmha_jit::kernels::wgmma_sm90a
