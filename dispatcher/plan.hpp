// The launch plan of a kernel module for one problem: which stages run, in what order, with what
// grid, block and shared memory; and the backward's workspace layout.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "codegen/kernel_name.hpp"
#include "dispatcher/device/device_api.hpp"
#include "fmha_jit/config.hpp"
#include "fmha_jit/problem.hpp"

namespace fmha_jit::dispatch {

struct StageLaunch {
  codegen::StageRole role;
  device::Dim3 grid;
  device::Dim3 block;
  unsigned dynamic_smem_bytes = 0;
};

// Dynamic shared memory of one stage; it depends on the config only, so the runner raises the
// driver's limit once per module load rather than per launch.
unsigned stage_dynamic_smem_bytes(const FmhaKernelConfig& canonical, codegen::StageRole role);

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

// Stages in launch order, matching codegen::stage_roles(config). `multiprocessors` bounds the
// grid of the persistent kernels (wgmma_sm90a); 0 launches one CTA per tile.
std::vector<StageLaunch> plan_stages(const FmhaKernelConfig& canonical, const FmhaProblem& problem,
                                     int multiprocessors = 0);

// Deterministic wgmma_sm90a backward: how many (kv head, batch) pairs interleave their key-tile
// chains in the launch order (FmhaBwdParams::det_group_heads); 1 when `multiprocessors` is 0. The
// rule and why: templates/bwd/fmha_bwd_sm90a_schedule.h, fmha_bwd_key_tile_cta.
int det_group_heads(const FmhaKernelConfig& canonical, const FmhaProblem& problem,
                    int multiprocessors);
// Deterministic wgmma_sm90a backward: how many of the last (kv head, batch) pairs take their
// key-tile chains in increasing order (FmhaBwdParams::det_asc_pairs, same place for why).
int det_asc_pairs(const FmhaKernelConfig& canonical, const FmhaProblem& problem);
// The SM count the deterministic mode's launch-order choices are planned for, whatever the GPU
// (H100 and H200 have 132): those choices order the additions, so dQ / dK / dV bit for bit must
// not depend on the GPU's SM count.
constexpr int kDetReferenceSms = 132;
// Deterministic wgmma_sm90a backward under a causal mask: the up-down walk's cells per key tile on
// the way up (FmhaBwdParams::det_up_cells; why in templates/bwd/fmha_bwd_sm90a_schedule.h,
// FmhaBwdSm90aWork); 0 keeps the head-major order.
int det_up_cells(const FmhaKernelConfig& canonical, const FmhaProblem& problem);

// Query tiles of block_m rows that see each key tile of block_n keys under the config's mask:
// the backward's work per key tile and query head.
std::vector<std::int64_t> bwd_key_tile_query_tiles(const FmhaKernelConfig& canonical,
                                                   const FmhaProblem& problem);
// wgmma_sm90a backward under a causal mask: how many (kv head, batch) pairs share one section of
// the launch order (atomic: FmhaBwdParams::causal_section_pairs; deterministic: det_group_heads,
// with the last section's pairs ascending, det_asc_pairs; why in templates/bwd/
// fmha_bwd_sm90a_schedule.h, fmha_bwd_key_tile_cta), from a model of the SMs' finish times in
// query-tile iterations. The deterministic choice is modelled on 132 SMs whatever the GPU, since
// which pairs ascend fixes the order of every dQ addition. section_pairs = 1 (the order before
// sections) where it does not apply, where the model gains under 4 %, or past
// kBwdMaxModelledCtas CTAs, where a launch is tens of waves and its tail a small share.
struct BwdCausalSections {
  int section_pairs = 1;
  std::int64_t asc_pairs = 0;  // pairs whose chains ascend (deterministic; all when atomic)
  int tail_pairs = 0;          // walking chains: the last section's pairs (det_tail_pairs)
  bool alternate = false;      // walking chains: odd pairs ascend too (det_alternate)
  int asc_walk_up = 0;         // and those from asc_walk_from on walk (det_asc_walk_up)
  int asc_walk_from = 0;
  double makespan = 0;           // modelled, in iterations; 0 where not modelled
  double one_pair_makespan = 0;  // the same for one pair per section
};
constexpr std::int64_t kBwdMaxModelledCtas = 1 << 16;
BwdCausalSections bwd_causal_sections(const FmhaKernelConfig& canonical, const FmhaProblem& problem,
                                      int multiprocessors);

// wgmma_sm90a forward without a mask: whether the persistent CTAs split the last round's tiles by
// keys (FmhaFwdSm90Params::split_*, templates/fwd/fmha_fwd_sm90a_split.h), and the scratch that
// needs: the split tiles' arrival counters (which must be zero before the first launch; each
// launch leaves them at zero), then every CTA's partial O and row statistics.
struct FwdSplitTail {
  int round = 0;   // the round of the split tiles; the rounds before it run whole tiles
  int tiles = 0;   // 0: no split
  int blocks = 0;  // key blocks of one tile
  int ctas = 0;    // CTAs that take a range of them: min(SMs, tiles x blocks)
  std::size_t counters_bytes = 0;
  std::size_t partials_offset = 0;  // 256-byte aligned, after the counters
  std::size_t workspace_bytes = 0;
};
FwdSplitTail fwd_split_tail(const FmhaKernelConfig& canonical, const FmhaProblem& problem,
                            int multiprocessors);

// wgmma_sm90a forward under a causal mask: each persistent CTA's tiles, where a greedy plan
// (heads in L2-sized sections, each heaviest tile first, to the CTA with the least work so far)
// replaces the kernel's static order (FmhaFwdSm90Params::tile_order,
// templates/fwd/fmha_fwd_sm90a_work.h). order[r * grid + c] is CTA c's r-th tile (an index of the
// kernel's causal list), -1 past its last; empty where the static order is kept. Work is modelled
// as key blocks plus a per-tile overhead.
struct FwdTileOrder {
  int grid = 0;
  int rounds = 0;
  std::vector<int> order;       // rounds x grid, round-major; empty: the static order
  double static_makespan = 0;   // the most modelled work on one CTA, static order
  double planned_makespan = 0;  // the same, greedy plan
  int sections = 0;             // head sections dealt one after another (L2 locality)
  // Where `order` is empty: the (batch, head) pairs of a section of the kernel's static order
  // (FmhaFwdSm90Params::causal_section_heads), 0 for all of them (one section).
  int static_section_heads = 0;
};
// How many K / V heads (over the batch) one section of the causal forward's plan holds: as many
// as fit its share of L2, at least one.
std::int64_t fwd_l2_section_kv_heads(const FmhaProblem& problem);
// The (batch, head) pairs of one L2 section: fwd_l2_section_kv_heads whole GQA groups.
int fwd_l2_section_heads(const FmhaProblem& problem);
FwdTileOrder fwd_tile_order(const FmhaKernelConfig& canonical, const FmhaProblem& problem,
                            int multiprocessors);

// wgmma_sm90a backward, atomic mode, hdim 64 / 128, without a mask: whether stage 2 splits the
// key tiles of its launch's last partial wave into parts over their query tiles
// (FmhaBwdParams::split_*, templates/bwd/fmha_bwd_sm90a_schedule.h), and into how many.
struct BwdSplitTail {
  int first = 0;  // linear index of the first split key tile
  int tiles = 0;  // 0: no split
  int parts = 0;
};
// The split tiles' workspace is sized without the device (bwd_workspace_size has none): for at
// most this many tiles, more than the multiprocessors of any sm_90 GPU (the split tiles are
// fewer than those).
inline constexpr int kBwdMaxSplitTiles = 144;
// Whether the kernel of `canonical` may split on some GPU (then the workspace holds the split
// tiles' blocks).
bool bwd_split_eligible(const FmhaKernelConfig& canonical);
BwdSplitTail bwd_split_tail(const FmhaKernelConfig& canonical, const FmhaProblem& problem,
                            int multiprocessors);

// Byte offsets of the backward's fp32 scratch tensors inside one workspace allocation; each starts
// on a 256-byte boundary (the alignment cudaMalloc gives, and enough for vector accesses).
struct BwdWorkspaceLayout {
  std::size_t d_rowsum = 0;  // D = rowsum(dO * O), B x Hq x Sq floats
  // mma_sm80 only (npos otherwise): fp32 dQ sums and, in the deterministic mode, the per-query-
  // tile arrival counters that order them.
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);
  std::size_t dq_accum = npos, dq_accum_bytes = 0;
  std::size_t semaphores = npos, semaphores_bytes = 0;
  // wgmma_sm90a split tail (bwd_split_eligible): fp32 dK / dV blocks of kBwdMaxSplitTiles key
  // tiles at most, then their counters; stage 1 clears them every launch.
  std::size_t split_dkdv = npos, split_counters = npos, split_bytes = 0;
  std::size_t total = 0;
};
BwdWorkspaceLayout bwd_workspace_layout(const FmhaKernelConfig& canonical,
                                        const FmhaProblem& problem);

std::size_t align_up(std::size_t n, std::size_t a);

// Byte alignment the kernels of an implementation need for every tensor pointer and row stride.
std::size_t required_alignment_bytes(const FmhaKernelConfig& canonical);

}  // namespace fmha_jit::dispatch
