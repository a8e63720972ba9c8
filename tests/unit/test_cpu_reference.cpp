// Unit tests of the CPU attention reference: its masks against the kernels' (the one place the two
// definitions meet), gradients against finite differences, the forward against a full-matrix
// computation, LSE and softmax normalisation, comparison (rounding: test_reference_rounding.cpp).
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/mask.h"
#include "fmha_jit/config.hpp"
#include "reference/cpu_reference.hpp"

namespace ref = fmha_jit::reference;
using ref::AttentionShape;
using ref::Layout;
using ref::Strides;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// A problem with dense tensors in one layout, held in double so the same data feeds both entry
// points.
struct Problem {
  AttentionShape s;
  Layout layout = Layout::bhsd;
  std::vector<double> q, k, v, d_o;

  Strides qs() const { return ref::dense_strides(layout, s.nhead_q, s.seqlen_q, s.hdim_q); }
  Strides ks() const { return ref::dense_strides(layout, s.nhead_k, s.seqlen_k, s.hdim_q); }
  Strides vs() const { return ref::dense_strides(layout, s.nhead_k, s.seqlen_k, s.hdim_v); }
  Strides os() const { return ref::dense_strides(layout, s.nhead_q, s.seqlen_q, s.hdim_v); }
  size_t o_size() const { return ref::dense_size(s.batch, s.nhead_q, s.seqlen_q, s.hdim_v); }
  size_t lse_size() const { return ref::dense_size(s.batch, s.nhead_q, s.seqlen_q, 1); }
};

std::vector<double> random_vector(size_t n, std::mt19937& rng, double lo = -1.0, double hi = 1.0) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> out(n);
  for (double& x : out) x = dist(rng);
  return out;
}

Problem make_problem(const AttentionShape& s, Layout layout, uint32_t seed) {
  std::mt19937 rng(seed);
  Problem p;
  p.s = s;
  p.layout = layout;
  p.q = random_vector(ref::dense_size(s.batch, s.nhead_q, s.seqlen_q, s.hdim_q), rng);
  p.k = random_vector(ref::dense_size(s.batch, s.nhead_k, s.seqlen_k, s.hdim_q), rng);
  p.v = random_vector(ref::dense_size(s.batch, s.nhead_k, s.seqlen_k, s.hdim_v), rng);
  p.d_o = random_vector(p.o_size(), rng);
  return p;
}

struct ForwardOut {
  std::vector<double> o, lse;
};

ForwardOut forward(const Problem& p) {
  ForwardOut out{std::vector<double>(p.o_size()), std::vector<double>(p.lse_size())};
  ref::attention_forward(p.s, {p.q.data(), p.qs()}, {p.k.data(), p.ks()}, {p.v.data(), p.vs()},
                         {out.o.data(), p.os()}, out.lse.data());
  return out;
}

struct Grads {
  std::vector<double> dq, dk, dv;
};

Grads backward(const Problem& p, const ForwardOut& f, bool pass_lse) {
  Grads g{std::vector<double>(p.q.size(), 7.0), std::vector<double>(p.k.size(), 7.0),
          std::vector<double>(p.v.size(), 7.0)};  // 7: proves every element is written
  ref::attention_backward(p.s, {p.q.data(), p.qs()}, {p.k.data(), p.ks()}, {p.v.data(), p.vs()},
                          {f.o.data(), p.os()}, {p.d_o.data(), p.os()},
                          pass_lse ? f.lse.data() : nullptr, {g.dq.data(), p.qs()},
                          {g.dk.data(), p.ks()}, {g.dv.data(), p.vs()});
  return g;
}

// loss = sum O * dO; dense tensors in the same layout, so an elementwise sum is layout-agnostic.
double loss(const Problem& p) {
  const ForwardOut f = forward(p);
  double sum = 0;
  for (size_t i = 0; i < f.o.size(); ++i) sum += f.o[i] * p.d_o[i];
  return sum;
}

