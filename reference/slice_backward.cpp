// The backward of one (batch, kv head), exact (fp64) and kernel-like (fp32, P and dS rounded to
// the dtype before their products, outputs rounded); slice_reference.hpp says what each one is.
//
// Two passes, so that every output is summed by one task in a fixed order: pass A runs over blocks
// of query rows (LSE, D, and dQ = scale * dS K), pass B over blocks of keys (dV = P^T dO and
// dK = scale * dS^T Q, over the group's query heads in order). Both recompute the scores; pass B
// takes the LSE and D that pass A used. With the softcap, dS carries the cap's derivative
// 1 - tanh^2 (the scale stays outside, as without it). A sink's gradient, -sum_i exp(sink - LSE_i)
// D_i, is left per row by pass A and summed in row order afterwards.
#include <stdexcept>
#include <string>

#include "parallel.hpp"
#include "slice_kernels.hpp"
#include "slice_reference.hpp"

namespace fmha_jit::reference {
namespace {

using slice::kRowBlock;

void check_slice(const AttentionShape& s, const BackwardInputsView& in, int batch, int head_k) {
  validate(s);
  for (const auto& [name, t] :
       {std::pair{"q", in.q}, {"k", in.k}, {"v", in.v}, {"o", in.o}, {"d_o", in.d_o}}) {
    if (t.data == nullptr) throw std::invalid_argument(std::string("backward slice: null ") + name);
  }
  if (in.lse == nullptr) throw std::invalid_argument("backward slice: null lse");
  if (batch < 0 || batch >= s.batch || head_k < 0 || head_k >= s.nhead_k) {
    throw std::invalid_argument("backward slice: (batch, head_k) = (" + std::to_string(batch) +
                                ", " + std::to_string(head_k) + "); accepted: batch < " +
                                std::to_string(s.batch) + ", head_k < " +
                                std::to_string(s.nhead_k));
  }
}

// One query head of the group, packed: rows and columns of Q and dO, its sink, and what pass A
// leaves for pass B (the LSE P is computed with, D = rowsum(dO * O)) and for the sink's gradient
// (each row's term).
template <typename Real>
struct QueryHead {
  int head = 0;
  Real sink = 0;
  std::vector<Real> q, qt, d_o, d_ot;
  std::vector<Real> lse, delta, dsink_terms;
};

// The kv head, packed.
template <typename Real>
struct KeyHead {
  std::vector<Real> k, kt, v, vt;
};

template <typename Arith>
class SliceBackward {
 public:
  using Real = typename Arith::Real;

  SliceBackward(const AttentionShape& s, const Arith& arith, const BackwardInputsView& in,
                int batch, bool own_lse)
      : s_(s),
        arith_(arith),
        in_(in),
        batch_(batch),
        own_lse_(own_lse),
        scale_(static_cast<Real>(s.scale)),
        cap_(s.has_softcap() ? static_cast<Real>(s.softcap) : Real(0)) {}

