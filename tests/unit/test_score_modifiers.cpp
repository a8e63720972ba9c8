// Unit tests of the reference's score modifiers (AttentionShape::softcap and ::sinks): ref64's
// gradients against finite differences of its own forward, the limits in which a modifier vanishes,
// lowp against ref64, rows that see no key but a sink, and the whole-problem reference against the
// slices.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "reference/parallel.hpp"
#include "unit/reference_problems.hpp"

namespace ref = fmha_jit::reference;
using fmha_jit::test::make_rounded_problem;
using fmha_jit::test::RoundedProblem;
using ref::AttentionShape;
using ref::Layout;

namespace {

struct MaskCase {
  const char* name;
  int kind, left, right;
};

const MaskCase kNone{"none", ref::kMaskNone, -1, -1};
const MaskCase kTopLeft{"causal top-left", ref::kMaskCausalTopLeft, -1, -1};
// With Sq > Sk its first Sq - Sk rows see no key.
const MaskCase kBottomRight{"causal bottom-right", ref::kMaskCausalBottomRight, -1, -1};
const MaskCase kWindow{"window 2,1", ref::kMaskSlidingWindow, 2, 1};

AttentionShape shape(const MaskCase& m, int sq, int sk, int hdim_q, int hdim_v, double scale) {
  AttentionShape s;
  s.batch = 2;
  s.nhead_q = 4;
  s.nhead_k = 2;
  s.seqlen_q = sq;
  s.seqlen_k = sk;
  s.hdim_q = hdim_q;
  s.hdim_v = hdim_v;
  s.mask_kind = m.kind;
  s.window_left = m.left;
  s.window_right = m.right;
  s.scale = scale;
  return s;
}

// One sink per query head of shape(): of the size of the rows' LSE, so that the sink takes a share
// of every row that neither vanishes nor dominates. Exact in bf16, so steps of 2^-12 stay exact.
std::vector<float> sinks_for(const AttentionShape& s) {
  const float pattern[] = {0.5f, -1.0f, 1.25f, 2.0f, -0.25f, 0.75f};
  std::vector<float> out(static_cast<std::size_t>(s.nhead_q));
  for (std::size_t h = 0; h < out.size(); ++h) out[h] = pattern[h % 6];
  return out;
}

bool sees_no_key(const AttentionShape& s, int i) { return ref::visible_key_span(s, i).empty(); }

// max |a - b| relative to max(1, max |b|); identical infinities count as equal.
double max_rel_diff(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double diff = 0, scale = 1;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isinf(b[i]) && a[i] == b[i]) continue;
    diff = std::max(diff, std::fabs(a[i] - b[i]));
    scale = std::max(scale, std::fabs(b[i]));
  }
  return diff / scale;
}

// The backward's O and LSE, from ref64's forward with O rounded to fp32 only (not to the dtype):
// then D = rowsum(dO * O) is the D of the exact forward to fp32 accuracy, and the backward is the
// gradient of the loss the finite differences see.
void with_fp32_backward_inputs(RoundedProblem& p) {
  const AttentionShape& s = p.s;
  p.o.assign(ref::dense_size(s.batch, s.nhead_q, s.seqlen_q, s.hdim_v), 0.f);
  p.lse.assign(ref::dense_size(s.batch, s.nhead_q, s.seqlen_q, 1), 0.f);
  const ref::MutableTensorView o{p.o.data(), p.o_strides()};
  for (int b = 0; b < s.batch; ++b) {
    for (int h = 0; h < s.nhead_q; ++h) {
      const ref::ForwardSlice f = ref::forward_slice_ref64(s, p.qv(), p.kv(), p.vv(), b, h);
      for (int i = 0; i < s.seqlen_q; ++i) {
        for (int d = 0; d < s.hdim_v; ++d) {
          o.row(b, h, i)[d] = static_cast<float>(f.o[static_cast<std::size_t>(i) * s.hdim_v + d]);
        }
        p.lse[p.lse_index(b, h, i)] = static_cast<float>(f.lse[static_cast<std::size_t>(i)]);
      }
    }
  }
}

