#include "accuracy_rule.hpp"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace fmha_jit::reference {
namespace {

// The rule's constants.
//
// kLowpFactor: a kernel may be as far from ref64 as twice the careful kernel-like computation is
// (FlashAttention's factor): the two differ in accumulation order, where P is rounded (normalised
// or not) and in exp2 / log2 approximations, so their errors are of one size but not equal.
constexpr double kLowpFactor = 2.0;
//
// kFloorUlps: the absolute allowance, floor = kFloorUlps * u_fp32 * max(1, max |ref64|) = 2^-16 of
// the slice's scale. It is for rows whose exact value is 0 or tiny, where lowp's error is 0 too or
// happens to be smaller than the kernel's: a key no row sees (exactly 0 everywhere), a query row
// that sees one key (then P = 1 and dP = D, so dS is 0 in exact arithmetic and fp32 noise in a
// kernel), a dQ / dK row far below the slice's maximum. There the kernel's value is fp32 rounding
// noise of its reductions: an fp32 sum of n terms errs by at most about n u_fp32 sum |terms|, in
// practice sqrt(n) u_fp32 sum |terms|, and the tests' reductions have n <= 256 terms over the head
// dim, of O(1) inputs. 2^8 u_fp32 covers that, and is still 2^-8 of bf16's u and 2^-5 of fp16's at
// the slice's scale, so an O(1) error in such a row fails. max(1, .) keeps it from vanishing in a
// slice whose exact values are all 0 (every row seeing one key).
constexpr double kFloorUlps = 256.0;
//
// Row allowance u * max_d |ref64|_r: the kernel rounds its output to its precision (at most u |x|
// per element), and lowp does too, but lowp's rounding of a row's largest elements may happen to
// be nearly exact, and then twice lowp's error says nothing about the kernel's one rounding. One u
// of the row's largest exact value covers that rounding, and no more.

struct RowStats {
  double err = 0, lowp_err = 0, max_ref = 0;
};

}  // namespace

OutputVerdict judge(const RuleInput& in) {
  const auto n = static_cast<std::size_t>(in.rows) * static_cast<std::size_t>(in.cols);
  if (in.rows < 0 || in.cols < 0 || in.ours.size() != n || in.ref64.size() != n ||
      in.lowp.size() != n) {
    throw std::invalid_argument(
        "accuracy rule: " + in.name + " holds " + std::to_string(in.ours.size()) + " / " +
        std::to_string(in.ref64.size()) + " / " + std::to_string(in.lowp.size()) +
        " values (ours / ref64 / lowp); "
        "accepted: rows x cols = " +
        std::to_string(n));
  }
  OutputVerdict v;
  v.name = in.name;
  v.elements = static_cast<std::int64_t>(n);
  std::vector<RowStats> rows(static_cast<std::size_t>(in.rows));
  double err2 = 0, lowp_err2 = 0, ref2 = 0;
  for (std::size_t e = 0; e < n; ++e) {
    const double ref = in.ref64[e], ours = in.ours[e], lowp = in.lowp[e];
    if (!std::isfinite(ref)) {
      v.nonfinite += ours == ref ? 0 : 1;
      v.lowp_nonfinite += lowp == ref ? 0 : 1;
      continue;
    }
    if (!std::isfinite(ours)) {
      ++v.nonfinite;
      continue;
    }
    if (!std::isfinite(lowp)) {
      ++v.lowp_nonfinite;
      continue;
    }
    const double err = std::fabs(ours - ref), lowp_err = std::fabs(lowp - ref);
    RowStats& row = rows[e / static_cast<std::size_t>(in.cols)];
    row.err = std::max(row.err, err);
    row.lowp_err = std::max(row.lowp_err, lowp_err);
    row.max_ref = std::max(row.max_ref, std::fabs(ref));
    v.max_err = std::max(v.max_err, err);
    v.lowp_max_err = std::max(v.lowp_max_err, lowp_err);
    v.max_ref = std::max(v.max_ref, std::fabs(ref));
    err2 += err * err;
    lowp_err2 += lowp_err * lowp_err;
    ref2 += ref * ref;
  }
  v.floor = kFloorUlps * kUnitRoundoffFp32 * std::max(1.0, v.max_ref);
  v.slice_bound = kLowpFactor * v.lowp_max_err + v.floor;
  v.slice_ok = v.max_err <= v.slice_bound;

  double worst_ratio = 0;
  for (std::size_t r = 0; r < rows.size(); ++r) {
    const RowStats& row = rows[r];
    const double bound = kLowpFactor * row.lowp_err + in.unit_roundoff * row.max_ref + v.floor;
    if (row.err > bound) ++v.rows_failed;
    const double ratio = row.err / bound;
    if (row.err > 0 && ratio > worst_ratio) {
      worst_ratio = ratio;
      v.worst_row = static_cast<int>(r);
      v.worst_row_err = row.err;
      v.worst_row_lowp_err = row.lowp_err;
      v.worst_row_max_ref = row.max_ref;
      v.worst_row_bound = bound;
    }
  }
  v.rows_ok = v.rows_failed == 0;

  const double err_norm = std::sqrt(err2), lowp_norm = std::sqrt(lowp_err2);
  const double ref_norm = std::sqrt(ref2);
  v.rel_l2 = ref_norm > 0 ? err_norm / ref_norm : err_norm;
  v.lowp_rel_l2 = ref_norm > 0 ? lowp_norm / ref_norm : lowp_norm;
  v.l2_err = err_norm;
  v.l2_bound = kLowpFactor * lowp_norm + v.floor * std::sqrt(static_cast<double>(n));
  v.l2_ok = v.l2_err <= v.l2_bound;

  v.pass = v.nonfinite == 0 && v.lowp_nonfinite == 0 && v.slice_ok && v.rows_ok && v.l2_ok;
  return v;
}

std::string OutputVerdict::report() const {
  std::string s = fmt::format(
      "{}: {}  max|ours-ref64| {:.3e} {} 2 x lowp's {:.3e} + {:.1e} (max|ref64| {:.3e})  rows "
      "failing {}  rel_l2 {:.3e} vs lowp's {:.3e}{}",
      name, pass ? "pass" : "FAIL", max_err, slice_ok ? "<=" : ">", lowp_max_err, floor, max_ref,
      rows_failed, rel_l2, lowp_rel_l2, l2_ok ? "" : " (over 2x)");
  if (nonfinite > 0) s += fmt::format("  non-finite {}", nonfinite);
  if (lowp_nonfinite > 0) s += fmt::format("  lowp non-finite {}", lowp_nonfinite);
  if (!pass && worst_row >= 0) {
    s += fmt::format(
        "\n    worst row {}: max|ours-ref64| {:.3e} > bound {:.3e} (lowp's {:.3e}, max|ref64| "
        "{:.3e})",
        worst_row, worst_row_err, worst_row_bound, worst_row_lowp_err, worst_row_max_ref);
  }
  return s;
}

bool Verdict::pass() const {
  return std::all_of(outputs.begin(), outputs.end(), [](const OutputVerdict& o) { return o.pass; });
}

std::string Verdict::report() const {
  std::string s;
  for (const OutputVerdict& o : outputs) s += o.report() + "\n";
  return s;
}

}  // namespace fmha_jit::reference
