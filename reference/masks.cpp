#include "masks.hpp"

namespace fmha_jit::reference {

bool key_visible(const AttentionShape& s, int i, int j) {
  // 64-bit: a window as large as INT_MAX ("everything") must not overflow.
  const long long diagonal = static_cast<long long>(i) + s.seqlen_k - s.seqlen_q;
  switch (s.mask_kind) {
    case kMaskCausalTopLeft: return j <= i;
    case kMaskCausalBottomRight: return j <= diagonal;
    case kMaskSlidingWindow: {
      const bool left_ok = s.window_left == -1 || j >= diagonal - s.window_left;
      const bool right_ok = s.window_right == -1 || j <= diagonal + s.window_right;
      return left_ok && right_ok;
    }
    default: return true;
  }
}

IndexSpan visible_key_span(const AttentionShape& s, int i) {
  int lo = 0;
  while (lo < s.seqlen_k && !key_visible(s, i, lo)) ++lo;
  int hi = s.seqlen_k;
  while (hi > lo && !key_visible(s, i, hi - 1)) --hi;
  return {lo, hi};
}

IndexSpan visible_query_span(const AttentionShape& s, int j) {
  int lo = 0;
  while (lo < s.seqlen_q && !key_visible(s, lo, j)) ++lo;
  int hi = s.seqlen_q;
  while (hi > lo && !key_visible(s, hi - 1, j)) --hi;
  return {lo, hi};
}

}  // namespace fmha_jit::reference
