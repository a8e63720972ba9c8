// Score modifiers compiled into a kernel by its config: tanh softcapping of the scores and sink
// logits in the softmax denominator. Both are exact rewrites of the row's softmax, so every
// family applies them the same way.
#pragma once

#include "common/fmha_params.h"
#include "common/platform.h"

// tanh for the capped scores. On NVIDIA the hardware approximation (sm_75+, max relative error
// 2^-10.987) is one MUFU op; the capped score then rounds to the 16-bit P like any other score.
FMHA_DEVICE float fmha_tanh(float x) {
#if defined(FMHA_PLATFORM_CUDA)
  float y;
  asm("tanh.approx.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
#else
  return tanhf(x);
#endif
}

// The capped score softcap * tanh(scale * s / softcap) of a raw score s = q . k; kernels built
// with softcap take scale_log2 = log2(e) afterwards (the scale is inside the cap).
FMHA_DEVICE float fmha_softcap(const FmhaFwdParams& p, float s) {
  return p.softcap * fmha_tanh(s * p.softcap_scale);
}

// A row's softmax with a sink logit: m2 = the row's max score x log2(e) scale (-inf when it saw
// no key), l its sum of exp2(score - m2), sink2 the sink x log2(e). The sink joins the denominator
// with no value row: inv_sum normalises the row's accumulator (kept relative to m2) and lse is
// the natural log of the full denominator.
FMHA_DEVICE void fmha_sink_normalise(float m2, float l, float sink2, float& inv_sum, float& lse) {
  const float top = m2 > sink2 ? m2 : sink2;
  const float rows = m2 == fmha_neg_inf() ? 0.f : fmha_exp2(m2 - top);
  const float total = l * rows + fmha_exp2(sink2 - top);
  inv_sum = rows / total;
  lse = (top + fmha_log2(total)) * FMHA_LN2;
}
