// Per-slice references for the GPU tests: for one (batch, query head) of a forward, or one
// (batch, kv head) of a backward, two results computed on the CPU from the same dtype-rounded
// inputs as the kernel's:
//
//   ref64  the exact attention, in fp64 (nothing rounded; the outputs are not rounded either);
//   lowp   the same math done the way a fused kernel in the dtype does it: products of dtype values
//          accumulated in fp32, softmax in fp32, P (and the backward's dS) rounded to the dtype
//          before they multiply a dtype operand, fp32 accumulation, outputs rounded to the dtype
//          (LSE stays fp32).
//
// The accuracy rule (accuracy_rule.hpp) measures a kernel's error against ref64 in units of lowp's:
// an output as far from the exact result as a careful kernel of that precision is, passes.
//
// The backward's ref64 recomputes its own LSE in fp64 instead of using the LSE given to the kernel
// (a fp32 rounding of it): ref64 is then the exact gradient of the rounded inputs, as
// FlashAttention compares against. D = rowsum(dO * O) uses the given O in both ref64 and lowp, as
// the kernels do: O is an input of the backward, and its rounding to the dtype is the caller's, not
// an error of the kernel under test. lowp uses the given fp32 LSE, as the kernels do.
//
// The score modifiers of AttentionShape (softcap, sinks) apply to both, each in its own precision:
// lowp caps in fp32 as a kernel does. ref64's own LSE includes the sink.
//
// Every row and every key of the slice is computed, over all threads (parallel.hpp); each output
// element is summed by one thread in a fixed order, so results do not depend on the thread count.
#pragma once

#include <vector>

#include "shape.hpp"

namespace fmha_jit::reference {

// One (batch, query head) of a forward: O is Sq x Dv row-major, LSE has Sq entries (natural log;
// for a row that sees no key, whose O is 0: the head's sink, or -inf without sinks).
struct ForwardSlice {
  std::vector<double> o;
  std::vector<double> lse;
};

// One (batch, kv head) of a backward: dQ of the group's query heads, group x Sq x Dq (query head
// hk * group + g at index g), dK Sk x Dq and dV Sk x Dv, all row-major. dK and dV sum the group's
// query heads. With sinks, dsinks holds this batch's share of the gradient of each of the group's
// sinks (index g as in dQ; the gradient of a sink sums its head's shares over the batches); it is
// empty without sinks. lowp keeps it in fp32, as the kernels' sink gradient is.
struct BackwardSlice {
  std::vector<double> dq;
  std::vector<double> dk;
  std::vector<double> dv;
  std::vector<double> dsinks;
};

template <typename Slice>
struct SliceReferences {
  Slice ref64;
  Slice lowp;
};

// q, k, v: the whole problem's tensors (values already rounded to the dtype).
ForwardSlice forward_slice_ref64(const AttentionShape& s, TensorView q, TensorView k, TensorView v,
                                 int batch, int head_q);
ForwardSlice forward_slice_lowp(const AttentionShape& s, bool bf16, TensorView q, TensorView k,
                                TensorView v, int batch, int head_q);
SliceReferences<ForwardSlice> forward_slice_references(const AttentionShape& s, bool bf16,
                                                       TensorView q, TensorView k, TensorView v,
                                                       int batch, int head_q);

// The inputs of a backward, as the kernel receives them: o and d_o rounded to the dtype, lse the
// fp32 [B, Hq, Sq] contiguous LSE of the forward.
struct BackwardInputsView {
  TensorView q, k, v, o, d_o;
  const float* lse = nullptr;
};

BackwardSlice backward_slice_ref64(const AttentionShape& s, const BackwardInputsView& in, int batch,
                                   int head_k);
BackwardSlice backward_slice_lowp(const AttentionShape& s, bool bf16, const BackwardInputsView& in,
                                  int batch, int head_k);
SliceReferences<BackwardSlice> backward_slice_references(const AttentionShape& s, bool bf16,
                                                         const BackwardInputsView& in, int batch,
                                                         int head_k);

}  // namespace fmha_jit::reference
