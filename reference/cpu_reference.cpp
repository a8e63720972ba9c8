// The whole-problem fp64 reference: one (batch, head) per task, each row's visible keys from
// masks.hpp.
#include "cpu_reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "parallel.hpp"

namespace fmha_jit::reference {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// Dot product with four partial sums, so the loop is not bound by the latency of one add chain.
template <typename T>
double dot(const double* a, const T* b, int n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int d = 0;
  for (; d + 4 <= n; d += 4) {
    s0 += a[d] * static_cast<double>(b[d]);
    s1 += a[d + 1] * static_cast<double>(b[d + 1]);
    s2 += a[d + 2] * static_cast<double>(b[d + 2]);
    s3 += a[d + 3] * static_cast<double>(b[d + 3]);
  }
  for (; d < n; ++d) s0 += a[d] * static_cast<double>(b[d]);
  return (s0 + s1) + (s2 + s3);
}

// Rows [0, rows) of head (b, h), widened to fp64 and packed contiguously (rows x cols).
template <typename T>
void load_head(const BasicTensorView<T>& t, int b, int h, int rows, int cols,
               std::vector<double>& dst) {
  dst.resize(static_cast<size_t>(rows) * static_cast<size_t>(cols));
  for (int r = 0; r < rows; ++r) {
    const T* src = t.row(b, h, r);
    double* out = dst.data() + static_cast<size_t>(r) * static_cast<size_t>(cols);
    for (int d = 0; d < cols; ++d) out[d] = static_cast<double>(src[d]);
  }
}

template <typename T>
void load_row(const T* src, int n, std::vector<double>& dst) {
  dst.resize(static_cast<size_t>(n));
  for (int d = 0; d < n; ++d) dst[d] = static_cast<double>(src[d]);
}

void require_data(const void* p, const char* what) {
  if (p == nullptr) throw std::invalid_argument(std::string("attention reference: null ") + what);
}

// Scaled (and, with the softcap, capped) scores of query row i of head h (packed in q) against
// the keys of span r of a packed K head, into scores[0, r.hi - r.lo); keys of the span that the row
// does not see get -inf. With the softcap, slopes gets the cap's derivative 1 - tanh^2 per score.
// Returns their log-sum-exp, the head's sink included.
double row_scores(const AttentionShape& s, int h, int i, const double* q,
                  const std::vector<double>& khead, IndexSpan r, std::vector<double>& scores,
                  std::vector<double>& slopes) {
  scores.resize(static_cast<size_t>(r.hi - r.lo));
  if (s.has_softcap()) slopes.assign(scores.size(), 0.0);
  const bool has_sink = s.sinks != nullptr;
  const double sink = has_sink ? static_cast<double>(s.sinks[h]) : kNegInf;
  double m = sink;
  for (int j = r.lo; j < r.hi; ++j) {
    double x = kNegInf;
    if (key_visible(s, i, j)) {
      x = s.scale * dot(q, khead.data() + static_cast<size_t>(j) * s.hdim_q, s.hdim_q);
      if (s.has_softcap()) {
        const double t = std::tanh(x / s.softcap);
        x = s.softcap * t;
        slopes[j - r.lo] = 1 - t * t;
      }
    }
    scores[j - r.lo] = x;
    m = std::max(m, x);
  }
  if (std::isinf(m)) return m;  // only with infinite inputs; keeps exp(x - m) away from inf - inf
  double sum = has_sink ? std::exp(sink - m) : 0.0;
  for (double x : scores) sum += std::exp(x - m);
  return m + std::log(sum);
}

// A row's share of the gradient of its head's sink: -exp(sink - LSE) D.
double sink_gradient_term(double sink, double lse, double d_i) {
  return sink == kNegInf ? 0.0 : -std::exp(sink - lse) * d_i;
}

double work(const AttentionShape& s) {
  return 2.0 * s.batch * s.nhead_q * s.seqlen_q * static_cast<double>(s.seqlen_k) *
         (s.hdim_q + s.hdim_v);
}

template <typename T>
void forward_impl(const AttentionShape& s, BasicTensorView<T> q, BasicTensorView<T> k,
                  BasicTensorView<T> v, BasicMutableTensorView<T> o, T* lse) {
  validate(s);
  require_data(q.data, "q");
  require_data(k.data, "k");
  require_data(v.data, "v");
  require_data(o.data, "o");
  const int group = s.nhead_q / s.nhead_k;
  // One task per (batch, query head).
  parallel_for(s.batch * s.nhead_q, work(s), [&](int task) {
    const int b = task / s.nhead_q, h = task % s.nhead_q, hk = h / group;
    std::vector<double> khead, vhead, qrow, scores, slopes, acc;
    load_head(k, b, hk, s.seqlen_k, s.hdim_q, khead);
    load_head(v, b, hk, s.seqlen_k, s.hdim_v, vhead);
    for (int i = 0; i < s.seqlen_q; ++i) {
      const IndexSpan r = visible_key_span(s, i);
      T* orow = o.row(b, h, i);
      // A row that sees no key has only the sink in its denominator.
      double row_lse = s.sinks != nullptr ? static_cast<double>(s.sinks[h]) : kNegInf;
      if (r.empty()) {
        std::fill(orow, orow + s.hdim_v, T(0));
      } else {
        load_row(q.row(b, h, i), s.hdim_q, qrow);
        row_lse = row_scores(s, h, i, qrow.data(), khead, r, scores, slopes);
        acc.assign(static_cast<size_t>(s.hdim_v), 0.0);
        for (int j = r.lo; j < r.hi; ++j) {
          const double p = std::exp(scores[j - r.lo] - row_lse);  // 0 where masked
          const double* vrow = vhead.data() + static_cast<size_t>(j) * s.hdim_v;
          for (int d = 0; d < s.hdim_v; ++d) acc[d] += p * vrow[d];
        }
        for (int d = 0; d < s.hdim_v; ++d) orow[d] = static_cast<T>(acc[d]);
      }
      if (lse != nullptr) {
        lse[(static_cast<int64_t>(b) * s.nhead_q + h) * s.seqlen_q + i] = static_cast<T>(row_lse);
      }
    }
  });
}

template <typename T>
void backward_impl(const AttentionShape& s, BasicTensorView<T> q, BasicTensorView<T> k,
                   BasicTensorView<T> v, BasicTensorView<T> o, BasicTensorView<T> d_o, const T* lse,
                   BasicMutableTensorView<T> dq, BasicMutableTensorView<T> dk,
                   BasicMutableTensorView<T> dv, T* d_sinks) {
  validate(s);
  require_data(q.data, "q");
  require_data(k.data, "k");
  require_data(v.data, "v");
  require_data(o.data, "o");
  require_data(d_o.data, "d_o");
  require_data(dq.data, "dq");
  require_data(dk.data, "dk");
  require_data(dv.data, "dv");
  const int group = s.nhead_q / s.nhead_k;
  const size_t dqk = static_cast<size_t>(s.hdim_q);
  const size_t dvo = static_cast<size_t>(s.hdim_v);
  // Each (batch, query head)'s share of its sink's gradient, summed over the batches in order
  // once every task is done.
  const bool sink_grads = s.sinks != nullptr && d_sinks != nullptr;
  std::vector<double> dsink_shares(sink_grads ? static_cast<size_t>(s.batch) * s.nhead_q : 0, 0.0);
  // One task per (batch, kv head): it owns dK and dV of that head and dQ of its query heads.
  parallel_for(s.batch * s.nhead_k, 2.5 * work(s), [&](int task) {
    const int b = task / s.nhead_k, hk = task % s.nhead_k;
    std::vector<double> khead, vhead, qrow, dorow, scores, slopes, dqrow;
    load_head(k, b, hk, s.seqlen_k, s.hdim_q, khead);
    load_head(v, b, hk, s.seqlen_k, s.hdim_v, vhead);
    // fp64 accumulators of dK and dV, summed over the query heads of the group.
    std::vector<double> dk_acc(static_cast<size_t>(s.seqlen_k) * dqk, 0.0);
    std::vector<double> dv_acc(static_cast<size_t>(s.seqlen_k) * dvo, 0.0);
    for (int h = hk * group; h < (hk + 1) * group; ++h) {
      double* dsink_share =
          sink_grads ? &dsink_shares[static_cast<size_t>(b) * s.nhead_q + h] : nullptr;
      for (int i = 0; i < s.seqlen_q; ++i) {
        const IndexSpan r = visible_key_span(s, i);
        T* dqout = dq.row(b, h, i);
        const T* given_lse = lse != nullptr
                                 ? lse + (static_cast<int64_t>(b) * s.nhead_q + h) * s.seqlen_q + i
                                 : nullptr;
        if (r.empty()) {
          std::fill(dqout, dqout + s.hdim_q, T(0));
          if (dsink_share != nullptr) {
            // The sink is the row's whole denominator (LSE = sink).
            load_row(d_o.row(b, h, i), s.hdim_v, dorow);
            const double sink = static_cast<double>(s.sinks[h]);
            *dsink_share += sink_gradient_term(
                sink, given_lse != nullptr ? static_cast<double>(*given_lse) : sink,
                dot(dorow.data(), o.row(b, h, i), s.hdim_v));
          }
          continue;
        }
        load_row(q.row(b, h, i), s.hdim_q, qrow);
        load_row(d_o.row(b, h, i), s.hdim_v, dorow);
        double row_lse = row_scores(s, h, i, qrow.data(), khead, r, scores, slopes);
        if (given_lse != nullptr) row_lse = static_cast<double>(*given_lse);
        const double d_i = dot(dorow.data(), o.row(b, h, i), s.hdim_v);
        if (dsink_share != nullptr) {
          *dsink_share += sink_gradient_term(static_cast<double>(s.sinks[h]), row_lse, d_i);
        }
        dqrow.assign(dqk, 0.0);
        for (int j = r.lo; j < r.hi; ++j) {
          if (!key_visible(s, i, j)) continue;
          const double p = std::exp(scores[j - r.lo] - row_lse);
          const double* krow = khead.data() + static_cast<size_t>(j) * dqk;
          const double* vrow = vhead.data() + static_cast<size_t>(j) * dvo;
          double ds_scaled = s.scale * p * (dot(dorow.data(), vrow, s.hdim_v) - d_i);
          if (s.has_softcap()) ds_scaled *= slopes[j - r.lo];
          double* dkj = dk_acc.data() + static_cast<size_t>(j) * dqk;
          double* dvj = dv_acc.data() + static_cast<size_t>(j) * dvo;
          for (int d = 0; d < s.hdim_q; ++d) {
            dqrow[d] += ds_scaled * krow[d];
            dkj[d] += ds_scaled * qrow[d];
          }
          for (int d = 0; d < s.hdim_v; ++d) dvj[d] += p * dorow[d];
        }
        for (int d = 0; d < s.hdim_q; ++d) dqout[d] = static_cast<T>(dqrow[d]);
      }
    }
    for (int j = 0; j < s.seqlen_k; ++j) {
      T* dkout = dk.row(b, hk, j);
      T* dvout = dv.row(b, hk, j);
      const double* dkj = dk_acc.data() + static_cast<size_t>(j) * dqk;
      const double* dvj = dv_acc.data() + static_cast<size_t>(j) * dvo;
      for (int d = 0; d < s.hdim_q; ++d) dkout[d] = static_cast<T>(dkj[d]);
      for (int d = 0; d < s.hdim_v; ++d) dvout[d] = static_cast<T>(dvj[d]);
    }
  });
  for (int h = 0; h < s.nhead_q && sink_grads; ++h) {
    double sum = 0;
    for (int b = 0; b < s.batch; ++b) sum += dsink_shares[static_cast<size_t>(b) * s.nhead_q + h];
    d_sinks[h] = static_cast<T>(sum);
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Attention entry points

void attention_forward(const AttentionShape& shape, TensorView q, TensorView k, TensorView v,
                       MutableTensorView o, float* lse) {
  forward_impl(shape, q, k, v, o, lse);
}

void attention_forward(const AttentionShape& shape, TensorViewF64 q, TensorViewF64 k,
                       TensorViewF64 v, MutableTensorViewF64 o, double* lse) {
  forward_impl(shape, q, k, v, o, lse);
}

void attention_backward(const AttentionShape& shape, TensorView q, TensorView k, TensorView v,
                        TensorView o, TensorView d_o, const float* lse, MutableTensorView dq,
                        MutableTensorView dk, MutableTensorView dv, float* d_sinks) {
  backward_impl(shape, q, k, v, o, d_o, lse, dq, dk, dv, d_sinks);
}

void attention_backward(const AttentionShape& shape, TensorViewF64 q, TensorViewF64 k,
                        TensorViewF64 v, TensorViewF64 o, TensorViewF64 d_o, const double* lse,
                        MutableTensorViewF64 dq, MutableTensorViewF64 dk, MutableTensorViewF64 dv,
                        double* d_sinks) {
  backward_impl(shape, q, k, v, o, d_o, lse, dq, dk, dv, d_sinks);
}

}  // namespace fmha_jit::reference
