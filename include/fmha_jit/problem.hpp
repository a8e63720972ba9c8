// FmhaProblem: the run-time description of one attention call. Nothing here enters the cache key:
// shapes, strides, layout, window sizes and scale are kernel arguments.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace fmha_jit {

enum class Layout : std::uint8_t {
  bhsd,  // [batch, head, seq, dim]
  bshd,  // [batch, seq, head, dim]
};
std::string_view to_string(Layout layout);
std::optional<Layout> layout_from_string(std::string_view name);

// Element strides of a 4-d tensor; the last dim (hdim) is always contiguous.
struct TensorStrides {
  std::int64_t batch = 0;
  std::int64_t head = 0;
  std::int64_t row = 0;
  bool operator==(const TensorStrides&) const = default;
};

struct FmhaProblem {
  std::int64_t batch = 1;
  std::int64_t nhead_q = 1;
  std::int64_t nhead_k = 1;  // nhead_q % nhead_k == 0 (GQA / MQA)
  std::int64_t seqlen_q = 1;
  std::int64_t seqlen_k = 1;
  std::int64_t hdim_q = 128;
  std::int64_t hdim_v = 128;
  std::optional<float> scale;  // softmax scale; default 1 / sqrt(hdim_q)
  int window_left = -1;        // sliding-window mask only; -1 = unbounded
  int window_right = -1;       // sliding-window mask only; -1 = unbounded
  Layout layout = Layout::bhsd;
  // Explicit strides override the layout's dense strides (e.g. Q, K, V packed in one buffer).
  // Inputs may alias or broadcast (stride 0); the strides of an output (the forward's O; dQ, dK,
  // dV) must keep its elements apart, else the call is refused with a FieldError naming it.
  std::optional<TensorStrides> q_strides, k_strides, v_strides, o_strides;
  // The backward's gradients may have layouts of their own (as in FlashAttention); unset, dO
  // follows O's strides, dQ Q's, dK K's and dV V's.
  std::optional<TensorStrides> do_strides, dq_strides, dk_strides, dv_strides;

  float softmax_scale() const;

  // Shapes in the layout's dimension order.
  std::array<std::int64_t, 4> q_shape() const;
  std::array<std::int64_t, 4> k_shape() const;
  std::array<std::int64_t, 4> v_shape() const;
  std::array<std::int64_t, 4> o_shape() const;
  std::array<std::int64_t, 3> lse_shape() const { return {batch, nhead_q, seqlen_q}; }

  // Effective strides (explicit or dense for the layout).
  TensorStrides q_stride() const;
  TensorStrides k_stride() const;
  TensorStrides v_stride() const;
  TensorStrides o_stride() const;
  // Effective strides of the gradients: explicit, else those of O, Q, K and V.
  TensorStrides do_stride() const;
  TensorStrides dq_stride() const;
  TensorStrides dk_stride() const;
  TensorStrides dv_stride() const;

  // Element counts of dense tensors of this problem.
  std::int64_t q_elements() const { return batch * nhead_q * seqlen_q * hdim_q; }
  std::int64_t k_elements() const { return batch * nhead_k * seqlen_k * hdim_q; }
  std::int64_t v_elements() const { return batch * nhead_k * seqlen_k * hdim_v; }
  std::int64_t o_elements() const { return batch * nhead_q * seqlen_q * hdim_v; }
  std::int64_t lse_elements() const { return batch * nhead_q * seqlen_q; }

  // Throws FieldError (invalid_problem) for non-positive sizes, nhead_q % nhead_k != 0, sizes that
  // overflow the kernels' 32-bit indices, or a non-positive/non-finite scale.
  void validate() const;
};

// Dense strides of a [batch, heads, seq, dim] tensor in the given layout.
TensorStrides dense_strides(Layout layout, std::int64_t heads, std::int64_t seq, std::int64_t dim);

}  // namespace fmha_jit
