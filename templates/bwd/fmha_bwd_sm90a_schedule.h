// The schedule of the Hopper backward's stage 2 (fmha_bwd_sm90a.h, fmha_bwd_sm90a_hd256.h): which
// key tile, kv head and batch a CTA takes, which (query head, query tile) pairs it visits in what
// order, and, in the deterministic mode, in what order the CTAs add to each query tile's dQ
// (fmha_bwd_sm90a_dq_turns.h waits for and releases the turns). Index arithmetic only, no inline
// PTX: tests/unit/test_bwd_schedule.cpp runs it on the host for whole launches.
#pragma once

#include "bwd/fmha_bwd_tile_visibility.h"
#include "common/fmha_params.h"
#include "common/platform.h"

// ---------------------------------------------------------------------------------------------
// Launch geometry: which key tile, kv head and batch a CTA takes. (The sm_80 kernel keeps grid
// (num_n, Hk, B) with n_block = num_n - 1 - blockIdx.x when deterministic: its hdim 128 tile has
// no registers left for the computed indices below, which spilled 16 bytes there, while block
// indices cost none.)
//   atomic mode:        grid (num_n, Hk, B), n_block = blockIdx.x; under a causal mask 1-D, in
//                       sections of causal_section_pairs pairs (below)
//   deterministic mode: grid (num_n x Hk x B), 1-D, in groups of det_group_heads (kv head, batch)
//                       pairs (the last group may be smaller); inside a group the chain position
//                       k = num_n - 1 - n_block is the slow index and the pair the fast one.
// In the deterministic mode every query tile receives its key tiles' dQ additions in decreasing
// key-tile order (fmha_bwd_sm80.h), so the CTA at chain position k waits for position k - 1 of its
// own pair. The hardware dispatches CTAs in linear index order. With one pair per group (the
// atomic order, reversed) every wave re-creates the chains' stagger: the CTAs that finish first
// are replaced by later chain positions of the next pair, which wait for its earlier ones. With
// groups of as many pairs as fill the GPU, chain by chain (floor(SMs / num_n), the host's
// choice without a mask; one more for chains of 32 key tiles or more, dispatcher/plan.cpp),
// the CTAs of one position finish at about the same time and are
// replaced by the same position of the next group, which finds its predecessors started one link
// earlier: the stagger is paid once. Larger groups would spread the resident CTAs over more
// heads, and their Q and dO no longer stay in L2 for the other key tiles of the head (all heads
// in one group measured 0.66 x at hdim 128, S 8192, causal). Under causal masks the chains are
// staggered by the mask itself (fmha_bwd_sm80.h), and the host keeps one pair per group.
// Under causal masks the decreasing order launches each pair's smallest key tiles first and its
// largest (n_block 0, every query tile) last, so the last pair's largest tiles would run nearly
// alone at the end of the grid. The last det_asc_pairs pairs (the host's choice: one under causal
// masks with at most 16 pairs, dispatcher/plan.cpp) therefore take their chains the other way:
// increasing key tiles, n_block = k, largest first, as the atomic mode launches them. Their CTAs
// walk their query tiles downwards and over the query heads innermost (FmhaBwdSm90aWork), so
// that the CTA before them in the chain, whose extra query tiles are the lowest, reaches every
// shared tile at the same step. The waits still point to lower linear indices only (the same pair,
// lower k), which is what the no-deadlock argument of fmha_bwd_sm80.h needs. Which pairs ascend
// depends on the problem only, so the order of every addition, and dQ bit for bit, does not depend
// on the GPU's SM count.
// Atomic mode under a causal mask: a 1-D grid in sections of causal_section_pairs pairs, grouped
// as above with n_block = k, so each section runs its key tiles largest first, all of its pairs
// at each key tile. In the 3-D grid's order (one section per pair) each pair's largest key tile
// starts only after every earlier pair's tiles: the last pair's tile 0, a quarter of an SM's
// work at GQA 32:8 S 8192 (2 x 8 pairs of 64 key tiles on 132 SMs), then ends ~11 % after the
// rest (the host's model, dispatcher/plan_bwd_sections.cpp, which picks the section size). A
// section spans no more pairs than the 3-D order runs at once (SMs / key tiles), so that the
// resident CTAs still share their heads' Q, dO and dQ sums in L2: 32 pairs where 8 ran together
// lost 3.4 % at hdim 128 S 2048 (BENCHMARKS.md, session 21).
// Atomic mode with a split tail (p.split_parts > 0): a 1-D grid. The key tiles run in the 3-D
// grid's order (key tile fastest, then kv head, then batch), whole up to linear index
// split_first; each later key tile runs as split_parts CTAs, part q taking iterations
// [q n / parts, (q + 1) n / parts) of its n (fmha_bwd_sm90a_work). The launch's last partial wave
// would otherwise leave SMs idle for a whole key tile's time (hdim 128, S 8192, 2 x 16 heads:
// 2048 key tiles on 132 SMs are 15.5 waves); smaller parts spread that wave over every SM. Each
// part adds its dK and dV to an fp32 workspace, and the last to arrive writes them
// (fmha_bwd_sm90a_split_dkdv).
struct FmhaBwdKeyTileCta {
  int n_block, hk, b;
  bool ascending;  // deterministic mode: this pair's chain runs in increasing key tiles
  int part;        // atomic mode: -1 for a whole key tile, else its part in [0, split_parts)
  int split_tile;  // the key tile's index among the split ones (part >= 0)
};

