// Attention masks, shared by every kernel family and mirrored by the CPU reference.
//
// Coordinates: query row i in [0, Sq), key column j in [0, Sk). The bottom-right alignment shifts
// the diagonal by Sk - Sq so that the last query sees the last key, as FlashAttention does.
#pragma once

#ifndef FMHA_HOST_DEVICE
#if defined(__CUDACC__) || defined(__HIPCC__) || defined(__CUDACC_RTC__) || defined(__HIPCC_RTC__)
#define FMHA_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define FMHA_HOST_DEVICE inline
#endif
#endif

// Numbering must match fmha_jit::MaskKind (static_assert in dispatcher/launch.cpp).
enum FmhaMaskKind {
  FMHA_MASK_NONE = 0,
  FMHA_MASK_CAUSAL_TOP_LEFT = 1,      // j <= i
  FMHA_MASK_CAUSAL_BOTTOM_RIGHT = 2,  // j <= i + Sk - Sq
  FMHA_MASK_SLIDING_WINDOW = 3,  // i + Sk - Sq - left <= j <= i + Sk - Sq + right; -1 = unbounded
};

// Visible key range [lo, hi) of query row i. Empty (lo >= hi) when the row sees no key: such rows
// produce O = 0 and LSE = -inf.
struct FmhaKeyRange {
  int lo;
  int hi;
};

FMHA_HOST_DEVICE FmhaKeyRange fmha_visible_keys(int mask_kind, int i, int seqlen_q, int seqlen_k,
                                                int window_left, int window_right) {
  // 64-bit arithmetic: a window larger than the sequence (e.g. INT_MAX for "everything") must
  // clamp, not overflow.
  long long lo = 0;
  long long hi = seqlen_k;
  const long long diag_br = static_cast<long long>(i) + seqlen_k - seqlen_q;
  if (mask_kind == FMHA_MASK_CAUSAL_TOP_LEFT) {
    hi = static_cast<long long>(i) + 1;
  } else if (mask_kind == FMHA_MASK_CAUSAL_BOTTOM_RIGHT) {
    hi = diag_br + 1;
  } else if (mask_kind == FMHA_MASK_SLIDING_WINDOW) {
    if (window_left >= 0) lo = diag_br - window_left;
    if (window_right >= 0) hi = diag_br + window_right + 1;
  }
  if (lo < 0) lo = 0;
  if (hi > seqlen_k) hi = seqlen_k;
  if (hi < lo) hi = lo;
  FmhaKeyRange r;
  r.lo = static_cast<int>(lo);
  r.hi = static_cast<int>(hi);
  return r;
}

FMHA_HOST_DEVICE bool fmha_key_visible(int mask_kind, int i, int j, int seqlen_q, int seqlen_k,
                                       int window_left, int window_right) {
  const FmhaKeyRange r =
      fmha_visible_keys(mask_kind, i, seqlen_q, seqlen_k, window_left, window_right);
  return j >= r.lo && j < r.hi;
}