  BackwardSlice run(int head_k) {
    const int group = s_.group();
    kv_.k = slice::pack_rows<Real>(in_.k, batch_, head_k, s_.seqlen_k, s_.hdim_q);
    kv_.kt = slice::pack_columns<Real>(in_.k, batch_, head_k, s_.seqlen_k, s_.hdim_q);
    kv_.v = slice::pack_rows<Real>(in_.v, batch_, head_k, s_.seqlen_k, s_.hdim_v);
    kv_.vt = slice::pack_columns<Real>(in_.v, batch_, head_k, s_.seqlen_k, s_.hdim_v);
    heads_.resize(static_cast<size_t>(group));
    for (int g = 0; g < group; ++g) {
      QueryHead<Real>& h = heads_[static_cast<size_t>(g)];
      h.head = head_k * group + g;
      h.q = slice::pack_rows<Real>(in_.q, batch_, h.head, s_.seqlen_q, s_.hdim_q);
      h.qt = slice::pack_columns<Real>(in_.q, batch_, h.head, s_.seqlen_q, s_.hdim_q);
      h.d_o = slice::pack_rows<Real>(in_.d_o, batch_, h.head, s_.seqlen_q, s_.hdim_v);
      h.d_ot = slice::pack_columns<Real>(in_.d_o, batch_, h.head, s_.seqlen_q, s_.hdim_v);
      h.lse.assign(static_cast<size_t>(s_.seqlen_q), slice::kNegInf<Real>);
      h.delta.assign(static_cast<size_t>(s_.seqlen_q), Real(0));
      if (s_.sinks != nullptr) {
        h.sink = static_cast<Real>(s_.sinks[h.head]);
        h.dsink_terms.assign(static_cast<size_t>(s_.seqlen_q), Real(0));
      }
    }
    BackwardSlice out;
    out.dq.assign(static_cast<size_t>(group) * s_.seqlen_q * s_.hdim_q, 0.0);
    out.dk.assign(static_cast<size_t>(s_.seqlen_k) * s_.hdim_q, 0.0);
    out.dv.assign(static_cast<size_t>(s_.seqlen_k) * s_.hdim_v, 0.0);
    const int row_blocks = (s_.seqlen_q + kRowBlock - 1) / kRowBlock;
    const int products = 2 * s_.hdim_q + s_.hdim_v;
    parallel_for(group * row_blocks, slice::slice_work(s_, group, products), [&](int task) {
      const int g = task / row_blocks, i0 = (task % row_blocks) * kRowBlock;
      query_rows(heads_[static_cast<size_t>(g)], i0, std::min(i0 + kRowBlock, s_.seqlen_q),
                 out.dq.data() + static_cast<size_t>(g) * s_.seqlen_q * s_.hdim_q);
    });
    const int key_blocks = (s_.seqlen_k + kRowBlock - 1) / kRowBlock;
    parallel_for(key_blocks, slice::slice_work(s_, group, products + s_.hdim_v), [&](int task) {
      const int j0 = task * kRowBlock;
      keys(j0, std::min(j0 + kRowBlock, s_.seqlen_k), out);
    });
    if (s_.sinks != nullptr) {
      for (const QueryHead<Real>& h : heads_) {
        Real sum = 0;
        for (Real term : h.dsink_terms) sum += term;
        out.dsinks.push_back(static_cast<double>(sum));
      }
    }
    return out;
  }