// Linear index -> (pair, chain position) in a launch of groups of `per_group` (kv head, batch)
// pairs, num_n CTAs each (the last group may be smaller): inside a group the chain position is
// the slow index and the pair the fast one.
struct FmhaBwdGroupedCta {
  int pair, k;
};

FMHA_DEVICE FmhaBwdGroupedCta fmha_bwd_grouped_cta(int linear, int num_n, int pairs,
                                                   int per_group) {
  const int group = linear / (per_group * num_n);
  const int in_group = linear - group * per_group * num_n;
  const int group_pairs = min(per_group, pairs - group * per_group);
  FmhaBwdGroupedCta g;
  g.pair = group * per_group + in_group % group_pairs;
  g.k = in_group / group_pairs;
  return g;
}

// kSections: the atomic mode under a causal mask, a 1-D grid in sections of causal_section_pairs
// pairs, key tile by key tile, the largest first (n_block = k).
template <bool kDeterministic, int kBlockN, bool kSplit, bool kSections>
FMHA_DEVICE FmhaBwdKeyTileCta fmha_bwd_key_tile_cta(const FmhaBwdParams& p) {
  const FmhaFwdParams& f = p.fwd;
  FmhaBwdKeyTileCta c;
  if (kDeterministic || kSections) {
    const int num_n = (f.seqlen_k + kBlockN - 1) / kBlockN;
    const int pairs = f.nhead_k * f.batch;
    const FmhaBwdGroupedCta g =
        fmha_bwd_grouped_cta(fmha_block_idx_x(), num_n, pairs,
                             kDeterministic ? p.det_group_heads : p.causal_section_pairs);
    c.ascending = kDeterministic && g.pair >= pairs - p.det_asc_pairs;
    c.n_block = kDeterministic && !c.ascending ? num_n - 1 - g.k : g.k;
    c.hk = g.pair % f.nhead_k;
    c.b = g.pair / f.nhead_k;
    c.part = -1;
    c.split_tile = 0;
  } else if (kSplit && p.split_parts > 0) {
    const int num_n = (f.seqlen_k + kBlockN - 1) / kBlockN;
    const int linear = fmha_block_idx_x();
    const int extra = linear - p.split_first;
    c.part = extra < 0 ? -1 : extra % p.split_parts;
    c.split_tile = extra < 0 ? 0 : extra / p.split_parts;
    const int tile = extra < 0 ? linear : p.split_first + c.split_tile;
    c.n_block = tile % num_n;
    c.hk = tile / num_n % f.nhead_k;
    c.b = tile / num_n / f.nhead_k;
    c.ascending = false;
  } else {
    c.n_block = fmha_block_idx_x();
    c.hk = fmha_block_idx_y();
    c.b = fmha_block_idx_z();
    c.ascending = false;
    c.part = -1;
    c.split_tile = 0;
  }
  return c;
}