// Central differences of loss with respect to every element of one input tensor.
// expect_nonzero: false where the gradient vanishes identically (one visible key per row makes
// softmax constant, so dQ = dK = 0).
void check_fd(Problem& p, std::vector<double>& x, const std::vector<double>& analytic,
              const std::string& what, bool expect_nonzero = true) {
  constexpr double h = 1e-5;
  double max_err = 0, max_grad = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    const double up = loss(p);
    x[i] = saved - h;
    const double down = loss(p);
    x[i] = saved;
    const double fd = (up - down) / (2 * h);
    max_err = std::max(max_err, std::fabs(fd - analytic[i]));
    max_grad = std::max(max_grad, std::fabs(analytic[i]));
  }
  INFO(what << ": max |fd - analytic| = " << max_err << ", max |grad| = " << max_grad);
  if (expect_nonzero) CHECK(max_grad > 0);
  CHECK(max_err <= 1e-6 * std::max(1.0, max_grad));
}

struct MaskCase {
  const char* name;
  int kind, left, right;
};

const MaskCase kMasks[] = {
    {"none", ref::kMaskNone, -1, -1},
    {"causal top-left", ref::kMaskCausalTopLeft, -1, -1},
    {"causal bottom-right", ref::kMaskCausalBottomRight, -1, -1},
    {"window 1,0", ref::kMaskSlidingWindow, 1, 0},
    {"window -1,1", ref::kMaskSlidingWindow, -1, 1},
    {"window 0,0", ref::kMaskSlidingWindow, 0, 0},
    {"window 2,-1", ref::kMaskSlidingWindow, 2, -1},
};

AttentionShape small_shape(const MaskCase& m, int sq, int sk) {
  AttentionShape s;
  s.batch = 2;
  s.nhead_q = 4;
  s.nhead_k = 2;
  s.seqlen_q = sq;
  s.seqlen_k = sk;
  s.hdim_q = 4;
  s.hdim_v = 3;
  s.mask_kind = m.kind;
  s.window_left = m.left;
  s.window_right = m.right;
  s.scale = 0.7;
  return s;
}

}  // namespace

// The reference's masks (masks.hpp, from the definitions) against the kernels' (common/mask.h, key
// ranges): the same keys for every row, on every kind and many shapes, including Sq != Sk, windows
// wider than the sequence, one-sided and empty windows, rows that see nothing.
TEST_CASE("the reference's masks agree with the kernels' on many shapes", "[reference][mask]") {
  static_assert(ref::kMaskNone == FMHA_MASK_NONE &&
                static_cast<int>(fmha_jit::MaskKind::none) == ref::kMaskNone);
  static_assert(ref::kMaskCausalTopLeft == FMHA_MASK_CAUSAL_TOP_LEFT &&
                static_cast<int>(fmha_jit::MaskKind::causal_top_left) == ref::kMaskCausalTopLeft);
  static_assert(ref::kMaskCausalBottomRight == FMHA_MASK_CAUSAL_BOTTOM_RIGHT &&
                static_cast<int>(fmha_jit::MaskKind::causal_bottom_right) ==
                    ref::kMaskCausalBottomRight);
  static_assert(ref::kMaskSlidingWindow == FMHA_MASK_SLIDING_WINDOW &&
                static_cast<int>(fmha_jit::MaskKind::sliding_window) == ref::kMaskSlidingWindow);
  const int lengths[] = {1, 2, 3, 7, 16, 17, 64, 65, 130};
  const int windows[] = {-1, 0, 1, 2, 5, 63, 64, 200, std::numeric_limits<int>::max()};
  int64_t compared = 0, visible = 0, mismatches = 0;
  for (int kind = ref::kMaskNone; kind <= ref::kMaskSlidingWindow; ++kind) {
    const bool window = kind == ref::kMaskSlidingWindow;
    for (int sq : lengths) {
      for (int sk : lengths) {
        for (int left : window ? std::vector<int>(std::begin(windows), std::end(windows))
                               : std::vector<int>{-1}) {
          for (int right : window ? std::vector<int>(std::begin(windows), std::end(windows))
                                  : std::vector<int>{-1}) {
            AttentionShape s;
            s.seqlen_q = sq;
            s.seqlen_k = sk;
            s.mask_kind = kind;
            s.window_left = left;
            s.window_right = right;
            for (int i = 0; i < sq; ++i) {
              const FmhaKeyRange kernel = fmha_visible_keys(kind, i, sq, sk, left, right);
              const ref::IndexSpan span = ref::visible_key_span(s, i);
              const bool kernel_empty = kernel.lo >= kernel.hi;
              if (span.empty() != kernel_empty ||
                  (!kernel_empty && (span.lo != kernel.lo || span.hi != kernel.hi))) {
                if (mismatches++ < 5) {
                  FAIL_CHECK("kind " << kind << " Sq " << sq << " Sk " << sk << " window " << left
                                     << "," << right << " row " << i);
                }
              }
              for (int j = 0; j < sk; ++j) {
                const bool mine = ref::key_visible(s, i, j);
                ++compared;
                visible += mine ? 1 : 0;
                if (mine != (j >= kernel.lo && j < kernel.hi) && mismatches++ < 5) {
                  FAIL_CHECK("kind " << kind << " Sq " << sq << " Sk " << sk << " window " << left
                                     << "," << right << " row " << i << " key " << j);
                }
              }
            }
          }
        }
      }
    }
  }
  CHECK(mismatches == 0);
  CHECK(compared > 1000000);
  CHECK(visible > 0);
  CHECK(visible < compared);
}

