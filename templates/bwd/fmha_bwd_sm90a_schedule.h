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
// own pair. The hardware dispatches CTAs in linear index order. With one pair per group (the atomic
// order, reversed) every wave re-creates the chains' stagger: the CTAs that finish first are
// replaced by later chain positions of the next pair, which wait for its earlier ones. With groups
// of as many pairs as fill the GPU, chain by chain (floor(SMs / num_n), the host's choice without a
// mask; one more for chains of 32 key tiles or more, kernels/wgmma_sm90a/bwd_schedule.cpp), the
// CTAs of one position finish at about the same time and are replaced by the same position of the
// next group, which finds its predecessors started one link earlier: the stagger is paid once.
// Larger groups would spread the resident CTAs over more heads, and their Q and dO no longer stay
// in L2 for the other key tiles of the head (all heads in one group measured 0.66 x at hdim 128, S
// 8192, causal). Under causal masks the chains are staggered by the mask itself (fmha_bwd_sm80.h);
// the host groups pairs there only as the atomic mode's sections below (bwd_causal_sections), and
// not where the chains walk. Under causal masks the decreasing order launches each pair's smallest
// key tiles first and its largest (n_block 0, every query tile) last, so the last pair's largest
// tiles would run nearly alone at the end of the grid. The last det_asc_pairs pairs (the host's
// choice: one under causal masks with at most 16 pairs, or the last section's;
// kernels/wgmma_sm90a/bwd_schedule.cpp) therefore take their chains the other way: increasing key
// tiles, n_block = k, largest first, as the atomic mode launches them. Their CTAs walk their query
// tiles downwards and over the query heads innermost (FmhaBwdSm90aWork), so that the CTA before
// them in the chain, whose extra query tiles are the lowest, reaches every shared tile at the same
// step. The waits still point to lower linear indices only (the same pair, lower k), which is what
// the no-deadlock argument of fmha_bwd_sm80.h needs. Which pairs ascend depends on the problem
// only, so the order of every addition, and dQ bit for bit, does not depend on the GPU's SM count.
// Where the chains walk (GQA, below) and pairs run one after another, each pair's CTAs start as the
// previous pair's finish: with every chain decreasing, the previous pair's smallest key tiles end
// first and one at a time, so consecutive key tiles of the next pair start one tile's difference in
// work apart (8 query-tile visits at GQA 32:8) and revisit each query tile that much later, by when
// its Q, dO and dQ sums have left L2 (a trace at GQA S 16384: the first pair, whose CTAs all start
// at once, waited and stalled like the atomic mode; the others polled 0.5-0.6 us per visit against
// 0.3, and L2 hit 84 % of accesses against 92 %). With det_alternate the odd pairs ascend: their
// largest tiles take the SMs the previous pair's smallest free, so each SM's two CTAs of a pair of
// pairs add up to about the same work and the next even pair's chain starts nearly at once, in the
// walk's lockstep. Atomic mode under a causal mask: a 1-D grid in sections of causal_section_pairs
// pairs, grouped as above with n_block = k, so each section runs its key tiles largest first, all
// of its pairs at each key tile. In the 3-D grid's order (one section per pair) each pair's largest
// key tile starts only after every earlier pair's tiles: the last pair's tile 0, a quarter of an
// SM's work at GQA 32:8 S 8192 (2 x 8 pairs of 64 key tiles on 132 SMs), then ends ~11 % after the
// rest (the host's model, kernels/wgmma_sm90a/bwd_sections.cpp, which picks the section size). A
// section spans no more pairs than the 3-D order runs at once (SMs / key tiles), so that the
// resident CTAs still share their heads' Q, dO and dQ sums in L2: 32 pairs where 8 ran together
// lost 3.4 % at hdim 128 S 2048 (H100; docs/METHOD.md, "Hopper backward launch order"). Atomic mode
// with a split tail (p.split_parts > 0): a 1-D grid. The key tiles run in the 3-D grid's order (key
// tile fastest, then kv head, then batch), whole up to linear index split_first; each later key
// tile runs as split_parts CTAs, part q taking iterations [q n / parts, (q + 1) n / parts) of its n
// (fmha_bwd_sm90a_work). The launch's last partial wave would otherwise leave SMs idle for a whole
// key tile's time (hdim 128, S 8192, 2 x 16 heads: 2048 key tiles on 132 SMs are 15.5 waves);
// smaller parts spread that wave over every SM. Each part adds its dK and dV to an fp32 workspace,
// and the last to arrive writes them (fmha_bwd_sm90a_split_dkdv).
struct FmhaBwdKeyTileCta {
  int n_block, hk, b;
  bool ascending;  // deterministic mode: this pair's chain runs in increasing key tiles
  bool asc_walks;  // ascending, and walks with det_asc_walk_up cells first
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
    const int linear = fmha_block_idx_x();
    // A tail group (deterministic, det_tail_pairs > 0): the lead pairs one per group, then the
    // last det_tail_pairs pairs as one group.
    const int tail = kDeterministic ? p.det_tail_pairs : 0;
    const int lead = tail > 0 ? pairs - tail : pairs;
    FmhaBwdGroupedCta g;
    if (tail > 0 && linear >= lead * num_n) {
      g = fmha_bwd_grouped_cta(linear - lead * num_n, num_n, tail, tail);
      g.pair += lead;
    } else {
      g = fmha_bwd_grouped_cta(linear, num_n, lead,
                               tail > 0         ? 1
                               : kDeterministic ? p.det_group_heads
                                                : p.causal_section_pairs);
    }
    const bool alternates = kDeterministic && p.det_alternate && g.pair % 2 == 1;
    c.ascending = kDeterministic && (g.pair >= pairs - p.det_asc_pairs || alternates);
    c.asc_walks =
        alternates && p.det_asc_walk_up > 0 && g.pair >= p.det_asc_walk_from && g.pair < lead;
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
    c.asc_walks = false;
  } else {
    c.n_block = fmha_block_idx_x();
    c.hk = fmha_block_idx_y();
    c.b = fmha_block_idx_z();
    c.ascending = false;
    c.asc_walks = false;
    c.part = -1;
    c.split_tile = 0;
  }
  return c;
}

