// Online (streaming) softmax over mma.sync accumulator fragments, FlashAttention-2 style.
//
// A warp holds kMT m16 tiles of scores, each as kNT n8 accumulator fragments. Lane l owns, per m16
// tile, rows l / 4 and l / 4 + 8 and two adjacent columns of every n8 fragment, so a row is spread
// over the 4 lanes of a quad: row statistics are reduced with two xor-shuffles (1 and 2).
//
// State per row, all fp32: the running maximum m of the raw (unscaled) scores and the running sum
// l of exp2(s * scale_log2 - m * scale_log2) over this lane's columns only; the quad reduction of l
// is deferred to finalize(), since l is only ever rescaled, never compared. Keeping m unscaled lets
// each probability cost one FFMA plus one EX2. This relies on scale > 0 (every attention scale is),
// so that the maximum of the raw scores is also the maximum of the scaled ones.
//
// Masked scores are -inf. A row that has seen only masked scores keeps m = -inf; its shift is
// taken as 0 so that exp2(-inf - shift) = 0 instead of exp2(-inf + inf) = NaN, and its rescale
// factor is 0 (harmless: its accumulator and sum are 0).
#pragma once

#include "common/platform.h"
#include "common/score_mods.h"

// exp2 for probabilities. On NVIDIA the flush-to-zero form is a single MUFU.EX2; the IEEE form
// that exp2f compiles to without fast-math wraps it in a range check and two scalings to produce
// denormal results, three extra instructions per score in the hottest loop of the kernel. A
// probability below 2^-126 relative to the row maximum cannot change a 16-bit output, so flushing
// it to zero is harmless.
FMHA_DEVICE float fmha_softmax_exp2(float x) {
#if defined(FMHA_PLATFORM_CUDA)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
#else
  return fmha_exp2(x);
#endif
}

template <int kMT, int kNT>
struct FmhaOnlineSoftmax {
  enum { kRows = 2 * kMT };  // rows owned by one lane
  float row_max[kRows];
  float row_sum[kRows];

  FMHA_DEVICE void init() {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      row_max[r] = fmha_neg_inf();
      row_sum[r] = 0.f;
    }
  }

  // Folds one tile of scores into the state: s becomes the (unnormalised) probabilities, and
  // alpha[r] is the factor by which the caller must rescale row r of its output accumulator.
  FMHA_DEVICE void update(float (&s)[kMT][kNT][4], float scale_log2, float (&alpha)[kRows]) {
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int r = mt * 2 + hf;
        float mx = row_max[r];
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) {
          mx = fmha_max(mx, fmha_max(s[mt][nt][2 * hf], s[mt][nt][2 * hf + 1]));
        }
        mx = fmha_max(mx, fmha_shfl_xor(mx, 1));
        mx = fmha_max(mx, fmha_shfl_xor(mx, 2));
        const float shift = mx == fmha_neg_inf() ? 0.f : mx * scale_log2;
        // row_max = -inf gives exp2(-inf) = 0 whatever the shift.
        alpha[r] = fmha_softmax_exp2(row_max[r] * scale_log2 - shift);
        row_max[r] = mx;
        float sum = 0.f;
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const float pr =
                fmha_softmax_exp2(__fmaf_rn(s[mt][nt][2 * hf + e], scale_log2, -shift));
            s[mt][nt][2 * hf + e] = pr;
            sum += pr;
          }
        }
        row_sum[r] = row_sum[r] * alpha[r] + sum;
      }
    }
  }

  // Completes the row sums across the quad. inv_sum[r] is the output normalisation (0 for a row
  // that saw no key, whose accumulator is 0, so O = 0) and lse[r] the natural-log logsumexp of the
  // scaled scores (-inf for such a row).
  FMHA_DEVICE void finalize(float scale_log2, float (&inv_sum)[kRows], float (&lse)[kRows]) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      float l = row_sum[r];
      l += fmha_shfl_xor(l, 1);
      l += fmha_shfl_xor(l, 2);
      const bool empty = !(l > 0.f);
      inv_sum[r] = empty ? 0.f : 1.f / l;
      lse[r] = empty ? fmha_neg_inf() : (row_max[r] * scale_log2 + fmha_log2(l)) * FMHA_LN2;
    }
  }

  // finalize() for a kernel with a sink logit (score_mods.h): sink2 = the row's sink x log2(e).
  FMHA_DEVICE void finalize_with_sink(float scale_log2, float sink2, float (&inv_sum)[kRows],
                                      float (&lse)[kRows]) {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      float l = row_sum[r];
      l += fmha_shfl_xor(l, 1);
      l += fmha_shfl_xor(l, 2);
      const float m2 = row_max[r] == fmha_neg_inf() ? fmha_neg_inf() : row_max[r] * scale_log2;
      fmha_sink_normalise(m2, l, sink2, inv_sum[r], lse[r]);
    }
  }
};