TEST_CASE("visible_query_span bounds the rows that see a key", "[reference][mask]") {
  for (int kind = ref::kMaskNone; kind <= ref::kMaskSlidingWindow; ++kind) {
    for (auto [sq, sk] : {std::pair{7, 13}, std::pair{13, 7}, std::pair{9, 9}}) {
      AttentionShape s;
      s.seqlen_q = sq;
      s.seqlen_k = sk;
      s.mask_kind = kind;
      if (kind == ref::kMaskSlidingWindow) s.window_left = 2, s.window_right = 1;
      for (int j = 0; j < sk; ++j) {
        const ref::IndexSpan span = ref::visible_query_span(s, j);
        for (int i = 0; i < sq; ++i) {
          INFO("kind " << kind << " Sq " << sq << " Sk " << sk << " row " << i << " key " << j);
          if (ref::key_visible(s, i, j)) CHECK((i >= span.lo && i < span.hi));
        }
        if (!span.empty()) {
          CHECK(ref::key_visible(s, span.lo, j));
          CHECK(ref::key_visible(s, span.hi - 1, j));
        }
      }
    }
  }
}

TEST_CASE("backward matches finite differences of sum(O * dO)", "[reference]") {
  for (const MaskCase& m : kMasks) {
    for (auto [sq, sk] : {std::pair{3, 5}, std::pair{5, 3}}) {
      for (Layout layout : {Layout::bhsd, Layout::bshd}) {
        INFO("mask " << m.name << ", Sq " << sq << ", Sk " << sk << ", layout "
                     << (layout == Layout::bhsd ? "bhsd" : "bshd"));
        Problem p = make_problem(small_shape(m, sq, sk), layout, 1234u + sq);
        const ForwardOut f = forward(p);
        const Grads g = backward(p, f, /*pass_lse=*/true);
        const bool one_key = m.kind == ref::kMaskSlidingWindow && m.left == 0 && m.right == 0;
        check_fd(p, p.q, g.dq, "dq", !one_key);
        check_fd(p, p.k, g.dk, "dk", !one_key);
        check_fd(p, p.v, g.dv, "dv");
        // With or without the forward's LSE, the same gradients.
        const Grads g2 = backward(p, f, /*pass_lse=*/false);
        for (size_t i = 0; i < g.dq.size(); ++i) REQUIRE(g2.dq[i] == Approx(g.dq[i]).margin(1e-14));
        for (size_t i = 0; i < g.dk.size(); ++i) REQUIRE(g2.dk[i] == Approx(g.dk[i]).margin(1e-14));
        for (size_t i = 0; i < g.dv.size(); ++i) REQUIRE(g2.dv[i] == Approx(g.dv[i]).margin(1e-14));
      }
    }
  }
}

