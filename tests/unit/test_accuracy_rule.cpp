// The accuracy rule the GPU tests judge kernels by, validated on the CPU: an emulation of the
// kernels' arithmetic (kernel_emulation.hpp) must pass it on many random problems, and the faults a
// broken kernel makes must fail it.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "reference/accuracy_rule.hpp"
#include "reference/slice_reference.hpp"
#include "unit/kernel_emulation.hpp"
#include "unit/reference_problems.hpp"

namespace ref = fmha_jit::reference;
namespace emu = fmha_jit::test::emulation;
using fmha_jit::test::RoundedProblem;
using ref::AttentionShape;

namespace {

// One output of a slice as a kernel produced it, with its references.
struct SliceOutput {
  std::string name;
  int rows = 0, cols = 0;
  std::vector<float> ours;
  std::vector<double> ref64, lowp;
  bool fp32 = false;  // stored in fp32 (the LSE), not in the dtype
};

struct Judgement {
  bool pass = true;
  std::string report;
};

Judgement judge(const std::vector<SliceOutput>& outputs, bool bf16) {
  ref::Verdict verdict;
  for (const SliceOutput& out : outputs) {
    verdict.outputs.push_back(
        ref::judge({out.name, out.rows, out.cols, out.ours, out.ref64, out.lowp,
                    out.fp32 ? ref::kUnitRoundoffFp32 : ref::unit_roundoff(bf16)}));
  }
  return {verdict.pass(), verdict.report()};
}

std::vector<SliceOutput> forward_outputs(const RoundedProblem& p, int b, int h,
                                         const emu::ForwardOutput& ours) {
  const auto refs = ref::forward_slice_references(p.s, p.bf16, p.qv(), p.kv(), p.vv(), b, h);
  return {{"O", p.s.seqlen_q, p.s.hdim_v, ours.o, refs.ref64.o, refs.lowp.o, false},
          {"LSE", p.s.seqlen_q, 1, ours.lse, refs.ref64.lse, refs.lowp.lse, true}};
}

// dQ of each query head of the group is an output of its own.
std::vector<SliceOutput> backward_outputs(const RoundedProblem& p, int b, int hk,
                                          const emu::BackwardOutput& ours) {
  const AttentionShape& s = p.s;
  const auto refs = ref::backward_slice_references(s, p.bf16, p.backward_inputs(), b, hk);
  std::vector<SliceOutput> out;
  const std::size_t per_head = static_cast<std::size_t>(s.seqlen_q) * s.hdim_q;
  for (int g = 0; g < s.group(); ++g) {
    const auto at = [&](const auto& v) {
      return std::remove_cvref_t<decltype(v)>(v.begin() + g * per_head,
                                              v.begin() + (g + 1) * per_head);
    };
    out.push_back({"dQ(head " + std::to_string(hk * s.group() + g) + ")", s.seqlen_q, s.hdim_q,
                   at(ours.dq), at(refs.ref64.dq), at(refs.lowp.dq), false});
  }
  out.push_back({"dK", s.seqlen_k, s.hdim_q, ours.dk, refs.ref64.dk, refs.lowp.dk, false});
  out.push_back({"dV", s.seqlen_k, s.hdim_v, ours.dv, refs.ref64.dv, refs.lowp.dv, false});
  return out;
}

AttentionShape shape(int mask, int left, int right, int sq, int sk, int hdim, int nhead_q,
                     int nhead_k) {
  AttentionShape s;
  s.batch = 1;
  s.nhead_q = nhead_q;
  s.nhead_k = nhead_k;
  s.seqlen_q = sq;
  s.seqlen_k = sk;
  s.hdim_q = s.hdim_v = hdim;
  s.mask_kind = mask;
  s.window_left = left;
  s.window_right = right;
  s.scale = 1.0 / std::sqrt(double(hdim));
  return s;
}

RoundedProblem problem(const AttentionShape& s, bool bf16, std::uint32_t seed) {
  RoundedProblem p = fmha_jit::test::make_rounded_problem(s, bf16, ref::Layout::bshd, seed);
  fmha_jit::test::with_backward_inputs(p);
  return p;
}

SliceOutput& output(std::vector<SliceOutput>& outputs, const std::string& name) {
  for (SliceOutput& o : outputs) {
    if (o.name == name) return o;
  }
  FAIL("no output " << name);
  return outputs.front();
}

const char* dtype_name(bool bf16) { return bf16 ? "bf16" : "fp16"; }

}  // namespace

