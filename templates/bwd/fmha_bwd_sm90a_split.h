// The end of a split key tile's part in the Hopper backward's stage 2 (fmha_bwd_sm90a.h; the
// schedule in fmha_bwd_sm90a_schedule.h, fmha_bwd_key_tile_cta). Each part adds its dK
// (unscaled) and dV to the key tile's fp32 workspace block, counts itself in, and the part that
// arrives last writes dK (scaled) and dV from the block. Stage 1 clears the blocks and counters
// of every launch (fmha_bwd_sm80_dot_do_o), so no part ever waits for another and the workspace
// needs no state between launches.
#pragma once

#include "bwd/fmha_bwd_memory_sm80.h"
#include "common/copy_sm80.h"
#include "common/fmha_params.h"
#include "common/mma_sm80.h"
#include "common/platform.h"
#include "sm90/warpgroup_sm90a.h"

// Both consumer warpgroups (256 threads) of a kBlockN-key tile, key_row0: this lane's first key row
// in the tile. dk, dv: the accumulators of columns c kN + 8 j + 2 (lane % 4) + {0, 1} of key rows
// key_row0 and key_row0 + 8 (wgmma's layout). `flag`: a shared-memory word no other thread uses
// meanwhile; `barrier`: a named barrier id free for the 256 consumer threads.
template <class Element, int kBlockN, int kChunks, int kN, class Work>
FMHA_DEVICE void fmha_bwd_sm90a_split_dkdv(const FmhaBwdParams& p, const Work& w, int key_row0,
                                           const float (&dk)[kChunks][kN / 2],
                                           const float (&dv)[kChunks][kN / 2], unsigned flag,
                                           int barrier) {
  using Pack = FmhaMmaSm80<Element>;
  static_assert(kBlockN == kFmhaBwdSplitKeys, "stage 1 clears blocks of kFmhaBwdSplitKeys keys");
  enum { kHdim = kChunks * kN, kRowFloats = 2 * kHdim };
  const int lane = fmha_lane_id();
  float* block = p.split_dkdv + static_cast<fmha_index_t>(w.split_tile) * kBlockN * kRowFloats;
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    float* row = block + (key_row0 + hf * 8) * kRowFloats + (lane & 3) * 2;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
#pragma unroll
      for (int j = 0; j < kN / 8; ++j) {
        const int i = 4 * j + 2 * hf;
        fmha_red_add_f32x2(row + c * kN + j * 8, dk[c][i], dk[c][i + 1]);
        fmha_red_add_f32x2(row + kHdim + c * kN + j * 8, dv[c][i], dv[c][i + 1]);
      }
    }
  }
  __threadfence();  // this thread's additions are visible GPU-wide before the count
  fmha_named_barrier_sync(barrier, 256);
  if (fmha_thread_idx() == 128) {  // the first consumer thread
    const bool last = atomicAdd(p.split_counters + w.split_tile, 1) == p.split_parts - 1;
    fmha_st_shared_b32(flag, last ? 1u : 0u);
  }
  fmha_named_barrier_sync(barrier, 256);
  if (fmha_ld_shared_b32(flag) == 0) return;
  __threadfence();  // the other parts' additions, counted in before, are read after the count
  const float scale = p.fwd.scale;
#pragma unroll
  for (int hf = 0; hf < 2; ++hf) {
    const int key = w.n_block * kBlockN + key_row0 + hf * 8;
    if (key >= p.fwd.seqlen_k) continue;
    const float* row = block + (key_row0 + hf * 8) * kRowFloats + (lane & 3) * 2;
    Element* dk_row = static_cast<Element*>(p.d_k) + w.b * p.dk_strides.batch +
                      w.hk * p.dk_strides.head + key * p.dk_strides.row + (lane & 3) * 2;
    Element* dv_row = static_cast<Element*>(p.d_v) + w.b * p.dv_strides.batch +
                      w.hk * p.dv_strides.head + key * p.dv_strides.row + (lane & 3) * 2;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
#pragma unroll
      for (int j = 0; j < kN / 8; ++j) {
        // Read through L2 (.cg): L1 may hold no copy of what the other parts added.
        const float2 k2 = __ldcg(reinterpret_cast<const float2*>(row + c * kN + j * 8));
        const float2 v2 = __ldcg(reinterpret_cast<const float2*>(row + kHdim + c * kN + j * 8));
        *reinterpret_cast<unsigned*>(dk_row + c * kN + j * 8) =
            Pack::pack(k2.x * scale, k2.y * scale);
        *reinterpret_cast<unsigned*>(dv_row + c * kN + j * 8) = Pack::pack(v2.x, v2.y);
      }
    }
  }
}
