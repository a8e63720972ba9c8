// CPU reference for fused multi-head attention, forward and backward, accumulated in fp64.
//
// Shapes, strides and views: shape.hpp. Masks: masks.hpp, written from their definitions and
// sharing no code with the kernels. Per-slice exact and kernel-like references for the GPU tests:
// slice_reference.hpp; the accuracy rule that judges a kernel by them: accuracy_rule.hpp.
//
// Inputs are float: the caller rounds them to the kernel's dtype first (round_to_dtype) so the
// reference sees the same values as the kernel. A double entry point of every routine exists for
// finite-difference checks, where float inputs would drown the perturbation.
//
// Large problems are split over threads by (batch, head); every output element is still computed
// by one thread in a fixed order, so results are bit-identical whatever the thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "masks.hpp"
#include "shape.hpp"

namespace fmha_jit::reference {

// ---------------------------------------------------------------------------------------------
// Attention

// O = softmax(scale * Q K^T + mask) V and LSE = log sum_j exp(scale * q . k_j) over visible keys
// (natural log). lse is [B, Hq, Sq] contiguous and may be null. Rows that see no key get O = 0 and
// LSE = -inf. Q: [B, Hq, Sq, Dq], K: [B, Hk, Sk, Dq], V: [B, Hk, Sk, Dv], O: [B, Hq, Sq, Dv].
// The shape's score modifiers apply (shape.hpp): with the softcap the scores are capped before the
// mask and the softmax, and a head's sink joins every LSE of that head (a row that sees no key then
// has LSE = sink).
void attention_forward(const AttentionShape& shape, TensorView q, TensorView k, TensorView v,
                       MutableTensorView o, float* lse);
void attention_forward(const AttentionShape& shape, TensorViewF64 q, TensorViewF64 k,
                       TensorViewF64 v, MutableTensorViewF64 o, double* lse);

// Gradients of loss(Q, K, V) given dO = dloss/dO, for the forward whose output is o:
//   P = exp(scale * Q K^T - LSE) on visible keys, D = rowsum(dO * O), dS = P * (dO V^T - D),
//   dQ = scale * dS K, dK = scale * dS^T Q, dV = P^T dO,
// dK and dV summed over the query heads sharing a kv head. When lse is non-null it is used for P
// (as the kernels do: pass the forward's LSE); when null, LSE is recomputed in fp64. Rows that see
// no key contribute nothing and get dQ = 0; keys that no row sees get dK = dV = 0. dK and dV are
// overwritten, not accumulated into. With the softcap, dS is multiplied by the cap's derivative
// 1 - tanh^2(scale * q . k / softcap) before both products. With sinks, d_sinks (nhead_q entries,
// overwritten; may be null) receives d_sink_h = -sum over the rows i of head h, all batches, of
// exp(sink_h - LSE_i) D_i.
void attention_backward(const AttentionShape& shape, TensorView q, TensorView k, TensorView v,
                        TensorView o, TensorView d_o, const float* lse, MutableTensorView dq,
                        MutableTensorView dk, MutableTensorView dv, float* d_sinks = nullptr);
void attention_backward(const AttentionShape& shape, TensorViewF64 q, TensorViewF64 k,
                        TensorViewF64 v, TensorViewF64 o, TensorViewF64 d_o, const double* lse,
                        MutableTensorViewF64 dq, MutableTensorViewF64 dk, MutableTensorViewF64 dv,
                        double* d_sinks = nullptr);

// ---------------------------------------------------------------------------------------------
// Low-precision rounding (round to nearest, ties to even; IEEE overflow to infinity; NaN stays NaN)

uint16_t float_to_half_bits(float x);
float half_bits_to_float(uint16_t h);
uint16_t float_to_bf16_bits(float x);
float bf16_bits_to_float(uint16_t h);

// x rounded to fp16 (bf16 = false) or bf16 (bf16 = true) and widened back to float.
float round_to_dtype(float x, bool bf16);
void round_to_dtype(float* data, size_t n, bool bf16);
void round_to_dtype(std::vector<float>& data, bool bf16);

// ---------------------------------------------------------------------------------------------
// Comparison

struct ErrorStats {
  double max_abs = 0;      // max |got - ref| over elements where both are finite
  double max_rel = 0;      // max_abs / max |ref| (0 when both are 0, inf when only ref is 0)
  double rel_l2 = 0;       // ||got - ref|| / ||ref||, same conventions as max_rel
  double max_abs_ref = 0;  // max |ref| over finite ref elements
  int64_t nan_count = 0;   // elements where got is NaN and ref is not
  int64_t nonfinite_mismatch = 0;  // other elements where got and ref are not both finite and
                                   // not the same value (e.g. ref -inf LSE, got finite)
  int64_t count = 0;               // elements compared

  // True when every element is comparable (no NaN, no non-finite mismatch) and max_rel <= tol;
  // for an all-zero reference, when max_abs <= tol * 1e-3 (rounding noise only).
  bool ok(double tol) const;
};

// Identical infinities (LSE of fully masked rows) and NaN in both count as equal and are skipped.
ErrorStats compare(const float* got, const float* ref, size_t n);

// What a tolerance is asked for: they differ in how many low-precision roundings feed them.
enum class Quantity {
  forward_output,  // O: rounded to the dtype once on output, P rounded before the P V product
  lse,             // LSE: fp32 all the way in the kernels; only the dtype of Q and K matters
  gradient,        // dQ, dK, dV: several dtype roundings (P, dS, dO) and long reductions
};

// Suggested bound on ErrorStats::max_rel when a kernel of the given dtype is compared with this
// reference fed the same (already rounded) inputs. See cpu_reference.cpp for the derivation.
double dtype_tolerance(bool bf16, Quantity quantity = Quantity::forward_output);

}  // namespace fmha_jit::reference
