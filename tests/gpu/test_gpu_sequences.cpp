// Packed variable-length batches and the score modifiers (sinks, softcap) on the GPU, forward and
// backward, judged sequence by sequence against the CPU references (gpu/sequence_harness.hpp):
// lengths 0, 1, 17, 1000 and 4097 mixed in one batch, query and key lengths that differ per
// sequence, every mask, GQA, both dtypes; the deterministic backward bit-identical over 10 runs.
#include <catch2/catch.hpp>

#include <initializer_list>
#include <vector>

#include "gpu/sequence_harness.hpp"

using namespace fmha_jit;
using test::SequenceCase;

namespace {

// Lengths that put partial tiles, single rows, a sequence without keys and one without queries
// in one batch; query and key lengths differ so the bottom-right masks differ from top-left.
const std::vector<int> kMixedQ = {17, 1, 300, 0, 130, 64};
const std::vector<int> kMixedK = {45, 1, 257, 9, 0, 200};

SequenceCase mixed(DType dtype, int hdim, MaskKind mask) {
  SequenceCase c;
  c.dtype = dtype;
  c.hdim = hdim;
  c.mask = mask;
  c.seqlens_q = kMixedQ;
  c.seqlens_k = kMixedK;
  if (mask == MaskKind::sliding_window) c.window_left = 30, c.window_right = 5;
  return c;
}

// Sinks alone, softcap alone and both, packed (mixed lengths) and dense (3 x 130 x 77), every
// mask, at the head dims given.
std::vector<SequenceCase> modifier_cases(std::initializer_list<int> hdims) {
  std::vector<SequenceCase> cases;
  for (bool packed : {true, false}) {
    for (int hdim : hdims) {
      for (MaskKind mask : test::kAllMasks) {
        for (auto [sinks, softcap] : {std::pair{true, 0.f}, {false, 20.f}, {true, 5.f}}) {
          SequenceCase c = mixed(DType::bf16, hdim, mask);
          if (!packed) c.seqlens_q = {130, 130, 130}, c.seqlens_k = {77, 77, 77};
          c.packed = packed;
          c.sinks = sinks;
          c.softcap = softcap;
          cases.push_back(c);
        }
      }
    }
  }
  return cases;
}

}  // namespace

TEST_CASE("gpu sequences fwd: packed mixed lengths, every mask, dtype and head dim", "[gpu]") {
  std::uint32_t seed = 70000;
  for (DType dtype : {DType::fp16, DType::bf16}) {
    for (int hdim : {64, 128, 256}) {
      for (MaskKind mask : test::kAllMasks) {
        test::check_sequences_forward(mixed(dtype, hdim, mask), seed++);
      }
    }
  }
}

TEST_CASE("gpu sequences fwd: lengths 1000 and 4097 beside short ones, GQA 8:1", "[gpu]") {
  std::uint32_t seed = 71000;
  for (MaskKind mask : test::kAllMasks) {
    SequenceCase c = mixed(DType::bf16, 128, mask);
    c.nhead_q = 8;
    c.nhead_k = 1;
    c.seqlens_q = {4097, 17, 1000, 0, 1};
    c.seqlens_k = {4097, 1000, 999, 4, 1};
    if (mask == MaskKind::sliding_window) c.window_left = 700, c.window_right = 100;
    test::check_sequences_forward(c, seed++);
  }
}

TEST_CASE("gpu sequences fwd: sinks and softcap, alone and together, packed and dense", "[gpu]") {
  std::uint32_t seed = 72000;
  for (const SequenceCase& c : modifier_cases({64, 128, 256})) {
    test::check_sequences_forward(c, seed++);
  }
}

TEST_CASE("gpu sequences bwd: packed mixed lengths, every mask, both dQ modes", "[gpu]") {
  std::uint32_t seed = 73000;
  for (DType dtype : {DType::fp16, DType::bf16}) {
    for (int hdim : {64, 128, 256}) {
      for (MaskKind mask : test::kAllMasks) {
        for (bool deterministic : {false, true}) {
          test::check_sequences_backward(mixed(dtype, hdim, mask), deterministic, seed++);
        }
      }
    }
  }
}

TEST_CASE("gpu sequences bwd: a 4097-long sequence beside short ones", "[gpu]") {
  SequenceCase c = mixed(DType::bf16, 128, MaskKind::causal_bottom_right);
  c.seqlens_q = {4097, 17, 0};
  c.seqlens_k = {4097, 1000, 5};
  test::check_sequences_backward(c, false, 74000);
}

TEST_CASE("gpu sequences bwd: sinks and softcap, alone and together, packed and dense", "[gpu]") {
  std::uint32_t seed = 75000;
  for (const SequenceCase& c : modifier_cases({64, 128})) {
    // The deterministic dQ mode on one mask of each: its sink gradient is the same stage.
    test::check_sequences_backward(c, c.mask == MaskKind::causal_top_left, seed++);
  }
}

TEST_CASE("gpu sequences bwd: deterministic, bit-identical over 10 runs", "[gpu]") {
  std::uint32_t seed = 76000;
  for (MaskKind mask : {MaskKind::none, MaskKind::causal_bottom_right}) {
    for (int hdim : {64, 128}) {
      SequenceCase c = mixed(DType::bf16, hdim, mask);
      c.sinks = true;
      c.softcap = 10.f;
      const test::BackwardRepro r = test::verify_sequences_backward(c, true, seed++, 10);
      INFO(r.check.report);
      CHECK(r.check.pass);
      CHECK(r.bit_exact);
    }
  }
}
