// The harness's judging: which slices, their rows, the checks outside the rule, the report, and
// the forward's check.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <span>

#include "gpu/attention_harness_detail.hpp"
#include "reference/slice_reference.hpp"

namespace fmha_jit::test {
namespace detail {
namespace {

// Judging every slice is worth it up to this many CPU multiply-adds (about a second on 16
// cores at the reference's few GMAC/s per core); past it, sampled slices hold the cost of a
// large case to a few of its slices.
constexpr double kAllSlicesMacs = 3e10;
// Failure lines in a report before the rest are only counted.
constexpr int kReportLines = 20;

}  // namespace

std::vector<Slice> slices_to_check(int batch, int heads, double macs_per_slice, std::uint32_t seed,
                                   int samples) {
  const int total = batch * heads;
  std::vector<int> picked;
  if (total <= samples || total * macs_per_slice <= kAllSlicesMacs) {
    for (int i = 0; i < total; ++i) picked.push_back(i);
  } else {
    // The last slice, and samples - 1 others drawn without repetition (a partial Fisher-Yates
    // shuffle with the raw generator, so the draw is the same with every standard library).
    std::vector<int> others(static_cast<std::size_t>(total - 1));
    for (int i = 0; i < total - 1; ++i) others[static_cast<std::size_t>(i)] = i;
    std::mt19937 rng(seed);
    for (int n = 0; n < samples - 1; ++n) {
      const auto remaining = static_cast<std::uint32_t>(others.size()) - n;
      std::swap(others[static_cast<std::size_t>(n)],
                others[static_cast<std::size_t>(n + rng() % remaining)]);
      picked.push_back(others[static_cast<std::size_t>(n)]);
    }
    picked.push_back(total - 1);
    std::sort(picked.begin(), picked.end());
  }
  std::vector<Slice> slices;
  for (int i : picked) slices.push_back({i / heads, i % heads});
  return slices;
}

std::vector<float> slice_rows(const std::vector<float>& storage, const TensorGeometry& g, int b,
                              int h) {
  std::vector<float> rows(static_cast<std::size_t>(g.seqlen) * g.hdim);
  for (int s = 0; s < g.seqlen; ++s) {
    std::copy_n(storage.begin() + g.offset(b, h, s), g.hdim,
                rows.begin() + static_cast<std::ptrdiff_t>(s) * g.hdim);
  }
  return rows;
}

std::int64_t nonfinite_elements(const std::vector<float>& storage, const TensorGeometry& g) {
  std::int64_t count = 0;
  for (int b = 0; b < g.batch; ++b) {
    for (int h = 0; h < g.heads; ++h) {
      for (int s = 0; s < g.seqlen; ++s) {
        const float* row = storage.data() + g.offset(b, h, s);
        for (int d = 0; d < g.hdim; ++d) count += std::isfinite(row[d]) ? 0 : 1;
      }
    }
  }
  return count;
}

std::int64_t padding_written(const std::vector<std::uint16_t>& bits, const TensorGeometry& g) {
  if (g.strides == g.logical) return 0;  // dense: no padding
  std::vector<bool> element(bits.size(), false);
  for (int b = 0; b < g.batch; ++b) {
    for (int h = 0; h < g.heads; ++h) {
      for (int s = 0; s < g.seqlen; ++s) {
        const auto at = static_cast<std::size_t>(g.offset(b, h, s));
        std::fill_n(element.begin() + static_cast<std::ptrdiff_t>(at), g.hdim, true);
      }
    }
  }
  std::int64_t written = 0;
  for (std::size_t i = 0; i < bits.size(); ++i) written += !element[i] && bits[i] != 0xFFFF;
  return written;
}

void Judgement::add(const std::string& output, const std::string& where,
                    const ref::OutputVerdict& v) {
  ++judged_;
  if (!v.pass) {
    fail(output, v.report() + "  [" + where + "]");
    return;
  }
  const auto ratio = [](double err, double bound) { return bound > 0 ? err / bound : 0.0; };
  worst_slice_ = std::max(worst_slice_, ratio(v.max_err, v.slice_bound));
  worst_row_ = std::max(worst_row_, ratio(v.worst_row_err, v.worst_row_bound));
  worst_l2_ = std::max(worst_l2_, ratio(v.l2_err, v.l2_bound));
}

void Judgement::fail(const std::string& output, const std::string& line) {
  result_.pass = false;
  if (std::find(result_.failed.begin(), result_.failed.end(), output) == result_.failed.end()) {
    result_.failed.push_back(output);
  }
  if (lines_++ < kReportLines) result_.report += line + "\n";
}

CheckResult Judgement::result(const std::string& summary) const {
  CheckResult r = result_;
  if (lines_ > kReportLines) {
    r.report += "... and " + std::to_string(lines_ - kReportLines) + " more failures\n";
  }
  char margins[160];
  std::snprintf(margins, sizeof margins,
                "; passing outputs reached %.2f / %.2f / %.2f of the slice / row / L2 bounds",
                worst_slice_, worst_row_, worst_l2_);
  r.report += summary + ": " + std::to_string(judged_) + " outputs judged" + margins + "\n";
  return r;
}

void print_report(const CheckResult& r) {
  const char* flag = std::getenv("FMHA_JIT_TEST_RULE_REPORT");
  if (flag != nullptr && std::string(flag) == "1") std::printf("%s", r.report.c_str());
}

}  // namespace detail

namespace {

constexpr int kForwardSamples = 3;

std::string slice_name(int b, int h) {
  return "b " + std::to_string(b) + ", h " + std::to_string(h);
}

}  // namespace

CheckResult verify_forward(const AttentionCase& c, KernelImpl impl, std::uint32_t seed,
                           const ForwardFault& fault) {
  namespace ref = reference;
  const bool bf16 = c.dtype == DType::bf16;
  const TensorGeometry gq = geometry(c, Operand::q), gk = geometry(c, Operand::k),
                       gv = geometry(c, Operand::v), go = geometry(c, Operand::o);
  const DeviceTensor q = random_tensor(gq, bf16, seed);
  const DeviceTensor k = random_tensor(gk, bf16, seed + 1);
  const DeviceTensor v = random_tensor(gv, bf16, seed + 2);
  ForwardBuffers out = run_forward(c, impl, q, k, v);
  if (fault) {
    ForwardRun run{c, impl, q, k, v, out};
    fault(run);
  }
  const std::vector<std::uint16_t> o_bits = download_bits(out.o, go.storage());
  std::vector<float> o(o_bits.size());
  for (std::size_t i = 0; i < o.size(); ++i) o[i] = widen(o_bits[i], bf16);
  std::vector<float> lse;
  if (c.lse) {
    lse.resize(static_cast<std::size_t>(c.batch) * c.nhead_q * c.seqlen_q);
    out.lse.download(lse.data(), lse.size() * 4);
  }

  const ref::AttentionShape s = detail::shape_of(c);
  const double macs = 2.0 * c.seqlen_q * c.seqlen_k * (c.hdim_q + c.hdim_v);  // ref64 + lowp
  const auto slices = detail::slices_to_check(c.batch, c.nhead_q, macs, seed, kForwardSamples);
  detail::Judgement judgement;
  for (const detail::Slice& sl : slices) {
    const auto refs =
        ref::forward_slice_references(s, bf16, detail::view_of(q, gq), detail::view_of(k, gk),
                                      detail::view_of(v, gv), sl.batch, sl.head);
    const std::string where = slice_name(sl.batch, sl.head);
    const std::vector<float> ours = detail::slice_rows(o, go, sl.batch, sl.head);
    judgement.add("O", where,
                  ref::judge({"O", c.seqlen_q, c.hdim_v, ours, refs.ref64.o, refs.lowp.o,
                              detail::dtype_unit_roundoff(c)}));
    if (c.lse) {
      const std::span<const float> ours_lse(
          lse.data() + (static_cast<std::size_t>(sl.batch) * c.nhead_q + sl.head) * c.seqlen_q,
          static_cast<std::size_t>(c.seqlen_q));
      judgement.add("LSE", where,
                    ref::judge({"LSE", c.seqlen_q, 1, ours_lse, refs.ref64.lse, refs.lowp.lse,
                                ref::kUnitRoundoffFp32}));
    }
  }
  // Every slice, judged or not: O finite, and the LSE finite exactly where the row sees a key
  // (-inf where it sees none); the padding untouched.
  if (const auto n = detail::nonfinite_elements(o, go)) {
    judgement.fail("O", std::to_string(n) + " elements of O are NaN or infinite");
  }
  if (c.lse) {
    std::vector<bool> sees_key(static_cast<std::size_t>(c.seqlen_q));
    for (int i = 0; i < c.seqlen_q; ++i) sees_key[i] = !ref::visible_key_span(s, i).empty();
    std::int64_t wrong = 0;
    for (std::size_t e = 0; e < lse.size(); ++e) {
      const bool sees = sees_key[e % static_cast<std::size_t>(c.seqlen_q)];
      wrong += sees ? !std::isfinite(lse[e]) : !(std::isinf(lse[e]) && lse[e] < 0);
    }
    if (wrong > 0) {
      judgement.fail("LSE", std::to_string(wrong) +
                                " LSE entries are not finite where the row sees a key, or not "
                                "-inf where it sees none");
    }
  }
  if (const auto n = detail::padding_written(o_bits, go)) {
    judgement.fail("padding", std::to_string(n) + " padding elements of O were written");
  }
  return judgement.result("forward " + describe(c) + ", impl " + std::string(to_string(impl)) +
                          ", " + std::to_string(slices.size()) + " of " +
                          std::to_string(c.batch * c.nhead_q) + " slices");
}

void check_forward(const AttentionCase& c, KernelImpl impl, std::uint32_t seed) {
  const CheckResult r = verify_forward(c, impl, seed);
  detail::print_report(r);
  INFO(r.report);
  CHECK(r.pass);
}

}  // namespace fmha_jit::test
