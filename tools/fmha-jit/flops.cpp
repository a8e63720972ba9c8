#include "tools/fmha-jit/flops.hpp"

#include "common/mask.h"
#include "tools/fmha-jit/packed_batch.hpp"

namespace fmha_jit::cli {
namespace {

// Visible (query, key) pairs of one sequence. FlashAttention's benchmarks halve the square for
// causal masks; that is kept where it is their convention (Sq == Sk) so that figures compare with
// published ones. Elsewhere (Sq != Sk, windows) the pairs are counted with the kernels' own mask
// function, so a window is not credited with work it skips.
double visible_pairs(std::int64_t seqlen_q, std::int64_t seqlen_k, MaskKind mask,
                     const FmhaProblem& p) {
  if (mask == MaskKind::none) return double(seqlen_q) * double(seqlen_k);
  if (is_causal(mask) && seqlen_q == seqlen_k) return double(seqlen_q) * double(seqlen_k) / 2;
  double pairs = 0;
  for (std::int64_t i = 0; i < seqlen_q; ++i) {
    const FmhaKeyRange r =
        fmha_visible_keys(static_cast<int>(mask), static_cast<int>(i), static_cast<int>(seqlen_q),
                          static_cast<int>(seqlen_k), p.window_left, p.window_right);
    pairs += r.hi - r.lo;
  }
  return pairs;
}

}  // namespace

double attention_flops(const FmhaProblem& p, MaskKind mask, Family family) {
  const double width = double(p.hdim_q + p.hdim_v);
  double fwd = 0;
  if (p.varlen()) {
    double pairs = 0;
    for (const Sequence& s : sequences(p)) pairs += visible_pairs(s.seqlen_q, s.seqlen_k, mask, p);
    fwd = 2.0 * double(p.nhead_q) * pairs * width;
  } else {
    fwd = 2.0 * double(p.batch) * double(p.nhead_q) *
          visible_pairs(p.seqlen_q, p.seqlen_k, mask, p) * width;
  }
  return family == Family::bwd ? 2.5 * fwd : fwd;
}

double attention_macs(const FmhaProblem& p) {
  const double per_pair = double(p.nhead_q) * double(p.hdim_q + p.hdim_v);
  if (!p.varlen()) return double(p.batch) * double(p.seqlen_q) * double(p.seqlen_k) * per_pair;
  double pairs = 0;
  for (const Sequence& s : sequences(p)) pairs += double(s.seqlen_q) * double(s.seqlen_k);
  return pairs * per_pair;
}

}  // namespace fmha_jit::cli