TEST_CASE("forward matches a full-matrix computation with independent masks", "[reference]") {
  for (const MaskCase& m : kMasks) {
    for (auto [sq, sk] : {std::pair{4, 7}, std::pair{7, 4}, std::pair{5, 5}}) {
      INFO("mask " << m.name << ", Sq " << sq << ", Sk " << sk);
      const Problem p = make_problem(small_shape(m, sq, sk), Layout::bshd, 99u);
      const ForwardOut f = forward(p);
      const AttentionShape& s = p.s;
      const Strides qs = p.qs(), ks = p.ks(), vs = p.vs(), os = p.os();
      for (int b = 0; b < s.batch; ++b) {
        for (int h = 0; h < s.nhead_q; ++h) {
          const int hk = h / (s.nhead_q / s.nhead_k);
          for (int i = 0; i < sq; ++i) {
            // Naive: LSE = log sum exp(scale * s) without max subtraction, O = sum p v.
            double denom = 0;
            std::vector<double> num(s.hdim_v, 0.0);
            for (int j = 0; j < sk; ++j) {
              if (!ref::key_visible(s, i, j)) continue;
              double dotp = 0;
              for (int d = 0; d < s.hdim_q; ++d) {
                dotp += p.q[b * qs.batch + h * qs.head + i * qs.row + d] *
                        p.k[b * ks.batch + hk * ks.head + j * ks.row + d];
              }
              const double e = std::exp(s.scale * dotp);
              denom += e;
              for (int d = 0; d < s.hdim_v; ++d) {
                num[d] += e * p.v[b * vs.batch + hk * vs.head + j * vs.row + d];
              }
            }
            const double lse = f.lse[(static_cast<size_t>(b) * s.nhead_q + h) * sq + i];
            if (denom == 0) {
              CHECK(lse == -kInf);
            } else {
              CHECK(lse == Approx(std::log(denom)).epsilon(1e-13));
            }
            for (int d = 0; d < s.hdim_v; ++d) {
              const double o = f.o[b * os.batch + h * os.head + i * os.row + d];
              CHECK(o == Approx(denom == 0 ? 0.0 : num[d] / denom).margin(1e-14));
            }
          }
        }
      }
    }
  }
}

TEST_CASE("rows without visible keys: O = 0, LSE = -inf, zero gradients", "[reference]") {
  // Bottom-right causal with Sk < Sq: rows i < Sq - Sk see nothing. Window 0,0 with Sk < Sq: the
  // same rows, and each other row sees exactly one key.
  for (const MaskCase& m : {kMasks[2], kMasks[5]}) {
    INFO("mask " << m.name);
    const Problem p = make_problem(small_shape(m, 6, 2), Layout::bhsd, 5u);
    const ForwardOut f = forward(p);
    const Grads g = backward(p, f, true);
    const AttentionShape& s = p.s;
    const Strides qs = p.qs(), os = p.os();
    for (int b = 0; b < s.batch; ++b) {
      for (int h = 0; h < s.nhead_q; ++h) {
        for (int i = 0; i < s.seqlen_q; ++i) {
          const bool empty = i < s.seqlen_q - s.seqlen_k;
          const double lse = f.lse[(static_cast<size_t>(b) * s.nhead_q + h) * s.seqlen_q + i];
          if (empty) {
            CHECK(lse == -kInf);
            for (int d = 0; d < s.hdim_v; ++d)
              CHECK(f.o[b * os.batch + h * os.head + i * os.row + d] == 0.0);
            for (int d = 0; d < s.hdim_q; ++d)
              CHECK(g.dq[b * qs.batch + h * qs.head + i * qs.row + d] == 0.0);
          } else {
            CHECK(std::isfinite(lse));
          }
        }
      }
    }
  }
  // Window 0,0 with Sq > Sk and a key nobody sees: Sq = 2, Sk = 4 makes keys 0 and 1 invisible.
  const Problem p = make_problem(small_shape(kMasks[5], 2, 4), Layout::bshd, 6u);
  const ForwardOut f = forward(p);
  const Grads g = backward(p, f, true);
  const Strides ks = p.ks(), vs = p.vs();
  for (int b = 0; b < p.s.batch; ++b) {
    for (int hk = 0; hk < p.s.nhead_k; ++hk) {
      for (int j = 0; j < 4; ++j) {
        double nk = 0, nv = 0;
        for (int d = 0; d < p.s.hdim_q; ++d)
          nk += std::fabs(g.dk[b * ks.batch + hk * ks.head + j * ks.row + d]);
        for (int d = 0; d < p.s.hdim_v; ++d)
          nv += std::fabs(g.dv[b * vs.batch + hk * vs.head + j * vs.row + d]);
        if (j < 2) {
          CHECK(nk == 0.0);
          CHECK(nv == 0.0);
        } else {
          CHECK(nv > 0.0);
        }
      }
    }
  }
}

