// The element-wise mask on score fragments in the mma.sync m16n8 accumulator layout, which is also
// one warp's slice of a wgmma m64 accumulator (sm90/wgmma_sm90a.h): lane l holds rows l / 4 and
// l / 4 + 8 of each m16 tile and columns 2 (l % 4) + {0, 1} of each n8 fragment.
#pragma once

#include "common/fmha_params.h"
#include "common/mask.h"
#include "common/mask_i32.h"
#include "common/platform.h"

// Sets to -inf the scores whose key is not visible to their row (including keys past seqlen_k,
// which the loads zero-filled and which must not count). row0 is the query row of this lane's
// first fragment row (m16 tile 0, row lane / 4), n0 the tile's first key.
template <int kMaskKind, int kMT, int kNT, class Params>
FMHA_DEVICE void fmha_mask_fragments(float (&s)[kMT][kNT][4], int row0, int n0, int lane,
                                     const Params& p) {
  // Bounds are made relative to this lane's first column so that each test compares against a
  // compile-time column offset: two subtractions per row instead of an index per score.
  const int col0 = n0 + (lane & 3) * 2;
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const FmhaKeyRange kr = fmha_row_keys_i32<kMaskKind>(row0 + mt * 16 + hf * 8, p);
      const int lo = kr.lo - col0;
      const int hi = kr.hi - col0;
#pragma unroll
      for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int c = nt * 8 + e;
          // Only the sliding window has a lower bound (elsewhere lo is 0 <= col).
          const bool below = kMaskKind == FMHA_MASK_SLIDING_WINDOW && c < lo;
          if (below || c >= hi) s[mt][nt][2 * hf + e] = fmha_neg_inf();
        }
      }
    }
  }
}

// The key tiles a block of query rows [m0, m0 + kBlockM) visits, and the keys every valid row of
// it sees. Key ranges are monotone in the row, so the union over the block's valid rows is
// [lo(first row), hi(last row)), and the keys visible to every valid row are
// [lo(last row), hi(first row)): tiles inside the latter need no element-wise mask.
struct FmhaBlockKeys {
  int n_block_begin;  // first key tile
  int n_block_end;    // one past the last; equal to n_block_begin when no row sees a key
  int full_lo;        // keys [full_lo, full_hi) are visible to every valid row
  int full_hi;
};

template <int kMaskKind, int kBlockM, int kBlockN, class Params>
FMHA_DEVICE FmhaBlockKeys fmha_block_keys(int m0, const Params& p) {
  const int rows_valid = p.seqlen_q - m0;
  const int row_last = (rows_valid < kBlockM ? p.seqlen_q : m0 + kBlockM) - 1;
  const FmhaKeyRange first =
      fmha_visible_keys(kMaskKind, m0, p.seqlen_q, p.seqlen_k, p.window_left, p.window_right);
  const FmhaKeyRange last =
      fmha_visible_keys(kMaskKind, row_last, p.seqlen_q, p.seqlen_k, p.window_left, p.window_right);
  FmhaBlockKeys k;
  k.n_block_begin = first.lo / kBlockN;
  k.n_block_end = last.hi > first.lo ? (last.hi + kBlockN - 1) / kBlockN : k.n_block_begin;
  k.full_lo = last.lo;
  k.full_hi = first.hi;
  return k;
}
