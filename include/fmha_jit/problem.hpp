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

  // Packed variable-length batches (configs with varlen): `batch` sequences laid end to end along
  // the token dimension, sequence b's queries being rows cu_seqlens_q[b] .. cu_seqlens_q[b + 1]
  // of Q and O, its keys rows cu_seqlens_k[b] .. cu_seqlens_k[b + 1] of K and V. Each sequence is
  // its own attention problem: masks align to its own lengths. seqlen_q and seqlen_k are then the
  // longest lengths (FlashAttention's max_seqlen_q / max_seqlen_k), which size the launch; total_q
  // and total_k the token counts. The tensors are (total, heads, dim) in layout bshd or (heads,
  // total, dim) in bhsd, their batch strides unused; the LSE is [nhead_q, total_q].
  const std::int32_t* cu_seqlens_q = nullptr;  // device, batch + 1 entries: 0, ..., total_q
  const std::int32_t* cu_seqlens_k = nullptr;  // device, batch + 1 entries: 0, ..., total_k
  std::int64_t total_q = 0;
  std::int64_t total_k = 0;
  // Host copies of the two arrays, optional: given, every entry is checked before any launch
  // (check_seqlens). Without them the kernels read the device arrays defensively: a sequence whose
  // entries are out of order or out of range is left unwritten, never read or written past the
  // tensors (docs/VARLEN.md).
  const std::int32_t* cu_seqlens_q_host = nullptr;
  const std::int32_t* cu_seqlens_k_host = nullptr;
  bool varlen() const { return cu_seqlens_q != nullptr || cu_seqlens_k != nullptr; }

  // Softcap configs: the scaled scores s become softcap * tanh(s / softcap); > 0.
  float softcap = 0;

  float softmax_scale() const;

  // Shapes in the layout's dimension order.
  std::array<std::int64_t, 4> q_shape() const;
  std::array<std::int64_t, 4> k_shape() const;
  std::array<std::int64_t, 4> v_shape() const;
  std::array<std::int64_t, 4> o_shape() const;
  // [batch, nhead_q, seqlen_q]; varlen: [1, nhead_q, total_q].
  std::array<std::int64_t, 3> lse_shape() const;

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

  // Element counts of dense (or packed, varlen) tensors of this problem.
  std::int64_t q_rows() const { return varlen() ? total_q : batch * seqlen_q; }
  std::int64_t k_rows() const { return varlen() ? total_k : batch * seqlen_k; }
  std::int64_t q_elements() const { return q_rows() * nhead_q * hdim_q; }
  std::int64_t k_elements() const { return k_rows() * nhead_k * hdim_q; }
  std::int64_t v_elements() const { return k_rows() * nhead_k * hdim_v; }
  std::int64_t o_elements() const { return q_rows() * nhead_q * hdim_v; }
  std::int64_t lse_elements() const { return q_rows() * nhead_q; }

  // Throws FieldError (invalid_problem) for non-positive sizes, nhead_q % nhead_k != 0, sizes that
  // overflow the kernels' 32-bit indices, a non-positive/non-finite scale or softcap, varlen
  // fields given in part, and host cu_seqlens that fail check_seqlens.
  void validate() const;
};

// Checks the cumulative lengths of a varlen problem (`name` is cu_seqlens_q or cu_seqlens_k):
// batch + 1 entries, the first 0, none decreasing, the last `total`, no length over `max_len`
// (seqlen_q / seqlen_k). Throws FieldError (invalid_problem) naming the first bad entry.
void check_seqlens(const char* name, const std::int32_t* cu_seqlens, std::int64_t batch,
                   std::int64_t total, std::int64_t max_len);

// Dense strides of a [batch, heads, seq, dim] tensor in the given layout.
TensorStrides dense_strides(Layout layout, std::int64_t heads, std::int64_t seq, std::int64_t dim);

}  // namespace fmha_jit
