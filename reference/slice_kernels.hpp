// Building blocks of the per-slice references (slice_forward.cpp, slice_backward.cpp): the two
// arithmetics (exact fp64, kernel-like fp32 with dtype roundings), packing of one head into
// contiguous rows or columns, and the blocked products the slices spend their time in. Internal to
// reference.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "cpu_reference.hpp"

namespace fmha_jit::reference::slice {

// ref64: fp64 throughout, nothing rounded.
struct Exact {
  using Real = double;
  static Real round(Real x) { return x; }
};

// lowp: fp32 arithmetic; round() is the dtype rounding a fused kernel applies to P and dS before
// they feed a product with a dtype operand, and to its outputs.
struct KernelLike {
  using Real = float;
  bool bf16 = true;
  Real round(Real x) const { return round_to_dtype(x, bf16); }
};

template <typename Real>
constexpr Real kNegInf = -std::numeric_limits<Real>::infinity();

// A softcapped score and the derivative of the cap: softcap * tanh(s / softcap) and
// 1 - tanh^2(s / softcap), in Real (fp32 for lowp, as a kernel computes the tanh).
template <typename Real>
struct CappedScore {
  Real score;
  Real slope;
};

template <typename Real>
CappedScore<Real> soft_cap(Real s, Real cap) {
  const Real t = std::tanh(s / cap);
  return {cap * t, Real(1) - t * t};
}

// log(exp(*sink) + sum_w exp(x[w])) with the maximum subtracted first; the sink term only when
// sink is non-null. Masked scores are -inf; -inf when every term is.
template <typename Real>
Real row_lse(const Real* x, int n, const Real* sink) {
  Real m = sink != nullptr ? *sink : kNegInf<Real>;
  for (int w = 0; w < n; ++w) m = std::max(m, x[w]);
  if (m == kNegInf<Real>) return m;
  Real sum = sink != nullptr ? std::exp(*sink - m) : Real(0);
  for (int w = 0; w < n; ++w) sum += std::exp(x[w] - m);
  return m + std::log(sum);
}

// Rows per task of the row-parallel passes, keys per task of the key-parallel one: small enough
// to spread a causal slice's uneven rows over 16 threads, large enough that each packed column
// chunk read in dot_block serves many rows.
inline constexpr int kRowBlock = 16;
// Columns of one dot_block chunk: kRowBlock x kColumnChunk accumulators stay in L1.
inline constexpr int kColumnChunk = 128;

// rows x cols of head (b, h), row-major.
template <typename Real>
std::vector<Real> pack_rows(const TensorView& t, int b, int h, int rows, int cols) {
  std::vector<Real> out(static_cast<size_t>(rows) * static_cast<size_t>(cols));
  for (int r = 0; r < rows; ++r) {
    const float* src = t.row(b, h, r);
    Real* dst = out.data() + static_cast<size_t>(r) * static_cast<size_t>(cols);
    for (int d = 0; d < cols; ++d) dst[d] = static_cast<Real>(src[d]);
  }
  return out;
}

// The same head transposed: cols x rows, so that one column's values are contiguous.
template <typename Real>
std::vector<Real> pack_columns(const TensorView& t, int b, int h, int rows, int cols) {
  std::vector<Real> out(static_cast<size_t>(rows) * static_cast<size_t>(cols));
  for (int r = 0; r < rows; ++r) {
    const float* src = t.row(b, h, r);
    for (int d = 0; d < cols; ++d) {
      out[static_cast<size_t>(d) * static_cast<size_t>(rows) + static_cast<size_t>(r)] =
          static_cast<Real>(src[d]);
    }
  }
  return out;
}

// c[r][j] = sum_d a[r][d] * bt[d][j] for r < rows, j < cols; a row-major with leading dimension
// lda, bt column-packed with leading dimension ldb, c with ldc. Each element is accumulated in
// Real over d in increasing order; the innermost loop runs over independent outputs, so the
// compiler vectorises it without reordering any sum.
template <typename Real>
void dot_block(const Real* a, size_t lda, int rows, const Real* bt, size_t ldb, int cols, int depth,
               Real* c, size_t ldc) {
  for (int r = 0; r < rows; ++r) std::fill_n(c + r * ldc, cols, Real(0));
  for (int j0 = 0; j0 < cols; j0 += kColumnChunk) {
    const int n = std::min(kColumnChunk, cols - j0);
    for (int d = 0; d < depth; ++d) {
      const Real* __restrict b = bt + static_cast<size_t>(d) * ldb + j0;
      for (int r = 0; r < rows; ++r) {
        const Real x = a[r * lda + static_cast<size_t>(d)];
        Real* __restrict out = c + r * ldc + j0;
        for (int j = 0; j < n; ++j) out[j] += x * b[j];
      }
    }
  }
}

// y += w * x over n elements.
template <typename Real>
void axpy(Real w, const Real* __restrict x, Real* __restrict y, int n) {
  for (int i = 0; i < n; ++i) y[i] += w * x[i];
}

// Union of the rows' key spans (or keys' query spans): the columns a block has to compute.
template <typename SpanOf>
IndexSpan block_span(int first, int last, SpanOf span_of) {
  IndexSpan u{0, 0};
  for (int i = first; i < last; ++i) {
    const IndexSpan r = span_of(i);
    if (r.empty()) continue;
    u = u.empty() ? r : IndexSpan{std::min(u.lo, r.lo), std::max(u.hi, r.hi)};
  }
  return u;
}

// Multiply-adds of a slice's passes, for parallel_for's thread count.
inline double slice_work(const AttentionShape& s, int heads, int products) {
  return 2.0 * heads * s.seqlen_q * static_cast<double>(s.seqlen_k) * products;
}

}  // namespace fmha_jit::reference::slice
