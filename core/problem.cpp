#include "fmha_jit/problem.hpp"

#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "fmha_jit/error.hpp"

namespace fmha_jit {

std::string_view to_string(Layout layout) { return layout == Layout::bhsd ? "bhsd" : "bshd"; }

std::optional<Layout> layout_from_string(std::string_view name) {
  if (name == "bhsd") return Layout::bhsd;
  if (name == "bshd") return Layout::bshd;
  return std::nullopt;
}

TensorStrides dense_strides(Layout layout, std::int64_t heads, std::int64_t seq, std::int64_t dim) {
  if (layout == Layout::bhsd) return {heads * seq * dim, seq * dim, dim};
  return {seq * heads * dim, dim, heads * dim};
}

float FmhaProblem::softmax_scale() const {
  return scale ? *scale : 1.0f / std::sqrt(static_cast<float>(hdim_q));
}

namespace {
std::array<std::int64_t, 4> shape_of(Layout layout, std::int64_t b, std::int64_t h, std::int64_t s,
                                     std::int64_t d) {
  if (layout == Layout::bhsd) return {b, h, s, d};
  return {b, s, h, d};
}
}  // namespace

std::array<std::int64_t, 4> FmhaProblem::q_shape() const {
  return shape_of(layout, batch, nhead_q, seqlen_q, hdim_q);
}
std::array<std::int64_t, 4> FmhaProblem::k_shape() const {
  return shape_of(layout, batch, nhead_k, seqlen_k, hdim_q);
}
std::array<std::int64_t, 4> FmhaProblem::v_shape() const {
  return shape_of(layout, batch, nhead_k, seqlen_k, hdim_v);
}
std::array<std::int64_t, 4> FmhaProblem::o_shape() const {
  return shape_of(layout, batch, nhead_q, seqlen_q, hdim_v);
}

std::array<std::int64_t, 3> FmhaProblem::lse_shape() const {
  if (varlen()) return {1, nhead_q, total_q};
  return {batch, nhead_q, seqlen_q};
}

namespace {
// A varlen tensor is one sequence of `total` rows; its batch stride is never stepped.
TensorStrides default_strides(const FmhaProblem& p, std::int64_t heads, std::int64_t seq,
                              std::int64_t total, std::int64_t dim) {
  if (!p.varlen()) return dense_strides(p.layout, heads, seq, dim);
  TensorStrides s = dense_strides(p.layout, heads, total, dim);
  s.batch = 0;
  return s;
}
}  // namespace

TensorStrides FmhaProblem::q_stride() const {
  return q_strides ? *q_strides : default_strides(*this, nhead_q, seqlen_q, total_q, hdim_q);
}
TensorStrides FmhaProblem::k_stride() const {
  return k_strides ? *k_strides : default_strides(*this, nhead_k, seqlen_k, total_k, hdim_q);
}
TensorStrides FmhaProblem::v_stride() const {
  return v_strides ? *v_strides : default_strides(*this, nhead_k, seqlen_k, total_k, hdim_v);
}
TensorStrides FmhaProblem::o_stride() const {
  return o_strides ? *o_strides : default_strides(*this, nhead_q, seqlen_q, total_q, hdim_v);
}
TensorStrides FmhaProblem::do_stride() const { return do_strides ? *do_strides : o_stride(); }
TensorStrides FmhaProblem::dq_stride() const { return dq_strides ? *dq_strides : q_stride(); }
TensorStrides FmhaProblem::dk_stride() const { return dk_strides ? *dk_strides : k_stride(); }
TensorStrides FmhaProblem::dv_stride() const { return dv_strides ? *dv_strides : v_stride(); }

void FmhaProblem::validate() const {
  // Kernels index rows, heads and batches with 32-bit ints (grid dimensions) and offsets with
  // 64-bit; the limits below keep every grid dimension and per-tensor row count in range.
  constexpr std::int64_t kMaxDim = std::numeric_limits<int>::max();
  auto positive = [](const char* field, std::int64_t v, std::int64_t max) {
    if (v < 1 || v > max) {
      throw FieldError(ErrorCode::invalid_problem, field, std::to_string(v),
                       "1 .. " + std::to_string(max));
    }
  };
  positive("batch", batch, 65535);      // gridDim.z
  positive("nhead_q", nhead_q, 65535);  // gridDim.y
  positive("nhead_k", nhead_k, 65535);
  positive("seqlen_q", seqlen_q, kMaxDim);
  positive("seqlen_k", seqlen_k, kMaxDim);
  positive("hdim_q", hdim_q, 1024);
  positive("hdim_v", hdim_v, 1024);
  if (nhead_q % nhead_k != 0) {
    throw FieldError(ErrorCode::invalid_problem, "nhead_k", std::to_string(nhead_k),
                     "a divisor of nhead_q = " + std::to_string(nhead_q));
  }
  const float s = softmax_scale();
  if (!std::isfinite(s) || s <= 0) {
    throw FieldError(ErrorCode::invalid_problem, "scale", std::to_string(s),
                     "a finite positive number");
  }
  if (window_left < -1 || window_right < -1) {
    throw FieldError(ErrorCode::invalid_problem, window_left < -1 ? "window_left" : "window_right",
                     std::to_string(window_left < -1 ? window_left : window_right),
                     "-1 (unbounded) or >= 0");
  }
  if (softcap != 0 && !(std::isfinite(softcap) && softcap > 0)) {
    throw FieldError(ErrorCode::invalid_problem, "softcap", std::to_string(softcap),
                     "a finite positive number, or 0 (no softcap)");
  }
  if (!varlen()) {
    if (total_q != 0 || total_k != 0 || cu_seqlens_q_host || cu_seqlens_k_host) {
      throw FieldError(ErrorCode::invalid_problem, total_q != 0 ? "total_q" : "total_k",
                       std::to_string(total_q != 0 ? total_q : total_k),
                       "0 and no host cu_seqlens (they describe a varlen problem, which needs the "
                       "device cu_seqlens_q and cu_seqlens_k)");
    }
    return;
  }
  if (!cu_seqlens_q || !cu_seqlens_k) {
    throw FieldError(ErrorCode::invalid_problem, cu_seqlens_q ? "cu_seqlens_k" : "cu_seqlens_q",
                     "null", "a device array of batch + 1 int32 (varlen needs both)");
  }
  // Offsets into the packed tensors are 32-bit in the kernels (cu_seqlens are int32).
  constexpr std::int64_t kMaxTokens = std::numeric_limits<std::int32_t>::max();
  for (auto [field, total] : {std::pair{"total_q", total_q}, {"total_k", total_k}}) {
    if (total < 0 || total > kMaxTokens) {
      throw FieldError(ErrorCode::invalid_problem, field, std::to_string(total),
                       "0 .. " + std::to_string(kMaxTokens));
    }
  }
  if (cu_seqlens_q_host) check_seqlens("cu_seqlens_q", cu_seqlens_q_host, batch, total_q, seqlen_q);
  if (cu_seqlens_k_host) check_seqlens("cu_seqlens_k", cu_seqlens_k_host, batch, total_k, seqlen_k);
}

void check_seqlens(const char* name, const std::int32_t* cu, std::int64_t batch, std::int64_t total,
                   std::int64_t max_len) {
  auto entry = [name](std::int64_t i) { return std::string(name) + "[" + std::to_string(i) + "]"; };
  if (cu[0] != 0) {
    throw FieldError(ErrorCode::invalid_problem, entry(0), std::to_string(cu[0]), "0");
  }
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t len = static_cast<std::int64_t>(cu[b + 1]) - cu[b];
    if (len < 0 || len > max_len) {
      throw FieldError(ErrorCode::invalid_problem, entry(b + 1), std::to_string(cu[b + 1]),
                       std::to_string(cu[b]) + " .. " + std::to_string(cu[b] + max_len) +
                           " (entries never decrease, and no sequence is longer than the max "
                           "seqlen " +
                           std::to_string(max_len) + ")");
    }
  }
  if (cu[batch] != total) {
    throw FieldError(ErrorCode::invalid_problem, entry(batch), std::to_string(cu[batch]),
                     std::to_string(total) + " (the last entry is the token count)");
  }
}

}  // namespace fmha_jit
