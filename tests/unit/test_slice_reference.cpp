// Unit tests of the per-slice references (reference/slice_reference.hpp): ref64 against the
// whole-problem fp64 reference (itself checked against finite differences), lowp as a computation
// in the dtype, rows and keys that nothing sees, independence of the thread count, bad arguments.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <thread>
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

const MaskCase kMasks[] = {
    {"none", ref::kMaskNone, -1, -1},
    {"causal top-left", ref::kMaskCausalTopLeft, -1, -1},
    {"causal bottom-right", ref::kMaskCausalBottomRight, -1, -1},
    {"window 9,3", ref::kMaskSlidingWindow, 9, 3},
    {"window -1,0", ref::kMaskSlidingWindow, -1, 0},
};

AttentionShape shape(const MaskCase& m, int sq, int sk, int hdim_q, int hdim_v) {
  AttentionShape s;
  s.batch = 2;
  s.nhead_q = 6;
  s.nhead_k = 2;
  s.seqlen_q = sq;
  s.seqlen_k = sk;
  s.hdim_q = hdim_q;
  s.hdim_v = hdim_v;
  s.mask_kind = m.kind;
  s.window_left = m.left;
  s.window_right = m.right;
  s.scale = 1.0 / std::sqrt(double(hdim_q));
  return s;
}

// max |a - b| over the slice, relative to max(1, max |b|); identical infinities count as equal.
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

// Rows [0, rows) of head (b, h) of a whole-problem tensor, as a slice's row-major rows.
std::vector<double> head_rows(const std::vector<double>& t, ref::Strides st, int b, int h, int rows,
                              int cols) {
  std::vector<double> out;
  const ref::TensorViewF64 view{t.data(), st};
  for (int r = 0; r < rows; ++r) out.insert(out.end(), view.row(b, h, r), view.row(b, h, r) + cols);
  return out;
}

bool representable(double x, bool bf16) {
  return std::isinf(x) ||
         static_cast<double>(ref::round_to_dtype(static_cast<float>(x), bf16)) == x;
}

}  // namespace

TEST_CASE("slice ref64 matches the whole-problem fp64 reference", "[reference][slice]") {
  for (const MaskCase& m : kMasks) {
    for (auto [sq, sk] : {std::pair{37, 70}, std::pair{70, 37}}) {
      for (auto [dq, dv] : {std::pair{64, 64}, std::pair{40, 24}}) {
        INFO("mask " << m.name << ", Sq " << sq << ", Sk " << sk << ", hdim " << dq << "x" << dv);
        RoundedProblem p = make_rounded_problem(shape(m, sq, sk, dq, dv), true, Layout::bshd,
                                                static_cast<std::uint32_t>(sq * 7 + dq));
        fmha_jit::test::with_backward_inputs(p);
        const AttentionShape& s = p.s;
        // The whole-problem reference with fp32 outputs rounds them once; compare in fp64 via its
        // double entry point.
        const auto widen = [](const std::vector<float>& x) {
          return std::vector<double>(x.begin(), x.end());
        };
        const std::vector<double> q = widen(p.q), k = widen(p.k), v = widen(p.v), o = widen(p.o),
                                  d_o = widen(p.d_o);
        std::vector<double> o_ref(o.size()), lse_ref(p.lse.size());
        std::vector<double> dq_ref(q.size()), dk_ref(k.size()), dv_ref(v.size());
        ref::attention_forward(s, {q.data(), p.q_strides()}, {k.data(), p.k_strides()},
                               {v.data(), p.v_strides()}, {o_ref.data(), p.o_strides()},
                               lse_ref.data());
        ref::attention_backward(s, {q.data(), p.q_strides()}, {k.data(), p.k_strides()},
                                {v.data(), p.v_strides()}, {o.data(), p.o_strides()},
                                {d_o.data(), p.o_strides()}, nullptr,
                                {dq_ref.data(), p.q_strides()}, {dk_ref.data(), p.k_strides()},
                                {dv_ref.data(), p.v_strides()});
        for (int b = 0; b < s.batch; ++b) {
          for (int h = 0; h < s.nhead_q; ++h) {
            const ref::ForwardSlice f = ref::forward_slice_ref64(s, p.qv(), p.kv(), p.vv(), b, h);
            CHECK(max_rel_diff(f.o, head_rows(o_ref, p.o_strides(), b, h, sq, dv)) < 1e-13);
            const std::vector<double> lse(lse_ref.begin() + p.lse_index(b, h, 0),
                                          lse_ref.begin() + p.lse_index(b, h, 0) + sq);
            CHECK(max_rel_diff(f.lse, lse) < 1e-13);
          }
          for (int hk = 0; hk < s.nhead_k; ++hk) {
            const ref::BackwardSlice g = ref::backward_slice_ref64(s, p.backward_inputs(), b, hk);
            std::vector<double> dq_want;
            for (int h = hk * s.group(); h < (hk + 1) * s.group(); ++h) {
              const auto rows = head_rows(dq_ref, p.q_strides(), b, h, sq, dq);
              dq_want.insert(dq_want.end(), rows.begin(), rows.end());
            }
            CHECK(max_rel_diff(g.dq, dq_want) < 1e-12);
            CHECK(max_rel_diff(g.dk, head_rows(dk_ref, p.k_strides(), b, hk, sk, dq)) < 1e-12);
            CHECK(max_rel_diff(g.dv, head_rows(dv_ref, p.v_strides(), b, hk, sk, dv)) < 1e-12);
          }
        }
      }
    }
  }
}