// ---------------------------------------------------------------------------------------------
// The CTA's work: key tile, kv head, batch, and the (query head, query tile) pairs it visits:
// head-major with the query tiles upwards, or, on a deterministic chain in increasing key tiles
// (fmha_bwd_key_tile_cta), query tiles downwards with the heads innermost, or, on a decreasing
// deterministic chain under a causal mask, the up-down walk below. Every role derives it from the
// same call, so their loops agree. Iteration `it` splits once into an outer and an inner index by
// `inner` (m_count, or group when ascending): one division per iteration whichever of the first
// two orders; selecting between two orders' divisions cost the non-ascending chains 2-4 %
// (H200). In the atomic mode each CTA starts its query tiles at offset `rot` (its key tile
// modulo their count) and wraps around: without it, every key tile of a head would reduce-add into
// the same dQ tile at the same time (non-causal masks), and those adds queue at the same L2 lines.
// The deterministic mode keeps rot = 0: its chains already put neighbouring key tiles one query
// tile apart, and their order is what the semaphores count.
//
// The up-down walk (deterministic, causal, decreasing chain, FmhaBwdParams::det_up_cells = u > 0).
// Key tile k of a causal chain sees the query tiles [lo(k), end), and lo never decreases with k, so
// the cells (query head, query tile) of the tiles [lo(k), lo(k + 1)) are k's own: in the decreasing
// order k adds there first and waits for nobody (the chain's top K owns [lo(K), end)). Head-major,
// CTA k visits a cell 2 (h + 1) iterations after CTA k + 1 did at query head h of a 128-key /
// 64-query tile (plus the launch's stagger between them), so at GQA 32:8 each Q, dO and dQ tile of
// the later heads is touched again only after the GPU has streamed 4-10 iterations' worth of tiles
// (~8 MB each) through L2, where MHA's single head waits 2. That reuse distance was the hypothesis
// for why the deterministic GQA causal rows ran at 0.73-0.86 x the atomic mode while MHA ran at
// 0.91-0.97 and GQA without a mask (every chain in step on the same query tile) at 0.92-0.99; the
// walk took GQA 32:8 causal S 512-16384 +9-15 % (H100; docs/METHOD.md, "Hopper backward launch
// order"). The walk of CTA n is defined by W(n) = [the first u of n's own cells] W(n + 1) [n's
// other own cells], W(K) = K's own cells, each own set query tile by query tile with the heads
// innermost: every cell n shares with n + 1 comes exactly u iterations later in n's walk than in n
// + 1's. So u iterations separate the chain's visits of a cell (the slack that hides one link's
// release behind the next CTA's work), and the walk goes up through the first u cells of each own
// set, then down through the rest. The order of the additions, and dQ bit for bit, stay those of
// the decreasing chain (the turns count key tiles, not iterations). Index arithmetic: under causal
// masks a key tile moves the diagonal by kBlockN rows, so lo(k + 1) - lo(k) is at most r = kBlockN
// / kBlockM, and exactly r between the first key tile with own cells at or above the CTA's (k0:
// below it, in the bottom-right mask's clamped corner, the tiles see the same query tiles and own
// none) and the top K. fmha_bwd_sm90a_plan_walk checks lo(K) = lo(k0 + 1) + r (K - k0 - 1), which
// with steps of at most r proves every step between, and keeps the head-major order if it fails. An
// ascending chain's CTA (det_alternate) walks the same W(n) with f = det_asc_walk_up cells first
// where the host asks for it: there key tile n + 1 adds after n, and where it starts s iterations
// after n (the spacing kernels/wgmma_sm90a/bwd_sections.cpp models), it trails n by s - f at every
// cell they share, which the host makes u. The turns still count key tiles.
struct FmhaBwdSm90aVisit {
  int head, m_block;
};

