// The atomic Hopper backward's launch order under a causal mask: how many (kv head, batch) pairs
// share one section of the 1-D grid (FmhaBwdParams::causal_section_pairs; the kernel's side is
// fmha_bwd_key_tile_cta in templates/bwd/fmha_bwd_sm90a_schedule.h).
#include <algorithm>
#include <functional>
#include <queue>
#include <vector>

#include "common/mask.h"
#include "kernels/common/key_tiles.hpp"
#include "kernels/wgmma_sm90a/bwd_schedule.hpp"

namespace fmha_jit::kernels::wgmma_sm90a {

namespace {

// The SMs' finish times in query-tile iterations for a launch of CTAs in linear index order, each
// on the SM that frees first (one CTA per SM: the kernels use ~200 KB of shared memory): sections
// of k pairs, key tile by key tile, the pairs fastest (fmha_bwd_key_tile_cta); a pair from
// index pairs - asc_pairs on runs its key tiles largest first (n = chain position), the others
// smallest first (n = num_n - 1 - position: the deterministic chains). tail > 0: one pair per
// section but the last `tail` pairs, which share one (FmhaBwdParams::det_tail_pairs; k unused).
double modelled_makespan(const std::vector<double>& work, std::int64_t pairs, std::int64_t k,
                         std::int64_t asc_pairs, int multiprocessors, std::int64_t tail = 0) {
  const auto num_n = static_cast<std::int64_t>(work.size());
  std::priority_queue<double, std::vector<double>, std::greater<double>> free_at;
  for (int sm = 0; sm < multiprocessors; ++sm) free_at.push(0.0);
  double end = 0;
  for (std::int64_t first = 0, in_section = 0; first < pairs; first += in_section) {
    in_section = tail > 0 ? (first < pairs - tail ? 1 : tail) : std::min(k, pairs - first);
    for (std::int64_t position = 0; position < num_n; ++position) {
      for (std::int64_t pair = first; pair < first + in_section; ++pair) {
        const std::int64_t n = pair >= pairs - asc_pairs ? position : num_n - 1 - position;
        const double done = free_at.top() + work[static_cast<std::size_t>(n)];
        free_at.pop();
        free_at.push(done);
        end = std::max(end, done);
      }
    }
  }
  return end;
}

}  // namespace

BwdCausalSections bwd_causal_sections(const FmhaKernelConfig& c, const FmhaProblem& p,
                                      int multiprocessors) {
  BwdCausalSections plan;
  const std::int64_t pairs = static_cast<std::int64_t>(p.nhead_k) * p.batch;
  const std::int64_t num_n = key_tiles(c, p);
  plan.asc_pairs = c.deterministic ? det_asc_pairs(c, p) : pairs;
  // The deterministic mode's order of additions follows from which pairs ascend, so that the
  // choice must not depend on the GPU: its model runs on kDetReferenceSms.
  if (c.deterministic) multiprocessors = kDetReferenceSms;
  if (c.impl != KernelImpl::wgmma_sm90a || c.family != Family::bwd || !is_causal(c.mask) ||
      multiprocessors <= 0 || pairs <= 1 || num_n * pairs > kBwdMaxModelledCtas) {
    return plan;
  }
  // Where the deterministic chains walk (det_up_cells: GQA), sections measured below the walk
  // alone (H100, bf16 hdim 128 GQA 32:8 causal: S 8192 430 against 458 TFLOP/s, S 2048 308
  // against 353; why is not profiled; without the walk they gained: hdim 128 S 8192 2 x 16 heads
  // 486 -> 517, hdim 256 S 2048 279 -> 288). There only the last pairs share a section
  // (ascending), so that most chains walk one pair after another as measured, while the largest
  // key tiles of the last pairs no longer start last: a trace of the walk at GQA S 8192 had the
  // SMs idle for 8.7 % of the span at its end, S 2048 13 %, which this model puts at 9.7 % and
  // 14 %. Measured (H100, against the walk alone): tails of 2 pairs at S 8192 458 -> 478, 8 at
  // S 2048 352 -> 378, S 512 186 -> 190 TFLOP/s (docs/METHOD.md, "Hopper backward launch order").
  const int up_cells = det_up_cells(c, p);
  const bool walks = c.deterministic && up_cells > 0;
  // Walking chains alternate direction pair by pair (fmha_bwd_key_tile_cta says why). Measured
  // (H100, bf16 hdim 128 GQA 32:8 causal, the tails below kept): S 16384 465 -> 476,
  // S 8192 473 -> 498, S 2048 378 -> 385 TFLOP/s; H200 S 16384 473 -> 484; on MHA chains, which
  // do not walk and launch in sections, it lost 2 % (S 8192). The model below keeps modelling
  // every lead chain as decreasing: the tails it picks were measured so.
  plan.alternate = walks;
  if (walks && c.hdim_q > 128 && num_n > kDetReferenceSms) {
    // hdim 256 chains longer than the SMs: every pair ascends (largest key tile first, as the
    // atomic mode's sections launch them), one pair per section (a tail of one), and no CTA
    // walks. Measured (H100, bf16 causal, against the walk with one up cell and the
    // alternation, atomic 408-412 TFLOP/s throughout): GQA 8:2 S 16384 (2 pairs) 339 / 345 ->
    // 401 / 401 with both pairs in one section; 4 pairs (16:4, or 8:2 x 2 batches) 328-377 with
    // all in one section, 399-401 with the last two sharing one, 401-404 with one pair per
    // section, hence one; S 12288 (192 key tiles) 369 -> 378 in one section. S 8192 (128 key
    // tiles, not planned so) walks: it kept 378.
    plan.alternate = false;
    plan.tail_pairs = 1;
    plan.asc_pairs = pairs;
    return plan;
  }
  if (walks && 2 * num_n > kDetReferenceSms) {
    // Where one pair's chain fills more than half the SMs, the ascending pairs that start after
    // the first wave take the SMs the decreasing pair before them frees, smallest key tile first,
    // so their key tiles start one tile's difference in work (own: group x ratio cells) times the
    // share of the SMs one pair's chain fills apart. With f own cells first in the walk, each key
    // tile then trails the one below by that spacing - f visits; f = spacing - u leaves the
    // decreasing chains' slack of u (det_up_cells). The first wave's pairs start at once and
    // keep their order. Measured (H100, against the alternation alone): GQA 32:8
    // S 16384 482.0 -> 493.6 TFLOP/s (f = 5), outputs within one bf16 rounding of dK / dV (their
    // order of summation changes; dQ's does not). At S 8192, where two pairs share the SMs and
    // their key tiles start 3 visits apart, f = 1 measured 486.0 -> 481.7, hence the condition.
    const std::int64_t ratio = c.block_n / c.block_m;
    const std::int64_t own = (p.nhead_q / p.nhead_k) * ratio;
    const std::int64_t spacing =
        own * std::min<std::int64_t>(num_n, kDetReferenceSms) / kDetReferenceSms;
    plan.asc_walk_up = static_cast<int>(std::max<std::int64_t>(0, spacing - up_cells));
    plan.asc_walk_from = static_cast<int>((kDetReferenceSms + num_n - 1) / num_n);
  }
  // A CTA's work in query-tile iterations (one per query head and query tile that sees its key
  // tile), plus what every CTA costs besides: its K and V loads, the pipeline's fill and the dK /
  // dV epilogue, about two iterations' worth (the split tail's model, bwd_split_tail, uses the
  // same constant).
  constexpr double kCtaOverheadIterations = 2.0;
  const std::int64_t group = p.nhead_q / p.nhead_k;
  std::vector<double> work;
  for (std::int64_t tiles : bwd_key_tile_query_tiles(c, p)) {
    work.push_back(static_cast<double>(group * tiles) + kCtaOverheadIterations);
  }
  // Candidates: powers of two up to what the 3-D order already runs together, SMs / key tiles
  // pairs (at least one): larger sections spread the resident CTAs over more heads' Q, dO and dQ
  // sums than L2 holds. Measured (H100, bf16, section size swept): hdim 128 S 2048,
  // 8 x 16 heads (8 pairs run together): 1 -> 358, 4 -> 364, 8 -> 368, 32 -> 345 TFLOP/s; GQA
  // 32:8 S 2048: 1 -> 374, 4 -> 389, 8 -> 402, 16 -> 378; GQA S 8192 (2 together): 1 -> 486,
  // 2 -> 512, 4 -> 503; hdim 128 S 8192: 1 -> 500, 2 -> 519, 4 -> 516; GQA S 512 (33): 1 -> 187,
  // 8 -> 195, 32 -> 199. The smallest section within 1 % of the best is taken. In the
  // deterministic mode the last section ascends (largest key tile first) and the others keep the
  // decreasing chains, whose waits must point to earlier launches; an ascending pair in an earlier
  // section would start its largest tiles mid-launch, and the model gains nothing from it.
  const std::int64_t together = std::max<std::int64_t>(1, multiprocessors / num_n);
  auto last_section = [&](std::int64_t k) { return pairs - (pairs - 1) / k * k; };
  std::vector<std::int64_t> sizes;
  for (std::int64_t k = 1; k <= std::min(pairs, together); k *= 2) sizes.push_back(k);
  std::vector<double> ends;
  for (std::int64_t k : sizes) {
    const std::int64_t asc = c.deterministic ? last_section(k) : pairs;
    ends.push_back(walks ? modelled_makespan(work, pairs, 1, k, multiprocessors, k)
                         : modelled_makespan(work, pairs, k, asc, multiprocessors));
  }
  const double best = *std::min_element(ends.begin(), ends.end());
  // The reference: one pair per section, the order before sections (all ascending in the atomic
  // mode; in the deterministic one, det_asc_pairs's last pair).
  plan.one_pair_makespan = modelled_makespan(work, pairs, 1, plan.asc_pairs, multiprocessors);
  plan.makespan = plan.one_pair_makespan;
  // Sections only where the model gains 4 % or more. Below that the two rows measured gained
  // little or lost (hdim 256 S 512, 3.7 % modelled at 16 pairs: 149 -> 142, at 4 pairs 150;
  // hdim 64 S 2048, 2.4 % at 8 pairs: 313 -> 320); above it every row gained but one, which
  // held (hdim 256 S 2048, 5.9 % at 4 pairs: 300 -> 301). The threshold is fitted to those
  // rows, on one card (H100), in the atomic mode (docs/METHOD.md, "Hopper backward launch
  // order").
  constexpr double kMinGain = 0.04;
  if (best > (1.0 - kMinGain) * plan.one_pair_makespan) return plan;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (ends[i] <= 1.01 * best) {
      if (walks) {
        plan.tail_pairs = static_cast<int>(sizes[i]);
        plan.asc_pairs = sizes[i];
      } else {
        plan.section_pairs = static_cast<int>(sizes[i]);
        if (c.deterministic) plan.asc_pairs = last_section(sizes[i]);
      }
      plan.makespan = ends[i];
      break;
    }
  }
  return plan;
}

}  // namespace fmha_jit::kernels::wgmma_sm90a