TEST_CASE("slice lowp is a computation in the dtype, a few roundings from ref64",
          "[reference][slice]") {
  for (bool bf16 : {true, false}) {
    const double u = bf16 ? 0x1p-8 : 0x1p-11;
    for (const MaskCase& m : kMasks) {
      INFO((bf16 ? "bf16" : "fp16") << ", mask " << m.name);
      RoundedProblem p = make_rounded_problem(shape(m, 90, 130, 64, 64), bf16, Layout::bhsd, 3u);
      fmha_jit::test::with_backward_inputs(p);
      const auto f = ref::forward_slice_references(p.s, bf16, p.qv(), p.kv(), p.vv(), 1, 5);
      const auto g = ref::backward_slice_references(p.s, bf16, p.backward_inputs(), 1, 1);
      const std::pair<const std::vector<double>*, const std::vector<double>*> outputs[] = {
          {&f.lowp.o, &f.ref64.o},
          {&g.lowp.dq, &g.ref64.dq},
          {&g.lowp.dk, &g.ref64.dk},
          {&g.lowp.dv, &g.ref64.dv}};
      for (const auto& [lowp, exact] : outputs) {
        int not_representable = 0;
        for (double x : *lowp) not_representable += representable(x, bf16) ? 0 : 1;
        CHECK(not_representable == 0);
        // At least the output rounding apart, at most a few roundings (P or dS, the output).
        const double rel = max_rel_diff(*lowp, *exact);
        CHECK(rel > u / 64);
        CHECK(rel < 8 * u);
      }
      // The LSE stays fp32: close to ref64 whatever the dtype.
      CHECK(max_rel_diff(f.lowp.lse, f.ref64.lse) < 1e-5);
    }
  }
}

TEST_CASE("slice references: rows that see no key and keys that no row sees",
          "[reference][slice]") {
  // Bottom-right causal with Sq > Sk: rows i < Sq - Sk see nothing. A window 0,0 with Sq < Sk:
  // keys j < Sk - Sq are seen by no row.
  for (const MaskCase& m : {MaskCase{"causal bottom-right", ref::kMaskCausalBottomRight, -1, -1},
                            MaskCase{"window 0,0", ref::kMaskSlidingWindow, 0, 0}}) {
    for (auto [sq, sk] : {std::pair{50, 20}, std::pair{20, 50}}) {
      INFO("mask " << m.name << ", Sq " << sq << ", Sk " << sk);
      RoundedProblem p = make_rounded_problem(shape(m, sq, sk, 32, 32), true, Layout::bshd, 8u);
      fmha_jit::test::with_backward_inputs(p);
      const AttentionShape& s = p.s;
      const auto f = ref::forward_slice_references(s, true, p.qv(), p.kv(), p.vv(), 0, 2);
      const auto g = ref::backward_slice_references(s, true, p.backward_inputs(), 0, 0);
      for (const ref::ForwardSlice* out : {&f.ref64, &f.lowp}) {
        for (int i = 0; i < sq; ++i) {
          const bool sees = !ref::visible_key_span(s, i).empty();
          CHECK(std::isinf(out->lse[i]) == !sees);
          for (int d = 0; d < s.hdim_v && !sees; ++d) CHECK(out->o[i * s.hdim_v + d] == 0.0);
          for (int g_head = 0; g_head < s.group() && !sees; ++g_head) {
            for (int d = 0; d < s.hdim_q; ++d) {
              CHECK(g.ref64.dq[(g_head * sq + i) * s.hdim_q + d] == 0.0);
              CHECK(g.lowp.dq[(g_head * sq + i) * s.hdim_q + d] == 0.0);
            }
          }
        }
      }
      int unseen_keys = 0;
      for (int j = 0; j < sk; ++j) {
        if (!ref::visible_query_span(s, j).empty()) continue;
        ++unseen_keys;
        for (const ref::BackwardSlice* out : {&g.ref64, &g.lowp}) {
          for (int d = 0; d < s.hdim_q; ++d) CHECK(out->dk[j * s.hdim_q + d] == 0.0);
          for (int d = 0; d < s.hdim_v; ++d) CHECK(out->dv[j * s.hdim_v + d] == 0.0);
        }
      }
      if (m.kind == ref::kMaskSlidingWindow && sq < sk) CHECK(unseen_keys == sk - sq);
    }
  }
}