struct FmhaBwdSm90aWork {
  int n_block, hk, b, group, m_lo, m_count;
  int num_iters;         // this CTA's iterations: the key tile's, or its part's
  int it0;               // the first of them in the key tile's list (0 unless a later part)
  int inner;             // iterations per outer step: the inner loop's length
  int rot;               // the first query tile's offset in [0, m_count)
  int part, split_tile;  // FmhaBwdKeyTileCta
  bool ascending;
  bool asc_walks;  // FmhaBwdKeyTileCta
  // The visit of iteration `it` in the head-major or the ascending chain's order.
  FMHA_DEVICE FmhaBwdSm90aVisit visit(int it) const {
    it += it0;
    const int outer = it / inner;
    const int in = it - outer * inner;
    FmhaBwdSm90aVisit v;
    v.head = hk * group + (ascending ? in : outer);
    if (ascending) {
      v.m_block = m_lo + m_count - 1 - outer;
    } else {
      const int m = in + rot;
      v.m_block = m_lo + (m >= m_count ? m - m_count : m);
    }
    return v;
  }
  FMHA_DEVICE int head(int it) const { return visit(it).head; }
  FMHA_DEVICE int m_block(int it) const { return visit(it).m_block; }
};

// The up-down walk of one CTA: its chain's key tiles k0 .. K (k0 the first at or above the CTA's
// own that owns cells), with u cells up (up = 0: the CTA keeps FmhaBwdSm90aWork's order). One
// thread plans it and stores it in shared memory, and every role reads the fields per iteration
// (FmhaBwdSm90aWalkSmem, fmha_bwd_sm90a_common.h): held in registers across the loop they
// spilled the producer warp's 40 (rtc test).
struct FmhaBwdSm90aWalk {
  enum Field {
    kUp,       // u; 0: the walk does not apply
    kUpK0,     // k0's cells on the way up: min(u, its own)
    kUpTop,    // K's cells on the way up (as kUpK0 when K = k0)
    kUpCells,  // the way up's length
    kDownTop,  // K's other own cells
    kDownMid,  // the other own cells of a tile between k0 and K (>= 1)
    kMids,     // tiles between: K - k0 - 1 (-1 when K = k0)
    kLoK0,     // lo(k0)
    kLoNext,   // lo(k0 + 1); lo(k) = lo(k0 + 1) + r (k - k0 - 1) up to K
    kLoTop,    // lo(K)
    kFields,
  };
  int field[kFields];
  FMHA_DEVICE int operator[](int i) const { return field[i]; }
};
enum { kFmhaBwdSm90aWalkBytes = 64 };  // shared memory the kernels reserve for it
static_assert(sizeof(FmhaBwdSm90aWalk) <= kFmhaBwdSm90aWalkBytes, "walk fits its reservation");