// loss = sum O * G over the whole problem, O from ref64's forward slices, G = p.d_o (the gradient
// the backward is given as dO).
double loss(const RoundedProblem& p) {
  const AttentionShape& s = p.s;
  const ref::TensorView g{p.d_o.data(), p.o_strides()};
  double sum = 0;
  for (int b = 0; b < s.batch; ++b) {
    for (int h = 0; h < s.nhead_q; ++h) {
      const ref::ForwardSlice f = ref::forward_slice_ref64(s, p.qv(), p.kv(), p.vv(), b, h);
      for (int i = 0; i < s.seqlen_q; ++i) {
        for (int d = 0; d < s.hdim_v; ++d) {
          sum += f.o[static_cast<std::size_t>(i) * s.hdim_v + d] * g.row(b, h, i)[d];
        }
      }
    }
  }
  return sum;
}

// ref64's gradients of the whole problem, each laid out as its input (sinks: one per query head).
struct Gradients {
  std::vector<double> dq, dk, dv, dsinks;
};

Gradients ref64_gradients(const RoundedProblem& p) {
  const AttentionShape& s = p.s;
  Gradients out{std::vector<double>(p.q.size()), std::vector<double>(p.k.size()),
                std::vector<double>(p.v.size()),
                std::vector<double>(s.sinks != nullptr ? s.nhead_q : 0, 0.0)};
  const auto scatter = [](const std::vector<double>& rows, std::size_t first, ref::Strides st,
                          std::vector<double>& dst, int b, int h, int n, int cols) {
    for (int r = 0; r < n; ++r) {
      for (int d = 0; d < cols; ++d) {
        dst[static_cast<std::size_t>(b * st.batch + h * st.head + r * st.row + d)] =
            rows[first + static_cast<std::size_t>(r) * cols + d];
      }
    }
  };
  for (int b = 0; b < s.batch; ++b) {
    for (int hk = 0; hk < s.nhead_k; ++hk) {
      const ref::BackwardSlice g = ref::backward_slice_ref64(s, p.backward_inputs(), b, hk);
      REQUIRE(g.dsinks.size() == (s.sinks != nullptr ? static_cast<std::size_t>(s.group()) : 0));
      for (int gi = 0; gi < s.group(); ++gi) {
        const int h = hk * s.group() + gi;
        scatter(g.dq, static_cast<std::size_t>(gi) * s.seqlen_q * s.hdim_q, p.q_strides(), out.dq,
                b, h, s.seqlen_q, s.hdim_q);
        if (s.sinks != nullptr) out.dsinks[static_cast<std::size_t>(h)] += g.dsinks[gi];
      }
      scatter(g.dk, 0, p.k_strides(), out.dk, b, hk, s.seqlen_k, s.hdim_q);
      scatter(g.dv, 0, p.v_strides(), out.dv, b, hk, s.seqlen_k, s.hdim_v);
    }
  }
  return out;
}

// Central differences of loss with respect to every element of x (an input of p, float), against
// the analytic gradient. The step is taken from the float actually stored, so that the inputs'
// float precision does not enter the quotient.
void check_fd(RoundedProblem& p, std::vector<float>& x, const std::vector<double>& analytic,
              const std::string& what) {
  REQUIRE(x.size() == analytic.size());
  constexpr float h = 0x1p-12f;
  double max_err = 0, max_grad = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float saved = x[i];
    x[i] = saved + h;
    const double x_up = x[i], up = loss(p);
    x[i] = saved - h;
    const double x_down = x[i], down = loss(p);
    x[i] = saved;
    const double fd = (up - down) / (x_up - x_down);
    max_err = std::max(max_err, std::fabs(fd - analytic[i]));
    max_grad = std::max(max_grad, std::fabs(analytic[i]));
  }
  INFO(what << ": max |fd - analytic| = " << max_err << ", max |grad| = " << max_grad);
  CHECK(max_grad > 1e-3);
  CHECK(max_err <= 2e-6 * std::max(1.0, max_grad));
}