TEST_CASE("softmax rows sum to one: V = ones gives O = ones", "[reference]") {
  for (const MaskCase& m : kMasks) {
    Problem p = make_problem(small_shape(m, 5, 6), Layout::bhsd, 11u);
    std::fill(p.v.begin(), p.v.end(), 1.0);
    const ForwardOut f = forward(p);
    // Dense BHSD: LSE entry i belongs to O row i.
    for (size_t i = 0; i < f.lse.size(); ++i) {
      const bool empty = std::isinf(f.lse[i]);
      for (int d = 0; d < p.s.hdim_v; ++d) {
        CHECK(f.o[i * p.s.hdim_v + d] == Approx(empty ? 0.0 : 1.0).margin(1e-14));
      }
    }
  }
}

TEST_CASE("float entry points and non-dense strides agree with the double path", "[reference]") {
  AttentionShape s = small_shape(kMasks[3], 6, 9);
  s.hdim_q = 8;
  s.hdim_v = 5;
  const Problem p = make_problem(s, Layout::bhsd, 21u);
  const ForwardOut fd = forward(p);
  const Grads gd = backward(p, fd, true);

  // The same logical tensors in a padded BSHD layout (row stride larger than needed).
  auto padded = [&](int nhead, int seqlen, int hdim) {
    const int64_t row = int64_t(nhead) * (hdim + 1) + 3;
    return Strides{seqlen * row, hdim + 1, row};
  };
  auto scatter = [&](const std::vector<double>& src, Strides dense, Strides dst_s, int nhead,
                     int seqlen, int hdim) {
    std::vector<float> dst(size_t(s.batch) * dst_s.batch, -99.0f);
    for (int b = 0; b < s.batch; ++b)
      for (int h = 0; h < nhead; ++h)
        for (int i = 0; i < seqlen; ++i)
          for (int d = 0; d < hdim; ++d)
            dst[b * dst_s.batch + h * dst_s.head + i * dst_s.row + d] =
                static_cast<float>(src[b * dense.batch + h * dense.head + i * dense.row + d]);
    return dst;
  };
  const Strides qp = padded(s.nhead_q, s.seqlen_q, s.hdim_q),
                kp = padded(s.nhead_k, s.seqlen_k, s.hdim_q);
  const Strides vp = padded(s.nhead_k, s.seqlen_k, s.hdim_v),
                op = padded(s.nhead_q, s.seqlen_q, s.hdim_v);
  const auto q = scatter(p.q, p.qs(), qp, s.nhead_q, s.seqlen_q, s.hdim_q);
  const auto k = scatter(p.k, p.ks(), kp, s.nhead_k, s.seqlen_k, s.hdim_q);
  const auto v = scatter(p.v, p.vs(), vp, s.nhead_k, s.seqlen_k, s.hdim_v);
  const auto d_o = scatter(p.d_o, p.os(), op, s.nhead_q, s.seqlen_q, s.hdim_v);
  std::vector<float> o(size_t(s.batch) * op.batch), lse(p.lse_size());
  std::vector<float> dq(q.size()), dk(k.size()), dv(v.size());
  ref::attention_forward(s, {q.data(), qp}, {k.data(), kp}, {v.data(), vp}, {o.data(), op},
                         lse.data());
  ref::attention_backward(s, {q.data(), qp}, {k.data(), kp}, {v.data(), vp}, {o.data(), op},
                          {d_o.data(), op}, lse.data(), {dq.data(), qp}, {dk.data(), kp},
                          {dv.data(), vp});

  auto check = [&](const std::vector<float>& got, const std::vector<double>& want, Strides gs,
                   Strides ws, int nhead, int seqlen, int hdim) {
    for (int b = 0; b < s.batch; ++b)
      for (int h = 0; h < nhead; ++h)
        for (int i = 0; i < seqlen; ++i)
          for (int d = 0; d < hdim; ++d)
            REQUIRE(got[b * gs.batch + h * gs.head + i * gs.row + d] ==
                    Approx(want[b * ws.batch + h * ws.head + i * ws.row + d]).margin(1e-6));
  };
  check(o, fd.o, op, p.os(), s.nhead_q, s.seqlen_q, s.hdim_v);
  check(dq, gd.dq, qp, p.qs(), s.nhead_q, s.seqlen_q, s.hdim_q);
  check(dk, gd.dk, kp, p.ks(), s.nhead_k, s.seqlen_k, s.hdim_q);
  check(dv, gd.dv, vp, p.vs(), s.nhead_k, s.seqlen_k, s.hdim_v);
  for (size_t i = 0; i < lse.size(); ++i) {
    if (std::isinf(fd.lse[i])) {
      CHECK(std::isinf(lse[i]));
    } else {
      CHECK(lse[i] == Approx(fd.lse[i]).margin(1e-6));
    }
  }
  // Padding is never written.
  for (size_t i = 0; i < o.size(); ++i) {
    const int64_t in_row = int64_t(i % op.batch) % op.row;
    if (in_row >= s.nhead_q * (s.hdim_v + 1)) CHECK(o[i] == 0.0f);
  }
}

