// The sinks' gradient: d_sinks[h] = sum over head h's rows of their terms -exp(sink - LSE) x D,
// which the backward's first stage leaves in p.dsink_rows (the LSE's layout).
//
// Launch geometry: grid = (nhead_q), block = kThreads (kFmhaDsinksThreads) threads.
//
// The order of the additions is fixed (each thread walks its rows in increasing order, then a
// fixed tree), so the gradient is bit-identical run to run in either mode of the backward, and
// no atomic or second launch is needed for what is one pass over B x Sq floats per head.
#pragma once

#include "common/fmha_params.h"
#include "common/platform.h"

template <bool kVarlen, int kThreads>
FMHA_DEVICE void fmha_bwd_dsinks(const FmhaBwdParams& p) {
  static_assert((kThreads & (kThreads - 1)) == 0, "a power of two for the tree");
  __shared__ float partial[kThreads];
  const FmhaFwdParams& f = p.fwd;
  const int tid = fmha_thread_idx();
  const int h = fmha_block_idx_x();
  float sum = 0.f;
  if (kVarlen) {
    // [nhead_q, total_q]: the head's rows are one span.
    const float* rows = p.dsink_rows + static_cast<fmha_index_t>(h) * f.total_q;
    for (int i = tid; i < f.total_q; i += kThreads) sum += rows[i];
  } else {
    for (int b = 0; b < f.batch; ++b) {
      const float* rows =
          p.dsink_rows + (static_cast<fmha_index_t>(b) * f.nhead_q + h) * f.seqlen_q;
      for (int i = tid; i < f.seqlen_q; i += kThreads) sum += rows[i];
    }
  }
  partial[tid] = sum;
  fmha_sync_threads();
#pragma unroll
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (tid < half) partial[tid] += partial[tid + half];
    fmha_sync_threads();
  }
  if (tid == 0) p.d_sinks[h] = partial[0];
}