struct ModifierCase {
  const char* name;
  double softcap;
  bool sinks;
};

}  // namespace

TEST_CASE("score modifiers: ref64 gradients match finite differences", "[reference][slice]") {
  const ModifierCase cases[] = {{"softcap", 1.5, false}, {"sinks", 0, true}, {"both", 2.0, true}};
  for (const ModifierCase& c : cases) {
    // Sq > Sk: bottom-right leaves rows that see no key, top-left rows that see a single one.
    for (const MaskCase& m : {kNone, kTopLeft, kBottomRight, kWindow}) {
      INFO(c.name << ", mask " << m.name);
      RoundedProblem p = make_rounded_problem(shape(m, 7, 5, 4, 3, 0.7), true, Layout::bshd, 11u);
      p.s.softcap = c.softcap;
      std::vector<float> sinks = sinks_for(p.s);
      if (c.sinks) p.s.sinks = sinks.data();
      with_fp32_backward_inputs(p);
      const Gradients g = ref64_gradients(p);
      check_fd(p, p.q, g.dq, "dq");
      check_fd(p, p.k, g.dk, "dk");
      check_fd(p, p.v, g.dv, "dv");
      if (c.sinks) check_fd(p, sinks, g.dsinks, "dsinks");
    }
  }
}

TEST_CASE("score modifiers: a huge softcap and a very negative sink change nothing",
          "[reference][slice]") {
  RoundedProblem plain =
      make_rounded_problem(shape(kBottomRight, 40, 30, 32, 16, 0.25), true, Layout::bhsd, 12u);
  fmha_jit::test::with_backward_inputs(plain);
  const AttentionShape& s = plain.s;
  const auto forward = [](const RoundedProblem& p, int b, int h) {
    return ref::forward_slice_references(p.s, true, p.qv(), p.kv(), p.vv(), b, h);
  };
  const auto backward = [](const RoundedProblem& p, int b, int hk) {
    return ref::backward_slice_references(p.s, true, p.backward_inputs(), b, hk);
  };

  SECTION("softcap 1e6") {
    RoundedProblem capped = plain;
    capped.s.softcap = 1e6;
    const auto f0 = forward(plain, 1, 3), f1 = forward(capped, 1, 3);
    const auto g0 = backward(plain, 1, 1), g1 = backward(capped, 1, 1);
    // Scores of a few units move by about s^3 / (3 cap^2), 1e-11 of them.
    CHECK(max_rel_diff(f1.ref64.o, f0.ref64.o) < 1e-9);
    CHECK(max_rel_diff(f1.ref64.lse, f0.ref64.lse) < 1e-9);
    CHECK(max_rel_diff(g1.ref64.dq, g0.ref64.dq) < 1e-9);
    CHECK(max_rel_diff(g1.ref64.dk, g0.ref64.dk) < 1e-9);
    CHECK(max_rel_diff(g1.ref64.dv, g0.ref64.dv) < 1e-9);
    // lowp caps in fp32: the scores move by an fp32 rounding, which may move a dtype rounding.
    CHECK(max_rel_diff(f1.lowp.lse, f0.lowp.lse) < 1e-6);
    CHECK(max_rel_diff(f1.lowp.o, f0.lowp.o) < 0x1p-7);
    CHECK(max_rel_diff(g1.lowp.dq, g0.lowp.dq) < 0x1p-6);
  }

  SECTION("sinks -1e4") {
    RoundedProblem sunk = plain;
    const std::vector<float> sinks(static_cast<std::size_t>(s.nhead_q), -1e4f);
    sunk.s.sinks = sinks.data();
    fmha_jit::test::with_backward_inputs(sunk);
    for (int h = 0; h < s.nhead_q; ++h) {
      const auto f0 = forward(plain, 0, h), f1 = forward(sunk, 0, h);
      for (const auto& [with, without] :
           {std::pair{&f1.ref64, &f0.ref64}, std::pair{&f1.lowp, &f0.lowp}}) {
        CHECK(max_rel_diff(with->o, without->o) < 1e-15);
        for (int i = 0; i < s.seqlen_q; ++i) {
          INFO("head " << h << ", row " << i);
          if (sees_no_key(s, i)) {
            CHECK(with->lse[i] == -1e4);
          } else {
            CHECK(with->lse[i] == Approx(without->lse[i]).epsilon(1e-15));
          }
        }
      }
    }
    for (int hk = 0; hk < s.nhead_k; ++hk) {
      const auto g0 = backward(plain, 1, hk), g1 = backward(sunk, 1, hk);
      for (const auto& [with, without] :
           {std::pair{&g1.ref64, &g0.ref64}, std::pair{&g1.lowp, &g0.lowp}}) {
        CHECK(max_rel_diff(with->dq, without->dq) < 1e-15);
        CHECK(max_rel_diff(with->dk, without->dk) < 1e-15);
        CHECK(max_rel_diff(with->dv, without->dv) < 1e-15);
        CHECK(without->dsinks.empty());
        CHECK(with->dsinks == std::vector<double>(static_cast<std::size_t>(s.group()), 0.0));
      }
    }
  }
}

