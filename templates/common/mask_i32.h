// The visible key range of one query row in 32-bit arithmetic, for element-wise mask tests inside
// the tensor-core kernels' loops (forward and backward): mask.h's fmha_visible_keys works in 64
// bits, which costs enough temporaries there to push the largest tiles into spills.
//
// The window sizes are clamped to Sq + Sk, beyond which they no longer change the range, so nothing
// overflows while Sq + Sk stays below 2^30. hi is clamped to seqlen_k; lo is not clamped to 0 and
// hi may fall below lo for a row that sees nothing (or a padding row past seqlen_q): only the
// comparisons lo <= j < hi for keys j >= 0 are meaningful.
#pragma once

#include "common/fmha_params.h"
#include "common/mask.h"
#include "common/platform.h"

template <int kMaskKind, class Params>
FMHA_DEVICE FmhaKeyRange fmha_row_keys_i32(int i, const Params& p) {
  FmhaKeyRange r;
  r.lo = 0;
  r.hi = p.seqlen_k;
  const int diag = i + p.seqlen_k - p.seqlen_q;  // bottom-right diagonal
  const int limit = p.seqlen_q + p.seqlen_k;
  if (kMaskKind == FMHA_MASK_CAUSAL_TOP_LEFT) {
    r.hi = min(i + 1, p.seqlen_k);
  } else if (kMaskKind == FMHA_MASK_CAUSAL_BOTTOM_RIGHT) {
    r.hi = min(diag + 1, p.seqlen_k);
  } else if (kMaskKind == FMHA_MASK_SLIDING_WINDOW) {
    if (p.window_left >= 0) r.lo = diag - min(p.window_left, limit);
    if (p.window_right >= 0) r.hi = min(diag + min(p.window_right, limit) + 1, p.seqlen_k);
  }
  return r;
}