// The up-down walk of CTA w, or up = 0 where it does not apply. Binary searches over the mask's
// tile functions, once per CTA.
template <int kMaskKind, int kBlockM, int kBlockN>
FMHA_DEVICE FmhaBwdSm90aWalk fmha_bwd_sm90a_plan_walk(const FmhaBwdSm90aWork& w,
                                                      const FmhaFwdParams& f, int up) {
  FmhaBwdSm90aWalk walk;
  for (int i = 0; i < FmhaBwdSm90aWalk::kFields; ++i) walk.field[i] = 0;
  const bool causal =
      kMaskKind == FMHA_MASK_CAUSAL_TOP_LEFT || kMaskKind == FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
  if (!causal || up <= 0 || w.m_count <= 0 || (w.ascending && !w.asc_walks)) return walk;
  const int end = w.m_lo + w.m_count;  // every causal row ends at the last query tile
  // lo(k) for k >= n_block: fmha_bwd_query_tiles(k).lo, the first query tile whose key tiles
  // reach past k, searched in [m_lo, end] only (lo never decreases with k) and without the upper
  // end's second search: thread 0 runs this before the CTA's first barrier, so every role waits
  // for it.
  auto lo = [&](int k) {
    return fmha_bwd_first_query_tile_past<kMaskKind, kBlockM, kBlockN>(k, w.m_lo, end, f);
  };
  // K: the highest key tile the last query tile sees; k0: the first k >= n_block whose next tile
  // starts higher, n_block itself unless the CTA is in the bottom-right mask's clamped corner
  // (then a binary search: lo(k + 1) > m_lo is monotone in k).
  const int top = fmha_bwd_key_tiles<kMaskKind, kBlockM, kBlockN>(end - 1, f).hi - 1;
  int k0 = w.n_block;
  int lo_next = lo(k0 + 1);
  if (lo_next <= w.m_lo) {
    int a = w.n_block + 1, z = top;
    while (a < z) {
      const int mid = (a + z) / 2;
      if (lo(mid + 1) > w.m_lo)
        z = mid;
      else
        a = mid + 1;
    }
    k0 = a;
    lo_next = lo(k0 + 1);
  }
  const int ratio = kBlockN / kBlockM;
  up = min(up, w.group * ratio);  // a tile between k0 and K owns group x ratio cells
  const int lo_top = lo(top);
  if (top < k0 || lo_top != (top == k0 ? w.m_lo : lo_next + ratio * (top - k0 - 1))) return walk;
  const int own_k0 = w.group * ((top == k0 ? end : lo_next) - w.m_lo);
  const int own_top = w.group * (end - lo_top);
  const int up_k0 = min(up, own_k0);
  const int up_top = top == k0 ? up_k0 : min(up, own_top);
  walk.field[FmhaBwdSm90aWalk::kUp] = up;
  walk.field[FmhaBwdSm90aWalk::kUpK0] = up_k0;
  walk.field[FmhaBwdSm90aWalk::kUpTop] = up_top;
  walk.field[FmhaBwdSm90aWalk::kUpCells] = top == k0 ? up_k0 : up_k0 + up * (top - k0 - 1) + up_top;
  walk.field[FmhaBwdSm90aWalk::kDownTop] = own_top - up_top;
  walk.field[FmhaBwdSm90aWalk::kDownMid] = max(w.group * ratio - up, 1);
  walk.field[FmhaBwdSm90aWalk::kMids] = top - k0 - 1;
  walk.field[FmhaBwdSm90aWalk::kLoK0] = w.m_lo;
  walk.field[FmhaBwdSm90aWalk::kLoNext] = lo_next;
  walk.field[FmhaBwdSm90aWalk::kLoTop] = lo_top;
  return walk;
}

// The u a CTA's walk is planned with: det_up_cells on decreasing chains, det_asc_walk_up on
// ascending ones (fmha_bwd_sm90a_plan_walk plans none for an ascending CTA that does not walk).
FMHA_DEVICE int fmha_bwd_sm90a_walk_up(const FmhaBwdParams& p, const FmhaBwdSm90aWork& w) {
  return w.ascending ? p.det_asc_walk_up : p.det_up_cells;
}

// Iteration `it` of the up-down walk: the own set of the key tile it falls in, and the cell in
// it. `walk` is an FmhaBwdSm90aWalk, or the kernel's reader of the one in shared memory.
template <int kRatio, class Walk>
FMHA_DEVICE FmhaBwdSm90aVisit fmha_bwd_sm90a_walk_visit(const Walk& walk, int it, int group,
                                                        int hk) {
  typedef FmhaBwdSm90aWalk W;
  int cell, lo;
  const int up_cells = walk[W::kUpCells];
  if (it < up_cells) {
    const int up_k0 = walk[W::kUpK0];
    if (it < up_k0) {
      cell = it;
      lo = walk[W::kLoK0];
    } else {  // a tile above k0, K's included: lo(k0 + 1 + q)
      const int up = walk[W::kUp];
      const int q = (it - up_k0) / up;
      cell = it - up_k0 - q * up;
      lo = walk[W::kLoNext] + kRatio * q;
    }
  } else {
    const int d = it - up_cells;
    const int down_top = walk[W::kDownTop];
    if (d < down_top) {
      cell = walk[W::kUpTop] + d;
      lo = walk[W::kLoTop];
    } else {  // K - 1 - q, down to k0
      const int e = d - down_top;
      const int down_mid = walk[W::kDownMid];
      const int q = e / down_mid;
      const int mids = walk[W::kMids];
      cell = (q < mids ? walk[W::kUp] : walk[W::kUpK0]) + e - q * down_mid;
      lo = q < mids ? walk[W::kLoNext] + kRatio * (mids - 1 - q) : walk[W::kLoK0];
    }
  }
  const int row = cell / group;
  FmhaBwdSm90aVisit v;
  v.head = hk * group + cell - row * group;
  v.m_block = lo + row;
  return v;
}

// The visit of iteration `it`: the walk's where `walks` (its up field, read once), else the
// work's order.
template <int kRatio, class Walk>
FMHA_DEVICE FmhaBwdSm90aVisit fmha_bwd_sm90a_visit(const FmhaBwdSm90aWork& w, const Walk& walk,
                                                   bool walks, int it) {
  return walks ? fmha_bwd_sm90a_walk_visit<kRatio>(walk, it, w.group, w.hk) : w.visit(it);
}

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
  w.asc_walks = cta.asc_walks;
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