TEST_CASE("accuracy rule: the kernel emulation passes on many random problems", "[rule]") {
  struct MaskCase {
    int kind, left, right;
  };
  const MaskCase masks[] = {{ref::kMaskNone, -1, -1},
                            {ref::kMaskCausalTopLeft, -1, -1},
                            {ref::kMaskCausalBottomRight, -1, -1},
                            {ref::kMaskSlidingWindow, 20, 7},
                            {ref::kMaskSlidingWindow, 0, 0}};
  std::uint32_t seed = 100;
  int checked = 0;
  for (bool bf16 : {true, false}) {
    for (int hdim : {64, 128}) {
      for (const MaskCase& m : masks) {
        for (auto [sq, sk] : {std::pair{130, 257}, std::pair{257, 130}}) {
          const int key_tile = (seed % 2 == 0) ? 64 : 128;
          const RoundedProblem p =
              problem(shape(m.kind, m.left, m.right, sq, sk, hdim, 4, 2), bf16, seed++);
          INFO(dtype_name(bf16) << " hdim " << hdim << " mask " << m.kind << " window " << m.left
                                << "," << m.right << " Sq " << sq << " Sk " << sk << " key tile "
                                << key_tile);
          for (int h = 0; h < p.s.nhead_q; ++h) {
            const Judgement j =
                judge(forward_outputs(p, 0, h, emu::forward_slice(p, 0, h, key_tile)), bf16);
            INFO("forward head " << h << "\n" << j.report);
            CHECK(j.pass);
          }
          for (int hk = 0; hk < p.s.nhead_k; ++hk) {
            const Judgement j =
                judge(backward_outputs(p, 0, hk, emu::backward_slice(p, 0, hk, key_tile)), bf16);
            INFO("backward kv head " << hk << "\n" << j.report);
            CHECK(j.pass);
          }
          ++checked;
        }
      }
    }
  }
  CHECK(checked == 40);
}

TEST_CASE("accuracy rule: zeroing the last 10 % of dK rows of a causal backward fails",
          "[rule][mutation]") {
  // The longer the sequence, the smaller the last keys' gradients next to the first keys': at 1024
  // keys they are a few % of the slice's maximum, within a global 16u bf16 tolerance.
  struct Case {
    bool bf16;
    int hdim, seqlen;
  };
  for (const Case& c :
       {Case{true, 64, 2048}, Case{true, 128, 600}, Case{false, 64, 400}, Case{false, 128, 400}}) {
    INFO(dtype_name(c.bf16) << " hdim " << c.hdim << " S " << c.seqlen);
    const RoundedProblem p = problem(
        shape(ref::kMaskCausalTopLeft, -1, -1, c.seqlen, c.seqlen, c.hdim, 1, 1), c.bf16, 7u);
    std::vector<SliceOutput> outputs = backward_outputs(p, 0, 0, emu::backward_slice(p, 0, 0, 128));
    REQUIRE(judge(outputs, c.bf16).pass);
    SliceOutput& dk = output(outputs, "dK");
    for (int j = dk.rows - dk.rows / 10; j < dk.rows; ++j) {
      std::fill_n(dk.ours.begin() + static_cast<std::ptrdiff_t>(j) * dk.cols, dk.cols, 0.f);
    }
    const Judgement verdict = judge(outputs, c.bf16);
    INFO(verdict.report);
    CHECK_FALSE(verdict.pass);
  }
}

TEST_CASE("accuracy rule: dropping the mask on one 64-row query tile fails", "[rule][mutation]") {
  for (bool bf16 : {true, false}) {
    for (int mask : {ref::kMaskCausalTopLeft, ref::kMaskCausalBottomRight}) {
      INFO(dtype_name(bf16) << " mask " << mask);
      RoundedProblem p = problem(shape(mask, -1, -1, 300, 350, 128, 2, 1), bf16, 8u);
      std::vector<SliceOutput> outputs = forward_outputs(p, 0, 1, emu::forward_slice(p, 0, 1, 64));
      REQUIRE(judge(outputs, bf16).pass);
      p.s.mask_kind = ref::kMaskNone;
      const emu::ForwardOutput unmasked = emu::forward_slice(p, 0, 1, 64);
      SliceOutput& o = output(outputs, "O");
      const auto first = static_cast<std::ptrdiff_t>(64) * o.cols;
      std::copy(unmasked.o.begin() + first, unmasked.o.begin() + 2 * first, o.ours.begin() + first);
      const Judgement verdict = judge(outputs, bf16);
      INFO(verdict.report);
      CHECK_FALSE(verdict.pass);
    }
  }
}

TEST_CASE("accuracy rule: one zeroed query row of O fails", "[rule][mutation]") {
  for (bool bf16 : {true, false}) {
    for (int row : {0, 150, 299}) {
      INFO(dtype_name(bf16) << " row " << row);
      const RoundedProblem p =
          problem(shape(ref::kMaskCausalTopLeft, -1, -1, 300, 300, 64, 1, 1), bf16, 9u);
      std::vector<SliceOutput> outputs = forward_outputs(p, 0, 0, emu::forward_slice(p, 0, 0, 128));
      REQUIRE(judge(outputs, bf16).pass);
      SliceOutput& o = output(outputs, "O");
      std::fill_n(o.ours.begin() + static_cast<std::ptrdiff_t>(row) * o.cols, o.cols, 0.f);
      const Judgement verdict = judge(outputs, bf16);
      INFO(verdict.report);
      CHECK_FALSE(verdict.pass);
    }
  }
}