 private:
  // Pass A, rows [i0, i1) of one query head: LSE (its own in fp64, or the given one), D, dQ.
  void query_rows(QueryHead<Real>& h, int i0, int i1, double* dq) const {
    const int rows = i1 - i0, dq_dim = s_.hdim_q, dv_dim = s_.hdim_v;
    const IndexSpan span =
        slice::block_span(i0, i1, [&](int i) { return visible_key_span(s_, i); });
    const int width = std::max(span.hi - span.lo, 0);
    std::vector<Real> x(static_cast<size_t>(rows) * width), dp(x.size());
    // The cap's derivative per score, when the softcap is on.
    std::vector<Real> slope(cap_ > 0 ? x.size() : 0);
    if (width > 0) {
      slice::dot_block(h.q.data() + static_cast<size_t>(i0) * dq_dim, size_t(dq_dim), rows,
                       kv_.kt.data() + span.lo, size_t(s_.seqlen_k), width, dq_dim, x.data(),
                       size_t(width));
      slice::dot_block(h.d_o.data() + static_cast<size_t>(i0) * dv_dim, size_t(dv_dim), rows,
                       kv_.vt.data() + span.lo, size_t(s_.seqlen_k), width, dv_dim, dp.data(),
                       size_t(width));
    }
    for (int r = 0; r < rows; ++r) {
      const int i = i0 + r;
      Real* xr = x.data() + static_cast<size_t>(r) * width;
      const Real* dpr = dp.data() + static_cast<size_t>(r) * width;
      const float* o_row = in_.o.row(batch_, h.head, i);
      const Real* do_row = h.d_o.data() + static_cast<size_t>(i) * dv_dim;
      Real delta = 0;
      for (int d = 0; d < dv_dim; ++d) delta += do_row[d] * static_cast<Real>(o_row[d]);
      Real* slope_r = slope.empty() ? nullptr : slope.data() + static_cast<size_t>(r) * width;
      bool sees_key = false;
      for (int w = 0; w < width; ++w) {
        const bool visible = key_visible(s_, i, span.lo + w);
        sees_key = sees_key || visible;
        if (!visible) {
          xr[w] = slice::kNegInf<Real>;
          continue;
        }
        xr[w] *= scale_;
        if (slope_r != nullptr) {
          const slice::CappedScore<Real> c = slice::soft_cap(xr[w], cap_);
          xr[w] = c.score;
          slope_r[w] = c.slope;
        }
      }
      const bool has_sink = !h.dsink_terms.empty();
      const Real lse = own_lse_ ? slice::row_lse(xr, width, has_sink ? &h.sink : nullptr)
                                : static_cast<Real>(in_.lse[lse_index(h.head, i)]);
      h.lse[static_cast<size_t>(i)] = lse;
      h.delta[static_cast<size_t>(i)] = delta;
      // The sink's probability is exp(sink - LSE); a sink of -inf has none (and would make a row
      // that sees no key -inf - -inf).
      if (has_sink && h.sink != slice::kNegInf<Real>) {
        h.dsink_terms[static_cast<size_t>(i)] = -std::exp(h.sink - lse) * delta;
      }
      // x becomes dS (rounded as the kernel rounds it), 0 where masked and in a row that sees no
      // key (whose dQ stays 0).
      for (int w = 0; w < width; ++w) {
        if (!sees_key || xr[w] == slice::kNegInf<Real>) {
          xr[w] = 0;
          continue;
        }
        const Real ds = std::exp(xr[w] - lse) * (dpr[w] - delta);
        xr[w] = arith_.round(slope_r != nullptr ? ds * slope_r[w] : ds);
      }
    }
    // dQ = scale * dS K, each row summed over its keys in order; keys outermost so that a K row
    // serves every row of the block while it is in L1.
    std::vector<Real> acc(static_cast<size_t>(rows) * dq_dim, Real(0));
    for (int w = 0; w < width; ++w) {
      const Real* k_row = kv_.k.data() + static_cast<size_t>(span.lo + w) * dq_dim;
      for (int r = 0; r < rows; ++r) {
        const Real ds = x[static_cast<size_t>(r) * width + w];
        if (ds != 0) slice::axpy(ds, k_row, acc.data() + static_cast<size_t>(r) * dq_dim, dq_dim);
      }
    }
    for (int r = 0; r < rows; ++r) {
      double* dq_row = dq + static_cast<size_t>(i0 + r) * dq_dim;
      const Real* acc_r = acc.data() + static_cast<size_t>(r) * dq_dim;
      for (int d = 0; d < dq_dim; ++d) {
        dq_row[d] = static_cast<double>(arith_.round(acc_r[d] * scale_));
      }
    }
  }