TEST_CASE("score modifiers: lowp is a computation in the dtype, a few roundings from ref64",
          "[reference][slice]") {
  for (bool bf16 : {true, false}) {
    const double u = bf16 ? 0x1p-8 : 0x1p-11;
    for (const MaskCase& m : {kNone, kTopLeft, kBottomRight, kWindow}) {
      for (const ModifierCase& c :
           {ModifierCase{"softcap", 5.0, false}, {"sinks", 0, true}, {"both", 8.0, true}}) {
        INFO((bf16 ? "bf16" : "fp16") << ", mask " << m.name << ", " << c.name);
        AttentionShape s = shape(m, 90, 70, 64, 64, 0.125);
        s.softcap = c.softcap;
        const std::vector<float> sinks = sinks_for(s);
        if (c.sinks) s.sinks = sinks.data();
        RoundedProblem p = make_rounded_problem(s, bf16, Layout::bshd, 13u);
        fmha_jit::test::with_backward_inputs(p);
        const auto f = ref::forward_slice_references(p.s, bf16, p.qv(), p.kv(), p.vv(), 1, 3);
        const auto g = ref::backward_slice_references(p.s, bf16, p.backward_inputs(), 1, 1);
        const std::pair<const std::vector<double>*, const std::vector<double>*> outputs[] = {
            {&f.lowp.o, &f.ref64.o},
            {&g.lowp.dq, &g.ref64.dq},
            {&g.lowp.dk, &g.ref64.dk},
            {&g.lowp.dv, &g.ref64.dv}};
        for (const auto& [lowp, exact] : outputs) {
          int not_representable = 0;
          for (double x : *lowp) {
            not_representable +=
                static_cast<double>(ref::round_to_dtype(static_cast<float>(x), bf16)) == x ? 0 : 1;
          }
          CHECK(not_representable == 0);
          const double rel = max_rel_diff(*lowp, *exact);
          CHECK(rel > u / 64);
          CHECK(rel < 8 * u);
        }
        CHECK(max_rel_diff(f.lowp.lse, f.ref64.lse) < 1e-5);
        REQUIRE(g.lowp.dsinks.size() == g.ref64.dsinks.size());
        for (std::size_t h = 0; h < g.ref64.dsinks.size(); ++h) {
          INFO("group head " << h);
          const double lowp = g.lowp.dsinks[h], exact = g.ref64.dsinks[h];
          // fp32, as the kernels' sink gradient; its terms are fp32 products of the same D.
          CHECK(static_cast<double>(static_cast<float>(lowp)) == lowp);
          CHECK(std::fabs(exact) > 1e-2);
          CHECK(std::fabs(lowp - exact) <= 2e-5 * std::max(1.0, std::fabs(exact)));
        }
      }
    }
  }
}

