// The sequence a CTA works on. In a dense batch it is batch entry b; in a packed variable-length
// batch (kVarlen) it is sequence b, whose offsets and lengths come from cu_seqlens. Kernels read
// it once, then run the dense algorithm with its lengths (fmha_lengths: every mask aligns to
// them) and its first rows added to their tensor offsets.
#pragma once

#include "common/fmha_params.h"
#include "common/platform.h"

struct FmhaSequence {
  int seqlen_q;  // its query rows (0: nothing to do)
  int seqlen_k;  // its keys
  int q_row0;    // its first row in the packed Q and O (0 in a dense batch)
  int k_row0;    // its first row in the packed K and V
};

// cu_seqlens come from the caller's device memory and are not checked on the host unless the
// caller passes host copies (docs/VARLEN.md): a sequence whose entries are out of order or past
// the tensors is made empty here, so no CTA reads or writes outside them.
template <bool kVarlen>
FMHA_DEVICE FmhaSequence fmha_sequence(const FmhaFwdParams& p, int b) {
  FmhaSequence s;
  if (!kVarlen) {
    s.seqlen_q = p.seqlen_q;
    s.seqlen_k = p.seqlen_k;
    s.q_row0 = 0;
    s.k_row0 = 0;
    return s;
  }
  const int q0 = p.cu_seqlens_q[b];
  const int q1 = p.cu_seqlens_q[b + 1];
  const int k0 = p.cu_seqlens_k[b];
  const int k1 = p.cu_seqlens_k[b + 1];
  const bool sound = 0 <= q0 && q0 <= q1 && q1 <= p.total_q && q1 - q0 <= p.seqlen_q && 0 <= k0 &&
                     k0 <= k1 && k1 <= p.total_k && k1 - k0 <= p.seqlen_k;
  s.seqlen_q = sound ? q1 - q0 : 0;
  s.seqlen_k = sound ? k1 - k0 : 0;
  s.q_row0 = sound ? q0 : 0;
  s.k_row0 = sound ? k0 : 0;
  return s;
}

// The lengths and window a sequence's masks read (mask_fragments.h, mask_i32.h and the
// backward's tile visibility take any struct with these four fields).
struct FmhaMaskGeometry {
  int seqlen_q;
  int seqlen_k;
  int window_left;
  int window_right;
};

template <bool kVarlen, class Dense, class Packed>
struct FmhaSelect {
  typedef Dense type;
};
template <class Dense, class Packed>
struct FmhaSelect<true, Dense, Packed> {
  typedef Packed type;
};

// What the masks of sequence `s` read: the parameters themselves in a dense batch (whose kernels
// then compile exactly as before packed batches existed), else `storage` set to the sequence's
// lengths. The kernels keep the unnarrowed parameters for pointers and strides and add the
// sequence's first rows (q_row0, k_row0) to their offsets: narrowing a copy of the parameters
// instead held every advanced pointer in registers, and the backward's largest tiles spilled.
template <bool kVarlen>
FMHA_DEVICE const typename FmhaSelect<kVarlen, FmhaFwdParams, FmhaMaskGeometry>::type& fmha_lengths(
    const FmhaFwdParams& p, const FmhaSequence& s, FmhaMaskGeometry& storage) {
  if constexpr (kVarlen) {
    storage.seqlen_q = s.seqlen_q;
    storage.seqlen_k = s.seqlen_k;
    storage.window_left = p.window_left;
    storage.window_right = p.window_right;
    return storage;
  } else {
    (void)s, (void)storage;
    return p;
  }
}

// Index of row 0 of (b, h) in the per-row fp32 arrays: the LSE, and the backward's D, sink terms
// and dQ sums (times the head dim). Dense: [batch, nhead_q, seqlen_q]; packed: [nhead_q, total_q],
// the LSE layout FlashAttention's varlen functions use. q_row0: the sequence's first row.
template <bool kVarlen>
FMHA_DEVICE fmha_index_t fmha_row_stat0(const FmhaFwdParams& p, int q_row0, int b, int h) {
  if (kVarlen) return static_cast<fmha_index_t>(h) * p.total_q + q_row0;
  return (static_cast<fmha_index_t>(b) * p.nhead_q + h) * p.seqlen_q;
}
