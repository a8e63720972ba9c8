// Shapes, strides and tensor views of the CPU attention reference.
//
// Tensors are addressed exactly as the kernels address them (templates/common/fmha_params.h):
// element (b, h, s, d) lives at data + b * batch + h * head + s * row + d, strides in elements, the
// head dimension contiguous. Any layout (BHSD, BSHD, padded rows, views into packed QKV) is
// therefore expressed through Strides alone.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fmha_jit::reference {

struct Strides {
  int64_t batch = 0;
  int64_t head = 0;
  int64_t row = 0;
};

// Dense layouts of a (B, H, S, D) tensor.
enum class Layout {
  bhsd,  // [B, H, S, D]: heads outermost after batch
  bshd,  // [B, S, H, D]: the usual PyTorch/FlashAttention activation layout
};

Strides dense_strides(Layout layout, int nhead, int seqlen, int hdim);
// Elements of a dense (B, H, S, D) tensor, either layout.
size_t dense_size(int batch, int nhead, int seqlen, int hdim);

// Mask kinds, numbered as fmha_jit::MaskKind (include/fmha_jit/config.hpp) so that a caller passes
// static_cast<int>(MaskKind) as AttentionShape::mask_kind. Their meaning is in masks.hpp.
inline constexpr int kMaskNone = 0;
inline constexpr int kMaskCausalTopLeft = 1;
inline constexpr int kMaskCausalBottomRight = 2;
inline constexpr int kMaskSlidingWindow = 3;

struct AttentionShape {
  int batch = 1;
  int nhead_q = 1;
  int nhead_k = 1;  // nhead_q % nhead_k == 0; query head h reads kv head h / (nhead_q / nhead_k)
  int seqlen_q = 1;
  int seqlen_k = 1;
  int hdim_q = 1;             // head dim of Q and K
  int hdim_v = 1;             // head dim of V and O
  int mask_kind = kMaskNone;  // one of the kMask* constants
  int window_left = -1;       // sliding window only; -1 = unbounded
  int window_right = -1;      // sliding window only; -1 = unbounded
  double scale = 1.0;         // softmax scale applied to Q K^T
  // > 0: each scaled score s becomes softcap * tanh(s / softcap) before the mask and the softmax;
  // 0: scores are used as they are.
  double softcap = 0.0;
  // Null, or nhead_q fp32 logits that the caller keeps alive: sinks[h] joins the softmax
  // denominator of every row of query head h as one more score (already scaled, never capped) with
  // no value row. LSE = log(exp(sinks[h]) + sum_j exp(s_j)); a row that sees no key gets O = 0 and
  // LSE = sinks[h].
  const float* sinks = nullptr;

  int group() const { return nhead_q / nhead_k; }  // query heads per kv head
  bool has_softcap() const { return softcap > 0; }
};

// Throws std::invalid_argument naming the offending field, its value and what is accepted
// (non-positive sizes, nhead_q not a multiple of nhead_k, unknown mask kind, window < -1, a
// softcap that is negative or not finite).
void validate(const AttentionShape& shape);

template <typename T>
struct BasicTensorView {
  const T* data = nullptr;
  Strides strides;

  const T* row(int b, int h, int s) const {
    return data + b * strides.batch + h * strides.head + s * strides.row;
  }
};

template <typename T>
struct BasicMutableTensorView {
  T* data = nullptr;
  Strides strides;

  T* row(int b, int h, int s) const {
    return data + b * strides.batch + h * strides.head + s * strides.row;
  }
};

using TensorView = BasicTensorView<float>;
using MutableTensorView = BasicMutableTensorView<float>;
using TensorViewF64 = BasicTensorView<double>;
using MutableTensorViewF64 = BasicMutableTensorView<double>;

}  // namespace fmha_jit::reference
