// Tiles of the mma_sm80 kernels per arch and head dim, with the reasons they were chosen, and the
// shared memory each implies (fwd_tiles.cpp, bwd_tiles.cpp).
#pragma once

#include "core/arch.hpp"
#include "fmha_jit/config.hpp"
#include "kernels/family.hpp"

namespace fmha_jit::kernels::mma_sm80 {

TileShape fwd_tile(const ArchInfo& arch, const FmhaKernelConfig& config);
// Throws FieldError for a user-set tile the forward cannot run (`c` has impl and tiles resolved).
void check_fwd_tile(const ArchInfo& arch, const FmhaKernelConfig& c);
// Dynamic shared memory of the forward: one Q tile and num_stages K/V tile pairs of 16-bit
// elements (templates/fwd/fmha_fwd_sm80.h relies on exactly this size).
int fwd_smem_bytes(const FmhaKernelConfig& c);

// The backward: the tile of its dq_dk_dv stage, which the dot_do_o and convert_dq stages share
// (block_m: the deterministic mode's semaphores count query tiles of that size).
TileShape bwd_tile(const ArchInfo& arch, const FmhaKernelConfig& config);
void check_bwd_tile(const ArchInfo& arch, const FmhaKernelConfig& c);
// Dynamic shared memory of the dq_dk_dv stage, FmhaBwdSm80Shape::kSmemBytes of
// templates/bwd/fmha_bwd_tiles_sm80.h.
int bwd_smem_bytes(const FmhaKernelConfig& c);

}  // namespace fmha_jit::kernels::mma_sm80
