// The work list of the Hopper forward's persistent CTAs (templates/fwd/fmha_fwd_sm90a.h): which
// tile, or which segment of a split tile, a CTA takes on its iter-th turn. The split tail round
// and its partial states are fmha_fwd_sm90a_split.h. Index arithmetic only, no inline PTX:
// tests/unit/test_fwd_schedule.cpp runs it on the host for whole launches.
#pragma once

#include "common/fmha_params.h"
#include "common/mask.h"
#include "common/mask_fragments.h"
#include "common/platform.h"

// One item of a CTA's work: a tile and the key blocks it covers.
struct FmhaFwdSm90aWork {
  int tile;
  int part;     // -1: the whole tile; 0 / 1: the CTA's first / second segment of its split range
  int n_begin;  // key blocks [n_begin, n_end) of a segment
  int n_end;
};

// Tile t of the persistent work list. Causal masks make higher m-blocks heavier (they see more
// keys), so those run first, across the heads of a section (P.causal_section_heads (batch, head)
// pairs; the last section may be short), and the light ones fill the section's tail; otherwise
// the m-blocks of one head are adjacent, so concurrently running CTAs share its K and V in L2.
template <int kMaskKind>
FMHA_DEVICE void fmha_fwd_sm90a_tile(const FmhaFwdSm90Params& P, int t, int& m_block, int& h,
                                     int& b) {
  const bool heavy_first =
      kMaskKind == FMHA_MASK_CAUSAL_TOP_LEFT || kMaskKind == FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
  const int num_m_blocks = P.num_m_blocks;
  const int nhead_q = P.fwd.nhead_q;
  int bh;
  if (heavy_first) {
    const int heads = nhead_q * P.fwd.batch;
    const int per_section = P.causal_section_heads;
    const int section = t / (num_m_blocks * per_section);
    const int first = section * per_section;
    const int size = heads - first < per_section ? heads - first : per_section;
    const int in_section = t - first * num_m_blocks;
    const int heavy = in_section / size;
    m_block = num_m_blocks - 1 - heavy;
    bh = first + (in_section - heavy * size);
  } else {
    m_block = t % num_m_blocks;
    bh = t / num_m_blocks;
  }
  h = bh % nhead_q;
  b = bh / nhead_q;
}

// The list index of this CTA's tile in its round-th turn. Under a causal mask the list runs from
// heavy to light, so CTA c taking c, c + grid, c + 2 grid, ... would give the low CTAs the heavier
// tile of every round (about 6 % more work than the mean at hdim 128, S 8192, as a tail where the
// other SMs idle). Odd rounds therefore run the list backwards across the CTAs (boustrophedon),
// which pairs each round's heaviest tile with the next round's lightest: within 0.5 % of the mean
// in a model of the grid's causal rows, with no atomics and no reset between launches.
template <int kMaskKind>
FMHA_DEVICE int fmha_fwd_sm90a_tile_index(int round) {
  const bool snake =
      kMaskKind == FMHA_MASK_CAUSAL_TOP_LEFT || kMaskKind == FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
  const int grid = static_cast<int>(gridDim.x);
  const int cta = fmha_block_idx_x();
  return round * grid + (snake && (round & 1) ? grid - 1 - cta : cta);
}

// First key block of CTA c's range in the split round: floor(c L / split_ctas), where split_ctas
// = min(grid, L) gives every splitting CTA at least one block (a CTA with none would count as a
// segment of a tile and never arrive). 32-bit arithmetic (the host splits only where
// (L + 1) x split_ctas < 2^31): the producer warp runs this with 24 registers, where 64-bit
// divisions spilled.
FMHA_DEVICE int fmha_fwd_sm90a_split_lo(const FmhaFwdSm90Params& P, int c) {
  return P.split_tiles * P.split_blocks * c / P.split_ctas;
}

// The first tile of the split round.
FMHA_DEVICE int fmha_fwd_sm90a_split_first_tile(const FmhaFwdSm90Params& P) {
  return P.split_round * static_cast<int>(gridDim.x);
}

// Whether this CTA's iter-th item is a segment of the split round. Only unmasked problems split
// (the host sets split_tiles = 0 otherwise), so every masked kernel compiles without the round.
template <int kMaskKind>
FMHA_DEVICE bool fmha_fwd_sm90a_in_split(const FmhaFwdSm90Params& P, int iter) {
  return kMaskKind == FMHA_MASK_NONE && P.split_tiles > 0 && iter >= P.split_round;
}