// ---------------------------------------------------------------------------------------------
// The CTA's work: key tile, kv head, batch, and the (query head, query tile) pairs it visits:
// head-major with the query tiles upwards, or, on a deterministic chain in increasing key tiles
// (fmha_bwd_key_tile_cta), query tiles downwards with the heads innermost. Every role derives it
// from the same call, so their loops agree. Iteration `it` splits once into an outer and an inner
// index by `inner` (m_count, or group when ascending): one division per iteration whichever the
// order; selecting between two orders' divisions cost the non-ascending chains 2-4 % (session 9).
// In the atomic mode each CTA starts its query tiles at offset `rot` (its key tile modulo their
// count) and wraps around: without it, every key tile of a head would reduce-add into the same dQ
// tile at the same time (non-causal masks), and those adds queue at the same L2 lines. The
// deterministic mode keeps rot = 0: its chains already put neighbouring key tiles one query tile
// apart, and their order is what the semaphores count.
struct FmhaBwdSm90aWork {
  int n_block, hk, b, group, m_lo, m_count;
  int num_iters;         // this CTA's iterations: the key tile's, or its part's
  int it0;               // the first of them in the key tile's list (0 unless a later part)
  int inner;             // iterations per outer step: the inner loop's length
  int rot;               // the first query tile's offset in [0, m_count)
  int part, split_tile;  // FmhaBwdKeyTileCta
  bool ascending;
  FMHA_DEVICE int head(int it) const {
    it += it0;
    const int outer = it / inner;
    return hk * group + (ascending ? it - outer * inner : outer);
  }
  FMHA_DEVICE int m_block(int it) const {
    it += it0;
    const int outer = it / inner;
    if (ascending) return m_lo + m_count - 1 - outer;
    const int m = it - outer * inner + rot;
    return m_lo + (m >= m_count ? m - m_count : m);
  }
};

template <class Shape, int kMaskKind, bool kDeterministic>
FMHA_DEVICE FmhaBwdSm90aWork fmha_bwd_sm90a_work(const FmhaBwdParams& p) {
  const FmhaFwdParams& f = p.fwd;
  FmhaBwdSm90aWork w;
  // Only the hdim 64 / 128 kernel without a mask splits (the host keeps split_parts = 0
  // otherwise); every other kernel compiles without it.
  constexpr bool kSplit = Shape::kSplitTail && !kDeterministic && kMaskKind == FMHA_MASK_NONE;
  constexpr bool kSections = !kDeterministic && (kMaskKind == FMHA_MASK_CAUSAL_TOP_LEFT ||
                                                 kMaskKind == FMHA_MASK_CAUSAL_BOTTOM_RIGHT);
  const FmhaBwdKeyTileCta cta =
      fmha_bwd_key_tile_cta<kDeterministic, Shape::kBlockN, kSplit, kSections>(p);
  w.n_block = cta.n_block;
  w.hk = cta.hk;
  w.b = cta.b;
  w.ascending = cta.ascending;
  w.group = f.nhead_q / f.nhead_k;
  const FmhaKeyRange m_tiles =
      fmha_bwd_query_tiles<kMaskKind, Shape::kBlockM, Shape::kBlockN>(w.n_block, f);
  w.m_lo = m_tiles.lo;
  w.m_count = m_tiles.hi > m_tiles.lo ? m_tiles.hi - m_tiles.lo : 0;
  w.num_iters = w.group * w.m_count;
  w.it0 = 0;
  w.part = cta.part;
  w.split_tile = cta.split_tile;
  if (kSplit && cta.part >= 0) {
    const int n = w.num_iters;
    w.it0 = n * cta.part / p.split_parts;
    w.num_iters = n * (cta.part + 1) / p.split_parts - w.it0;
  }
  w.inner = w.ascending ? w.group : max(w.m_count, 1);
  w.rot = kDeterministic ? 0 : w.n_block % w.inner;
  return w;
}

// ---------------------------------------------------------------------------------------------
// Deterministic mode. The semaphore of (b, h, query tile) holds one 16-bit count per dQ round
// (bits 16 r .. 16 r + 15 for round r): the hdim 256 kernel adds a query tile's dQ in two rounds
// of head-dim columns, and with a count each, round 0 of the next key tile runs while this one
// does round 1, instead of the next key tile waiting for both. Every key tile that visits the
// query tile increments each count once (fmha_bwd_sm90a_finish_dq_round), and check_problem
// keeps key tiles <= 65535.

// The CTA's turn at query tile m_block: how many key tiles visit the tile (fmha_bwd_key_tiles)
// and come before this one in the chain's order (the higher key tiles, or the lower on an
// ascending chain). tests/unit/test_bwd_schedule.cpp runs it on the host.
template <int kMaskKind, int kBlockM, int kBlockN>
FMHA_DEVICE int fmha_bwd_sm90a_dq_turn(const FmhaFwdParams& f, const FmhaBwdSm90aWork& w,
                                       int m_block) {
  const FmhaKeyRange tiles = fmha_bwd_key_tiles<kMaskKind, kBlockM, kBlockN>(m_block, f);
  return w.ascending ? w.n_block - tiles.lo : tiles.hi - 1 - w.n_block;
}
