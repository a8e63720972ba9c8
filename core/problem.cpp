#include "fmha_jit/problem.hpp"

#include <cmath>
#include <limits>
#include <string>

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

TensorStrides FmhaProblem::q_stride() const {
  return q_strides ? *q_strides : dense_strides(layout, nhead_q, seqlen_q, hdim_q);
}
TensorStrides FmhaProblem::k_stride() const {
  return k_strides ? *k_strides : dense_strides(layout, nhead_k, seqlen_k, hdim_q);
}
TensorStrides FmhaProblem::v_stride() const {
  return v_strides ? *v_strides : dense_strides(layout, nhead_k, seqlen_k, hdim_v);
}
TensorStrides FmhaProblem::o_stride() const {
  return o_strides ? *o_strides : dense_strides(layout, nhead_q, seqlen_q, hdim_v);
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
}

}  // namespace fmha_jit