// This CTA's iter-th item; false once it has none left. The producer and the consumers walk the
// same list, so they agree on every item and on its Q buffer (iter % Q buffers).
template <int kMaskKind>
FMHA_DEVICE bool fmha_fwd_sm90a_work(const FmhaFwdSm90Params& P, int iter, FmhaFwdSm90aWork& w) {
  constexpr bool kCausal =
      kMaskKind == FMHA_MASK_CAUSAL_TOP_LEFT || kMaskKind == FMHA_MASK_CAUSAL_BOTTOM_RIGHT;
  if (kCausal && P.tile_order != nullptr) {
    // The host's plan: tiles of unequal work dealt so that the CTAs finish together.
    if (iter >= P.tile_order_rounds) return false;
    w.tile = P.tile_order[iter * static_cast<int>(gridDim.x) + fmha_block_idx_x()];
    w.part = -1;
    return w.tile >= 0;
  }
  if (!fmha_fwd_sm90a_in_split<kMaskKind>(P, iter)) {
    w.tile = fmha_fwd_sm90a_tile_index<kMaskKind>(iter);
    w.part = -1;
    return w.tile < P.num_tiles;
  }
  const int seg = iter - P.split_round;
  const int c = fmha_block_idx_x();
  if (c >= P.split_ctas) return false;
  const int lo = fmha_fwd_sm90a_split_lo(P, c);
  const int hi = fmha_fwd_sm90a_split_lo(P, c + 1);
  const int blocks = P.split_blocks;
  const int u = lo / blocks + seg;  // split tile of this segment
  const int begin = seg == 0 ? lo : u * blocks;
  if (seg > 1 || begin >= hi) return false;
  const int end = hi < (u + 1) * blocks ? hi : (u + 1) * blocks;
  w.tile = fmha_fwd_sm90a_split_first_tile(P) + u;
  w.part = seg;
  w.n_begin = begin - u * blocks;
  w.n_end = end - u * blocks;
  return true;
}

// The key blocks an item covers: the tile's own, or the segment's.
FMHA_DEVICE FmhaBlockKeys fmha_fwd_sm90a_work_keys(const FmhaFwdSm90aWork& w, FmhaBlockKeys keys) {
  if (w.part >= 0) {
    keys.n_block_begin = w.n_begin;
    keys.n_block_end = w.n_end;
  }
  return keys;
}

// Where one consumer warpgroup's rows stop within its tile's key blocks. A causal or window mask
// cuts a tile's last key blocks along a diagonal that the tile's later rows reach and its first
// rows do not: the warpgroup of rows [r0, r0 + 64) sees no key at or past hi(its last valid row),
// so the blocks from ceil(hi / kBlockN) on hold no score it keeps (the warpgroup skips their
// MMAs), and in a 128-key block whose visible keys are all among its first 64, P is zero past
// them (its P V stops there). Causal, 128 x 128 tiles: the first warpgroup's diagonal block
// runs half its P V; 128 x 64 tiles (hdim 256, short causal): the first warpgroup skips the
// diagonal's second block. Unmasked tiles, and warpgroups with no valid row, keep the tile's.
struct FmhaFwdSm90aWgKeys {
  int n_end;    // one past the warpgroup's last key block, in (n_block_begin, n_block_end]
  bool narrow;  // block n_end - 1 is visible to these rows in its first 64 keys only
};

template <int kMaskKind, int kBlockN, class Params>
FMHA_DEVICE FmhaFwdSm90aWgKeys fmha_fwd_sm90a_wg_keys(const FmhaBlockKeys& keys, int wg_row_first,
                                                      const Params& p) {
  FmhaFwdSm90aWgKeys r;
  r.n_end = keys.n_block_end;
  r.narrow = false;
  if (kMaskKind == FMHA_MASK_NONE || keys.n_block_end <= keys.n_block_begin ||
      wg_row_first >= p.seqlen_q) {
    return r;
  }
  const int row_last = wg_row_first + 63 < p.seqlen_q ? wg_row_first + 63 : p.seqlen_q - 1;
  const int hi =
      fmha_visible_keys(kMaskKind, row_last, p.seqlen_q, p.seqlen_k, p.window_left, p.window_right)
          .hi;
  int end = (hi + kBlockN - 1) / kBlockN;
  if (end > keys.n_block_end) end = keys.n_block_end;
  // At least one block, so that the S-then-P V pipeline keeps its shape; rows that see nothing
  // here are masked in it as before.
  if (end < keys.n_block_begin + 1) end = keys.n_block_begin + 1;
  r.n_end = end;
  r.narrow = kBlockN == 128 && hi <= (end - 1) * kBlockN + 64;
  return r;
}

// The CTA whose split range holds key block x of the r tiles laid end to end: the largest c with
// floor(c L / split_ctas) <= x, i.e. ceil((x + 1) split_ctas / L) - 1.
FMHA_DEVICE int fmha_fwd_sm90a_split_owner(const FmhaFwdSm90Params& P, int x) {
  const int length = P.split_tiles * P.split_blocks;
  return ((x + 1) * P.split_ctas + length - 1) / length - 1;
}