TEST_CASE("validate rejects bad shapes", "[reference]") {
  AttentionShape s;
  CHECK_NOTHROW(ref::validate(s));
  s.nhead_q = 3;
  s.nhead_k = 2;
  CHECK_THROWS_AS(ref::validate(s), std::invalid_argument);
  s = AttentionShape{};
  s.seqlen_k = 0;
  CHECK_THROWS_AS(ref::validate(s), std::invalid_argument);
  s = AttentionShape{};
  s.mask_kind = 7;
  CHECK_THROWS_WITH(ref::validate(s), Catch::Contains("mask_kind = 7"));
  s = AttentionShape{};
  s.mask_kind = ref::kMaskSlidingWindow;
  s.window_right = -2;
  CHECK_THROWS_WITH(ref::validate(s), Catch::Contains("window_right = -2") &&
                                          Catch::Contains("-1 (unbounded) or >= 0"));
}

TEST_CASE("dense_strides", "[reference]") {
  const Strides a = ref::dense_strides(Layout::bhsd, 3, 5, 7);
  CHECK((a.batch == 105 && a.head == 35 && a.row == 7));
  const Strides b = ref::dense_strides(Layout::bshd, 3, 5, 7);
  CHECK((b.batch == 105 && b.head == 7 && b.row == 21));
  CHECK(ref::dense_size(2, 3, 5, 7) == 210);
}