TEST_CASE("accuracy rule: one NaN in dV fails", "[rule][mutation]") {
  const RoundedProblem p = problem(shape(ref::kMaskNone, -1, -1, 100, 120, 64, 2, 2), true, 10u);
  std::vector<SliceOutput> outputs = backward_outputs(p, 0, 1, emu::backward_slice(p, 0, 1, 64));
  REQUIRE(judge(outputs, true).pass);
  output(outputs, "dV").ours[777] = std::numeric_limits<float>::quiet_NaN();
  const Judgement verdict = judge(outputs, true);
  INFO(verdict.report);
  CHECK_FALSE(verdict.pass);
}

TEST_CASE("accuracy rule: a 1 % scale error in dQ fails", "[rule][mutation]") {
  for (bool bf16 : {true, false}) {
    for (int mask : {ref::kMaskNone, ref::kMaskCausalBottomRight}) {
      INFO(dtype_name(bf16) << " mask " << mask);
      const RoundedProblem p = problem(shape(mask, -1, -1, 200, 260, 128, 2, 1), bf16, 11u);
      std::vector<SliceOutput> outputs =
          backward_outputs(p, 0, 0, emu::backward_slice(p, 0, 0, 128));
      REQUIRE(judge(outputs, bf16).pass);
      for (float& x : output(outputs, "dQ(head 1)").ours) x *= 1.01f;
      const Judgement verdict = judge(outputs, bf16);
      INFO(verdict.report);
      CHECK_FALSE(verdict.pass);
    }
  }
}

TEST_CASE("accuracy rule: a key no query sees must have dK = dV = 0", "[rule][mutation]") {
  // Window 0,0 with Sq < Sk: keys j < Sk - Sq are seen by no row; their exact gradient is 0.
  const RoundedProblem p =
      problem(shape(ref::kMaskSlidingWindow, 0, 0, 60, 100, 64, 1, 1), true, 12u);
  std::vector<SliceOutput> outputs = backward_outputs(p, 0, 0, emu::backward_slice(p, 0, 0, 64));
  REQUIRE(judge(outputs, true).pass);
  output(outputs, "dV").ours[5 * 64 + 3] = 1.0f;
  const Judgement verdict = judge(outputs, true);
  INFO(verdict.report);
  CHECK_FALSE(verdict.pass);
}

TEST_CASE("accuracy rule: a finite LSE where the row sees no key fails", "[rule][mutation]") {
  // Bottom-right causal with Sq > Sk: rows i < Sq - Sk see nothing (LSE -inf, O 0).
  const RoundedProblem p =
      problem(shape(ref::kMaskCausalBottomRight, -1, -1, 90, 40, 64, 1, 1), true, 13u);
  std::vector<SliceOutput> outputs = forward_outputs(p, 0, 0, emu::forward_slice(p, 0, 0, 64));
  REQUIRE(judge(outputs, true).pass);
  output(outputs, "LSE").ours[3] = 0.f;
  const Judgement verdict = judge(outputs, true);
  INFO(verdict.report);
  CHECK_FALSE(verdict.pass);
}

TEST_CASE("accuracy rule: infinities, NaN, all-zero rows and sizes", "[rule]") {
  const double inf = std::numeric_limits<double>::infinity();
  const float finf = std::numeric_limits<float>::infinity();
  // Two rows of two: row 0 exact 0 (a key nobody sees), row 1 a -inf LSE-like entry and a value.
  const std::vector<double> ref64 = {0.0, 0.0, -inf, 1.0};
  const std::vector<double> lowp = {0.0, 0.0, -inf, 1.0 + 0x1p-8};
  const auto verdict = [&](std::vector<float> ours) {
    return ref::judge({"t", 2, 2, ours, ref64, lowp, ref::kUnitRoundoffBf16});
  };
  CHECK(verdict({0.f, 0.f, -finf, 1.f}).pass);
  CHECK(verdict({0.f, 0.f, -finf, 1.f + 0x1p-7f}).pass);  // 2 x lowp's error
  CHECK_FALSE(verdict({0.f, 0.f, -finf, 1.f + 0x1p-5f}).pass);
  CHECK_FALSE(verdict({0.f, 1.f, -finf, 1.f}).pass);  // O(1) where the exact value is 0
  CHECK(verdict({0.f, 1e-6f, -finf, 1.f}).pass);      // fp32 noise there
  const ref::OutputVerdict finite_lse = verdict({0.f, 0.f, 0.f, 1.f});
  CHECK_FALSE(finite_lse.pass);
  CHECK(finite_lse.nonfinite == 1);
  const ref::OutputVerdict nan = verdict({std::nanf(""), 0.f, finf, 1.f});
  CHECK_FALSE(nan.pass);
  CHECK(nan.nonfinite == 2);
  CHECK_THAT(nan.report(), Catch::Contains("non-finite 2") && Catch::Contains("FAIL"));
  const std::vector<float> short_ours = {0.f, 0.f, 0.f};
  CHECK_THROWS_WITH(ref::judge({"t", 2, 2, short_ours, ref64, lowp, ref::kUnitRoundoffBf16}),
                    Catch::Contains("rows x cols = 4"));
}