TEST_CASE("score modifiers: a row that sees no key but a sink has O = 0 and LSE = sink",
          "[reference][slice]") {
  for (double softcap : {0.0, 3.0}) {
    INFO("softcap " << softcap);
    AttentionShape s = shape(kBottomRight, 12, 5, 16, 8, 0.25);
    s.softcap = softcap;
    const std::vector<float> sinks = sinks_for(s);
    s.sinks = sinks.data();
    RoundedProblem p = make_rounded_problem(s, false, Layout::bhsd, 14u);
    fmha_jit::test::with_backward_inputs(p);
    int empty_rows = 0;
    for (int i = 0; i < s.seqlen_q; ++i) empty_rows += sees_no_key(s, i) ? 1 : 0;
    REQUIRE(empty_rows == s.seqlen_q - s.seqlen_k);
    for (int h = 0; h < s.nhead_q; ++h) {
      const auto f = ref::forward_slice_references(p.s, false, p.qv(), p.kv(), p.vv(), 1, h);
      for (int i = 0; i < s.seqlen_q; ++i) {
        INFO("head " << h << ", row " << i);
        if (!sees_no_key(s, i)) {
          CHECK(f.ref64.lse[i] > sinks[h]);
          continue;
        }
        for (const ref::ForwardSlice* out : {&f.ref64, &f.lowp}) {
          CHECK(out->lse[i] == static_cast<double>(sinks[h]));
          for (int d = 0; d < s.hdim_v; ++d) CHECK(out->o[i * s.hdim_v + d] == 0.0);
        }
      }
    }
    // Such a row has no score to differentiate.
    const auto g = ref::backward_slice_references(p.s, false, p.backward_inputs(), 1, 0);
    for (const ref::BackwardSlice* out : {&g.ref64, &g.lowp}) {
      for (int gi = 0; gi < s.group(); ++gi) {
        for (int i = 0; i < s.seqlen_q && sees_no_key(s, i); ++i) {
          for (int d = 0; d < s.hdim_q; ++d) {
            CHECK(out->dq[(static_cast<std::size_t>(gi) * s.seqlen_q + i) * s.hdim_q + d] == 0.0);
          }
        }
      }
    }
  }
}