  // Pass B, keys [j0, j1): dV and dK summed over the group's query heads, each in row order.
  void keys(int j0, int j1, BackwardSlice& out) const {
    const int rows = j1 - j0, dq_dim = s_.hdim_q, dv_dim = s_.hdim_v;
    std::vector<Real> acc_k(static_cast<size_t>(rows) * dq_dim, Real(0));
    std::vector<Real> acc_v(static_cast<size_t>(rows) * dv_dim, Real(0));
    const IndexSpan span =
        slice::block_span(j0, j1, [&](int j) { return visible_query_span(s_, j); });
    const int width = std::max(span.hi - span.lo, 0);
    std::vector<Real> x(static_cast<size_t>(rows) * width), dp(x.size());
    for (const QueryHead<Real>& h : heads_) {
      if (width == 0) break;
      slice::dot_block(kv_.k.data() + static_cast<size_t>(j0) * dq_dim, size_t(dq_dim), rows,
                       h.qt.data() + span.lo, size_t(s_.seqlen_q), width, dq_dim, x.data(),
                       size_t(width));
      slice::dot_block(kv_.v.data() + static_cast<size_t>(j0) * dv_dim, size_t(dv_dim), rows,
                       h.d_ot.data() + span.lo, size_t(s_.seqlen_q), width, dv_dim, dp.data(),
                       size_t(width));
      // x becomes P and dp dS, both rounded as the kernel rounds them; 0 where masked.
      for (int r = 0; r < rows; ++r) {
        const int j = j0 + r;
        Real* xr = x.data() + static_cast<size_t>(r) * width;
        Real* dpr = dp.data() + static_cast<size_t>(r) * width;
        for (int w = 0; w < width; ++w) {
          const int i = span.lo + w;
          if (!key_visible(s_, i, j)) {
            xr[w] = dpr[w] = 0;
            continue;
          }
          Real score = xr[w] * scale_, slope = 1;
          if (cap_ > 0) {
            const slice::CappedScore<Real> c = slice::soft_cap(score, cap_);
            score = c.score;
            slope = c.slope;
          }
          const Real p = std::exp(score - h.lse[static_cast<size_t>(i)]);
          const Real ds = p * (dpr[w] - h.delta[static_cast<size_t>(i)]);
          dpr[w] = arith_.round(cap_ > 0 ? ds * slope : ds);
          xr[w] = arith_.round(p);
        }
      }
      // dV += P^T dO and dK += dS^T Q, each key summed over the rows in order; rows outermost so
      // that the dO and Q rows serve every key of the block while they are in L1.
      for (int w = 0; w < width; ++w) {
        const size_t i = static_cast<size_t>(span.lo + w);
        const Real* do_row = h.d_o.data() + i * dv_dim;
        const Real* q_row = h.q.data() + i * dq_dim;
        for (int r = 0; r < rows; ++r) {
          const Real p = x[static_cast<size_t>(r) * width + w];
          const Real ds = dp[static_cast<size_t>(r) * width + w];
          if (p != 0)
            slice::axpy(p, do_row, acc_v.data() + static_cast<size_t>(r) * dv_dim, dv_dim);
          if (ds != 0) {
            slice::axpy(ds, q_row, acc_k.data() + static_cast<size_t>(r) * dq_dim, dq_dim);
          }
        }
      }
    }
    for (int r = 0; r < rows; ++r) {
      double* dk_row = out.dk.data() + static_cast<size_t>(j0 + r) * dq_dim;
      double* dv_row = out.dv.data() + static_cast<size_t>(j0 + r) * dv_dim;
      const Real* acc_kr = acc_k.data() + static_cast<size_t>(r) * dq_dim;
      const Real* acc_vr = acc_v.data() + static_cast<size_t>(r) * dv_dim;
      for (int d = 0; d < dq_dim; ++d) {
        dk_row[d] = static_cast<double>(arith_.round(acc_kr[d] * scale_));
      }
      for (int d = 0; d < dv_dim; ++d) dv_row[d] = static_cast<double>(arith_.round(acc_vr[d]));
    }
  }

  size_t lse_index(int head_q, int i) const {
    return (static_cast<size_t>(batch_) * s_.nhead_q + head_q) * s_.seqlen_q + i;
  }

  const AttentionShape& s_;
  const Arith& arith_;
  const BackwardInputsView& in_;
  const int batch_;
  const bool own_lse_;
  const Real scale_;
  const Real cap_;  // > 0: softcap
  KeyHead<Real> kv_;
  std::vector<QueryHead<Real>> heads_;
};

}  // namespace

BackwardSlice backward_slice_ref64(const AttentionShape& s, const BackwardInputsView& in, int batch,
                                   int head_k) {
  check_slice(s, in, batch, head_k);
  const slice::Exact arith;
  return SliceBackward<slice::Exact>(s, arith, in, batch, /*own_lse=*/true).run(head_k);
}

BackwardSlice backward_slice_lowp(const AttentionShape& s, bool bf16, const BackwardInputsView& in,
                                  int batch, int head_k) {
  check_slice(s, in, batch, head_k);
  const slice::KernelLike arith{bf16};
  return SliceBackward<slice::KernelLike>(s, arith, in, batch, /*own_lse=*/false).run(head_k);
}

SliceReferences<BackwardSlice> backward_slice_references(const AttentionShape& s, bool bf16,
                                                         const BackwardInputsView& in, int batch,
                                                         int head_k) {
  return {backward_slice_ref64(s, in, batch, head_k),
          backward_slice_lowp(s, bf16, in, batch, head_k)};
}

}  // namespace fmha_jit::reference
