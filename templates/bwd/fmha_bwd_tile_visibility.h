// Tile-level visibility of the masks, for every backward kernel: which key tiles a query tile
// sees, which query tiles visit a key tile, which queries see a key. One definition for the skip
// test and the semaphore counts of the deterministic mode, so a CTA never waits for a key tile
// that does not visit the query tile. No inline PTX, so host tests run it as well
// (tests/unit/test_bwd_schedule.cpp).
#pragma once

#include "common/fmha_params.h"
#include "common/mask.h"
#include "common/mask_i32.h"
#include "common/platform.h"

// Key tiles [lo, hi) that query tile m_block sees (empty when hi <= lo). The visible keys of a
// row are an interval whose ends never decrease with the row, and consecutive rows' intervals
// overlap or touch, so the union over the tile's valid rows is [lo(first), hi(last)), and every
// key tile meeting it is seen by some row. A first row whose interval starts at or past seqlen_k
// means no row sees anything. Both ends never decrease with m_block.
template <int kMaskKind, int kBlockM, int kBlockN, class Params>
FMHA_DEVICE FmhaKeyRange fmha_bwd_key_tiles(int m_block, const Params& p) {
  const int num_n = (p.seqlen_k + kBlockN - 1) / kBlockN;
  FmhaKeyRange r;
  r.lo = 0;
  r.hi = num_n;
  if (kMaskKind != FMHA_MASK_NONE) {
    const int first = m_block * kBlockM;
    const int last = min(first + kBlockM, p.seqlen_q) - 1;
    // fmha_row_keys_i32: lo clamped to 0 here; a negative hi (rows before any key) gives an
    // end <= 0; hi is not raised to lo for rows past the last key, which only moves an end that
    // is clamped to num_n anyway.
    const int lo = max(fmha_row_keys_i32<kMaskKind>(first, p).lo, 0);
    const int hi = fmha_row_keys_i32<kMaskKind>(last, p).hi;
    r.lo = lo >= p.seqlen_k ? num_n : lo / kBlockN;
    r.hi = hi <= 0 ? 0 : min((hi + kBlockN - 1) / kBlockN, num_n);
  }
  return r;
}

// The first query tile m in [a, b) whose key tiles reach past n_block (hi(m) > n_block of the
// function above), or with kLowEnd the first that starts past it (lo(m) > n_block), or b: a
// binary search, since neither end ever decreases with m.
template <int kMaskKind, int kBlockM, int kBlockN, bool kLowEnd = false, class Params>
FMHA_DEVICE int fmha_bwd_first_query_tile_past(int n_block, int a, int b, const Params& p) {
  while (a < b) {
    const int mid = (a + b) / 2;
    const FmhaKeyRange seen = fmha_bwd_key_tiles<kMaskKind, kBlockM, kBlockN>(mid, p);
    if ((kLowEnd ? seen.lo : seen.hi) > n_block)
      b = mid;
    else
      a = mid + 1;
  }
  return a;
}

// Query tiles [lo, hi) that visit key tile n_block: {m : lo(m) <= n_block < hi(m)} of the
// function above, found by binary search on its two monotone ends.
template <int kMaskKind, int kBlockM, int kBlockN, class Params>
FMHA_DEVICE FmhaKeyRange fmha_bwd_query_tiles(int n_block, const Params& p) {
  const int num_m = (p.seqlen_q + kBlockM - 1) / kBlockM;
  FmhaKeyRange r;
  r.lo = 0;
  r.hi = num_m;
  if (kMaskKind != FMHA_MASK_NONE) {
    r.lo = fmha_bwd_first_query_tile_past<kMaskKind, kBlockM, kBlockN>(n_block, 0, num_m, p);
    // Searched from r.lo: lo(m) <= n_block before it.
    r.hi =
        fmha_bwd_first_query_tile_past<kMaskKind, kBlockM, kBlockN, true>(n_block, r.lo, num_m, p);
  }
  return r;
}

// Queries [lo, hi) that see key j: fmha_visible_keys (mask.h) solved for the row, exact for keys
// in [0, seqlen_k) (its clamps only ever cut keys outside that range); keys past seqlen_k (tile
// padding) are seen by nobody. 32-bit, with the windows clamped as in fmha_row_keys_i32; the
// upper end may exceed seqlen_q (padding rows, harmless).
template <int kMaskKind, class Params>
FMHA_DEVICE FmhaKeyRange fmha_bwd_key_queries(int j, const Params& p) {
  FmhaKeyRange r;
  r.lo = 0;
  r.hi = p.seqlen_q;
  const int shift = p.seqlen_k - p.seqlen_q;  // bottom-right diagonal
  const int limit = p.seqlen_q + p.seqlen_k;
  if (kMaskKind == FMHA_MASK_CAUSAL_TOP_LEFT) {
    r.lo = j;
  } else if (kMaskKind == FMHA_MASK_CAUSAL_BOTTOM_RIGHT) {
    r.lo = j - shift;
  } else if (kMaskKind == FMHA_MASK_SLIDING_WINDOW) {
    if (p.window_right >= 0) r.lo = j - shift - min(p.window_right, limit);
    if (p.window_left >= 0) r.hi = j - shift + min(p.window_left, limit) + 1;
  }
  if (j >= p.seqlen_k) r.hi = r.lo;
  return r;
}