TEST_CASE("score modifiers: slice ref64 matches the whole-problem fp64 reference",
          "[reference][slice]") {
  for (const MaskCase& m : {kNone, kBottomRight, kWindow}) {
    for (auto [sq, sk] : {std::pair{37, 30}, std::pair{30, 37}}) {
      INFO("mask " << m.name << ", Sq " << sq << ", Sk " << sk);
      AttentionShape s = shape(m, sq, sk, 24, 16, 0.3);
      s.softcap = 2.5;
      const std::vector<float> sinks = sinks_for(s);
      s.sinks = sinks.data();
      RoundedProblem p =
          make_rounded_problem(s, true, Layout::bshd, static_cast<std::uint32_t>(sq));
      fmha_jit::test::with_backward_inputs(p);
      const auto widen = [](const std::vector<float>& x) {
        return std::vector<double>(x.begin(), x.end());
      };
      const std::vector<double> q = widen(p.q), k = widen(p.k), v = widen(p.v), o = widen(p.o),
                                d_o = widen(p.d_o);
      std::vector<double> o_ref(o.size()), lse_ref(p.lse.size());
      std::vector<double> dq_ref(q.size()), dk_ref(k.size()), dv_ref(v.size());
      std::vector<double> dsinks_ref(static_cast<std::size_t>(s.nhead_q), 7.0);
      ref::attention_forward(s, {q.data(), p.q_strides()}, {k.data(), p.k_strides()},
                             {v.data(), p.v_strides()}, {o_ref.data(), p.o_strides()},
                             lse_ref.data());
      ref::attention_backward(s, {q.data(), p.q_strides()}, {k.data(), p.k_strides()},
                              {v.data(), p.v_strides()}, {o.data(), p.o_strides()},
                              {d_o.data(), p.o_strides()}, nullptr, {dq_ref.data(), p.q_strides()},
                              {dk_ref.data(), p.k_strides()}, {dv_ref.data(), p.v_strides()},
                              dsinks_ref.data());
      for (int b = 0; b < s.batch; ++b) {
        for (int h = 0; h < s.nhead_q; ++h) {
          const ref::ForwardSlice f = ref::forward_slice_ref64(s, p.qv(), p.kv(), p.vv(), b, h);
          const ref::TensorViewF64 ov{o_ref.data(), p.o_strides()};
          std::vector<double> o_want;
          for (int i = 0; i < sq; ++i)
            o_want.insert(o_want.end(), ov.row(b, h, i), ov.row(b, h, i) + s.hdim_v);
          CHECK(max_rel_diff(f.o, o_want) < 1e-13);
          const std::vector<double> lse(lse_ref.begin() + p.lse_index(b, h, 0),
                                        lse_ref.begin() + p.lse_index(b, h, 0) + sq);
          CHECK(max_rel_diff(f.lse, lse) < 1e-13);
        }
      }
      const Gradients g = ref64_gradients(p);
      CHECK(max_rel_diff(g.dq, dq_ref) < 1e-12);
      CHECK(max_rel_diff(g.dk, dk_ref) < 1e-12);
      CHECK(max_rel_diff(g.dv, dv_ref) < 1e-12);
      CHECK(max_rel_diff(g.dsinks, dsinks_ref) < 1e-12);
    }
  }
}

TEST_CASE("score modifiers: results do not depend on the thread count", "[reference][slice]") {
  AttentionShape s = shape(kTopLeft, 200, 233, 64, 64, 0.125);
  s.softcap = 4.0;
  const std::vector<float> sinks = sinks_for(s);
  s.sinks = sinks.data();
  RoundedProblem p = make_rounded_problem(s, false, Layout::bshd, 15u);
  fmha_jit::test::with_backward_inputs(p);
  std::vector<std::vector<double>> runs[2];
  for (int t = 0; t < 2; ++t) {
    ref::set_thread_limit(t == 0 ? 1 : 5);
    const auto f = ref::forward_slice_references(p.s, false, p.qv(), p.kv(), p.vv(), 1, 2);
    const auto g = ref::backward_slice_references(p.s, false, p.backward_inputs(), 1, 1);
    runs[t] = {f.ref64.o,  f.ref64.lse, f.lowp.o,  f.lowp.lse, g.ref64.dq,     g.ref64.dk,
               g.ref64.dv, g.lowp.dq,   g.lowp.dk, g.lowp.dv,  g.ref64.dsinks, g.lowp.dsinks};
  }
  ref::set_thread_limit(0);
  for (std::size_t i = 0; i < runs[0].size(); ++i) {
    INFO("output " << i);
    CHECK(runs[0][i] == runs[1][i]);
  }
}

TEST_CASE("score modifiers: validate rejects a bad softcap", "[reference]") {
  AttentionShape s = shape(kNone, 4, 4, 8, 8, 0.5);
  for (double bad : {-1.0, std::nan(""), HUGE_VAL}) {
    s.softcap = bad;
    CHECK_THROWS_WITH(ref::validate(s), Catch::Contains("softcap"));
  }
  s.softcap = 0;
  CHECK_NOTHROW(ref::validate(s));
  s.softcap = 30;
  CHECK_NOTHROW(ref::validate(s));
}