TEST_CASE("compare", "[reference]") {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  {
    const float ref_v[] = {1.0f, -2.0f, 4.0f, -inf};
    const float got[] = {1.0f, -2.5f, 4.0f, -inf};
    const ref::ErrorStats st = ref::compare(got, ref_v, 4);
    CHECK(st.count == 4);
    CHECK(st.max_abs == Approx(0.5));
    CHECK(st.max_rel == Approx(0.5 / 4.0));
    CHECK(st.rel_l2 == Approx(0.5 / std::sqrt(21.0)));
    CHECK(st.nan_count == 0);
    CHECK(st.nonfinite_mismatch == 0);
    CHECK(st.ok(0.2));
    CHECK_FALSE(st.ok(0.1));
  }
  {
    const float ref_v[] = {1.0f, -inf, 3.0f};
    const float got[] = {nan, 0.0f, 3.0f};
    const ref::ErrorStats st = ref::compare(got, ref_v, 3);
    CHECK(st.nan_count == 1);
    CHECK(st.nonfinite_mismatch == 1);
    CHECK(st.max_abs == 0.0);
    CHECK_FALSE(st.ok(1.0));
  }
  {
    const float zeros[] = {0.0f, 0.0f};
    const float got[] = {0.0f, 1e-3f};
    CHECK(ref::compare(zeros, zeros, 2).max_rel == 0.0);
    CHECK(std::isinf(ref::compare(got, zeros, 2).max_rel));
  }
}

TEST_CASE("dtype_tolerance is ordered sensibly", "[reference]") {
  using ref::Quantity;
  for (Quantity qn : {Quantity::forward_output, Quantity::gradient}) {
    CHECK(ref::dtype_tolerance(true, qn) > ref::dtype_tolerance(false, qn));
    CHECK(ref::dtype_tolerance(false, qn) >= 0x1p-11);
  }
  CHECK(ref::dtype_tolerance(false, Quantity::gradient) >
        ref::dtype_tolerance(false, Quantity::forward_output));
  CHECK(ref::dtype_tolerance(true, Quantity::lse) < 1e-3);
}

TEST_CASE("a problem large enough to use threads gives the double path's result", "[reference]") {
  AttentionShape s = small_shape(kMasks[2], 96, 128);
  s.batch = 1;
  s.hdim_q = 64;
  s.hdim_v = 64;
  s.scale = 0.125;
  const Problem p = make_problem(s, Layout::bshd, 77u);
  const ForwardOut fd = forward(p);
  const Grads gd = backward(p, fd, true);
  auto to_float = [](const std::vector<double>& x) {
    return std::vector<float>(x.begin(), x.end());
  };
  const auto q = to_float(p.q), k = to_float(p.k), v = to_float(p.v), d_o = to_float(p.d_o);
  std::vector<float> o(p.o_size()), lse(p.lse_size()), dq(q.size()), dk(k.size()), dv(v.size());
  ref::attention_forward(s, {q.data(), p.qs()}, {k.data(), p.ks()}, {v.data(), p.vs()},
                         {o.data(), p.os()}, lse.data());
  ref::attention_backward(s, {q.data(), p.qs()}, {k.data(), p.ks()}, {v.data(), p.vs()},
                          {o.data(), p.os()}, {d_o.data(), p.os()}, lse.data(), {dq.data(), p.qs()},
                          {dk.data(), p.ks()}, {dv.data(), p.vs()});
  const std::pair<const std::vector<float>*, const std::vector<double>*> pairs[] = {
      {&o, &fd.o}, {&lse, &fd.lse}, {&dq, &gd.dq}, {&dk, &gd.dk}, {&dv, &gd.dv}};
  for (const auto& [got, want] : pairs) {
    const std::vector<float> want_f = to_float(*want);
    const ref::ErrorStats st = ref::compare(got->data(), want_f.data(), got->size());
    INFO("max_rel " << st.max_rel);
    CHECK(st.ok(1e-5));
  }
}

TEST_CASE("compare: an all-zero reference accepts rounding noise only", "[reference]") {
  const std::vector<float> zero(8, 0.f), noise(8, 5e-7f), wrong(8, 1e-2f);
  CHECK(fmha_jit::reference::compare(noise.data(), zero.data(), 8).ok(0.0625));
  CHECK_FALSE(fmha_jit::reference::compare(wrong.data(), zero.data(), 8).ok(0.0625));
}