TEST_CASE("slice references do not depend on the thread count", "[reference][slice]") {
  MaskCase m{"causal top-left", ref::kMaskCausalTopLeft, -1, -1};
  RoundedProblem p = make_rounded_problem(shape(m, 300, 333, 64, 64), false, Layout::bshd, 4u);
  fmha_jit::test::with_backward_inputs(p);
  std::vector<std::vector<double>> runs[2];
  for (int t = 0; t < 2; ++t) {
    ref::set_thread_limit(t == 0 ? 1 : 5);
    const auto f = ref::forward_slice_references(p.s, false, p.qv(), p.kv(), p.vv(), 1, 4);
    const auto g = ref::backward_slice_references(p.s, false, p.backward_inputs(), 1, 1);
    runs[t] = {f.ref64.o,  f.ref64.lse, f.lowp.o,  f.lowp.lse, g.ref64.dq,
               g.ref64.dk, g.ref64.dv,  g.lowp.dq, g.lowp.dk,  g.lowp.dv};
  }
  ref::set_thread_limit(0);
  for (std::size_t i = 0; i < runs[0].size(); ++i) {
    INFO("output " << i);
    CHECK(runs[0][i] == runs[1][i]);
  }
}

TEST_CASE("slice references reject a slice outside the problem and missing inputs",
          "[reference][slice]") {
  MaskCase m{"none", ref::kMaskNone, -1, -1};
  RoundedProblem p = make_rounded_problem(shape(m, 8, 8, 16, 16), true, Layout::bshd, 5u);
  fmha_jit::test::with_backward_inputs(p);
  CHECK_THROWS_WITH(ref::forward_slice_ref64(p.s, p.qv(), p.kv(), p.vv(), 0, 6),
                    Catch::Contains("head_q") && Catch::Contains("head_q < 6"));
  CHECK_THROWS_WITH(ref::backward_slice_ref64(p.s, p.backward_inputs(), 2, 0),
                    Catch::Contains("batch < 2"));
  ref::BackwardInputsView in = p.backward_inputs();
  in.lse = nullptr;
  CHECK_THROWS_WITH(ref::backward_slice_lowp(p.s, true, in, 0, 0), Catch::Contains("null lse"));
}

// Not a check: how long a slice of the GPU tests' largest sizes takes here (hidden; run with
// `fmha_jit_unit_tests "[.slice-timing]"`, S and hdim from FMHA_JIT_SLICE_TIMING="S,D").
TEST_CASE("slice references: time of one large slice", "[.slice-timing]") {
  int seqlen = 4097, hdim = 128;
  if (const char* env = std::getenv("FMHA_JIT_SLICE_TIMING")) {
    std::sscanf(env, "%d,%d", &seqlen, &hdim);
  }
  AttentionShape s = shape(kMasks[0], seqlen, seqlen, hdim, hdim);
  s.batch = 1;
  s.nhead_q = s.nhead_k = 1;
  RoundedProblem p = make_rounded_problem(s, true, Layout::bhsd, 6u);
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  fmha_jit::test::with_backward_inputs(p);
  const auto t1 = clock::now();
  const auto f = ref::forward_slice_references(s, true, p.qv(), p.kv(), p.vv(), 0, 0);
  const auto t2 = clock::now();
  const auto g = ref::backward_slice_references(s, true, p.backward_inputs(), 0, 0);
  const auto t3 = clock::now();
  const auto seconds = [](clock::time_point a, clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  };
  std::printf(
      "S %d x %d, hdim %d, %u threads: forward ref64 (backward inputs) %.2f s, forward ref64 + "
      "lowp %.2f s, backward ref64 + lowp %.2f s\n",
      seqlen, seqlen, hdim, std::thread::hardware_concurrency(), seconds(t0, t1), seconds(t1, t2),
      seconds(t2, t3));
  CHECK(f.ref64.o.size() == g.ref64.dq.size());
}
