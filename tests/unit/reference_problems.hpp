// Random attention problems for the unit tests of the per-slice references and of the accuracy
// rule: dtype-rounded float inputs in one dense layout, and the backward's O and LSE as the GPU
// tests give them to a kernel (ref64 O rounded to the dtype, LSE in fp32).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "reference/cpu_reference.hpp"
#include "reference/slice_reference.hpp"

namespace fmha_jit::test {

struct RoundedProblem {
  reference::AttentionShape s;
  bool bf16 = true;
  reference::Layout layout = reference::Layout::bshd;
  std::vector<float> q, k, v, d_o, o, lse;  // o and lse: see with_backward_inputs

  reference::Strides q_strides() const {
    return reference::dense_strides(layout, s.nhead_q, s.seqlen_q, s.hdim_q);
  }
  reference::Strides k_strides() const {
    return reference::dense_strides(layout, s.nhead_k, s.seqlen_k, s.hdim_q);
  }
  reference::Strides v_strides() const {
    return reference::dense_strides(layout, s.nhead_k, s.seqlen_k, s.hdim_v);
  }
  reference::Strides o_strides() const {
    return reference::dense_strides(layout, s.nhead_q, s.seqlen_q, s.hdim_v);
  }
  reference::TensorView qv() const { return {q.data(), q_strides()}; }
  reference::TensorView kv() const { return {k.data(), k_strides()}; }
  reference::TensorView vv() const { return {v.data(), v_strides()}; }
  reference::BackwardInputsView backward_inputs() const {
    return {qv(), kv(), vv(), {o.data(), o_strides()}, {d_o.data(), o_strides()}, lse.data()};
  }
  std::size_t lse_index(int b, int h, int i) const {
    return (static_cast<std::size_t>(b) * s.nhead_q + h) * s.seqlen_q + i;
  }
};

inline std::vector<float> rounded_normal(std::size_t n, bool bf16, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> out(n);
  for (float& x : out) x = reference::round_to_dtype(dist(rng), bf16);
  return out;
}

// Q, K, V and dO drawn from N(0, 1) and rounded to the dtype, as the GPU tests draw them.
inline RoundedProblem make_rounded_problem(const reference::AttentionShape& s, bool bf16,
                                           reference::Layout layout, std::uint32_t seed) {
  std::mt19937 rng(seed);
  RoundedProblem p;
  p.s = s;
  p.bf16 = bf16;
  p.layout = layout;
  p.q = rounded_normal(reference::dense_size(s.batch, s.nhead_q, s.seqlen_q, s.hdim_q), bf16, rng);
  p.k = rounded_normal(reference::dense_size(s.batch, s.nhead_k, s.seqlen_k, s.hdim_q), bf16, rng);
  p.v = rounded_normal(reference::dense_size(s.batch, s.nhead_k, s.seqlen_k, s.hdim_v), bf16, rng);
  p.d_o =
      rounded_normal(reference::dense_size(s.batch, s.nhead_q, s.seqlen_q, s.hdim_v), bf16, rng);
  return p;
}

// Fills p.o and p.lse with the backward's inputs: every query head's ref64 forward, O rounded to
// the dtype and LSE to fp32.
inline void with_backward_inputs(RoundedProblem& p) {
  const reference::AttentionShape& s = p.s;
  p.o.assign(reference::dense_size(s.batch, s.nhead_q, s.seqlen_q, s.hdim_v), 0.f);
  p.lse.assign(reference::dense_size(s.batch, s.nhead_q, s.seqlen_q, 1), 0.f);
  const reference::MutableTensorView o{p.o.data(), p.o_strides()};
  for (int b = 0; b < s.batch; ++b) {
    for (int h = 0; h < s.nhead_q; ++h) {
      const reference::ForwardSlice f =
          reference::forward_slice_ref64(s, p.qv(), p.kv(), p.vv(), b, h);
      for (int i = 0; i < s.seqlen_q; ++i) {
        float* row = o.row(b, h, i);
        for (int d = 0; d < s.hdim_v; ++d) {
          row[d] = reference::round_to_dtype(
              static_cast<float>(f.o[static_cast<std::size_t>(i) * s.hdim_v + d]), p.bf16);
        }
        p.lse[p.lse_index(b, h, i)] = static_cast<float>(f.lse[static_cast<std::size_t>(i)]);
      }
    }
  }
}

}  // namespace fmha_jit::test
