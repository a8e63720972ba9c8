// The forward of one (batch, query head), exact (fp64) and kernel-like (fp32, P and O rounded to
// the dtype); slice_reference.hpp says what each one is.
#include <stdexcept>
#include <string>

#include "parallel.hpp"
#include "slice_kernels.hpp"
#include "slice_reference.hpp"

namespace fmha_jit::reference {
namespace {

using slice::kRowBlock;

void check_slice(const AttentionShape& s, TensorView q, TensorView k, TensorView v, int batch,
                 int head_q) {
  validate(s);
  for (const auto& [name, t] : {std::pair{"q", q}, {"k", k}, {"v", v}}) {
    if (t.data == nullptr) throw std::invalid_argument(std::string("forward slice: null ") + name);
  }
  if (batch < 0 || batch >= s.batch || head_q < 0 || head_q >= s.nhead_q) {
    throw std::invalid_argument("forward slice: (batch, head_q) = (" + std::to_string(batch) +
                                ", " + std::to_string(head_q) + "); accepted: batch < " +
                                std::to_string(s.batch) + ", head_q < " +
                                std::to_string(s.nhead_q));
  }
}

// The slice's constants in the arithmetic's precision, as a kernel holds them (floats for lowp).
template <typename Real>
struct RowConstants {
  Real scale;
  Real cap;   // > 0: softcap
  Real sink;  // used when has_sink
  bool has_sink;
};

// Rows [i0, i1) of the slice: scores against the block's key span (capped when the softcap is on),
// the row's LSE (fp64 or fp32, with the max subtracted, the sink in its sum), P = exp(x - LSE)
// rounded by the arithmetic, O = sum P V accumulated in Real and rounded on output.
template <typename Arith>
void forward_rows(const AttentionShape& s, const Arith& arith,
                  const RowConstants<typename Arith::Real>& c, const typename Arith::Real* q,
                  const typename Arith::Real* kt, const typename Arith::Real* v, int i0, int i1,
                  ForwardSlice& out) {
  using Real = typename Arith::Real;
  const int rows = i1 - i0, dq = s.hdim_q, dv = s.hdim_v;
  const IndexSpan span = slice::block_span(i0, i1, [&](int i) { return visible_key_span(s, i); });
  const int width = span.hi - span.lo;
  std::vector<Real> x(static_cast<size_t>(rows) * static_cast<size_t>(std::max(width, 0)));
  std::vector<Real> acc(static_cast<size_t>(rows) * static_cast<size_t>(dv), Real(0));
  if (width > 0) {
    slice::dot_block(q + static_cast<size_t>(i0) * dq, static_cast<size_t>(dq), rows, kt + span.lo,
                     static_cast<size_t>(s.seqlen_k), width, dq, x.data(),
                     static_cast<size_t>(width));
  }
  for (int r = 0; r < rows; ++r) {
    const int i = i0 + r;
    Real* xr = x.data() + static_cast<size_t>(r) * width;
    for (int j = span.lo; j < span.hi; ++j) {
      Real& xj = xr[j - span.lo];
      if (!key_visible(s, i, j)) {
        xj = slice::kNegInf<Real>;
        continue;
      }
      xj *= c.scale;
      if (c.cap > 0) xj = slice::soft_cap(xj, c.cap).score;
    }
    const Real lse = slice::row_lse(xr, width, c.has_sink ? &c.sink : nullptr);
    out.lse[static_cast<size_t>(i)] = static_cast<double>(lse);
    // x becomes P, 0 where masked and in a row that sees no key (whose O stays 0, also when a sink
    // makes its LSE finite).
    for (int w = 0; w < width; ++w) {
      xr[w] = xr[w] == slice::kNegInf<Real> ? Real(0) : arith.round(std::exp(xr[w] - lse));
    }
  }
  // O = P V, each row summed over its keys in order. Keys outermost: a V row serves every row of
  // the block while it is in L1.
  for (int w = 0; w < width; ++w) {
    const Real* v_row = v + static_cast<size_t>(span.lo + w) * dv;
    for (int r = 0; r < rows; ++r) {
      const Real p = x[static_cast<size_t>(r) * width + w];
      if (p != 0) slice::axpy(p, v_row, acc.data() + static_cast<size_t>(r) * dv, dv);
    }
  }
  for (int r = 0; r < rows; ++r) {
    double* orow = out.o.data() + static_cast<size_t>(i0 + r) * dv;
    const Real* accr = acc.data() + static_cast<size_t>(r) * dv;
    for (int d = 0; d < dv; ++d) orow[d] = static_cast<double>(arith.round(accr[d]));
  }
}

template <typename Arith>
ForwardSlice forward_slice(const AttentionShape& s, const Arith& arith, TensorView q, TensorView k,
                           TensorView v, int batch, int head_q) {
  using Real = typename Arith::Real;
  check_slice(s, q, k, v, batch, head_q);
  const int head_k = head_q / s.group();
  const std::vector<Real> qp = slice::pack_rows<Real>(q, batch, head_q, s.seqlen_q, s.hdim_q);
  const std::vector<Real> kt = slice::pack_columns<Real>(k, batch, head_k, s.seqlen_k, s.hdim_q);
  const std::vector<Real> vp = slice::pack_rows<Real>(v, batch, head_k, s.seqlen_k, s.hdim_v);
  ForwardSlice out;
  out.o.assign(static_cast<size_t>(s.seqlen_q) * s.hdim_v, 0.0);
  out.lse.assign(static_cast<size_t>(s.seqlen_q), 0.0);
  const RowConstants<Real> c{
      static_cast<Real>(s.scale), s.has_softcap() ? static_cast<Real>(s.softcap) : Real(0),
      s.sinks != nullptr ? static_cast<Real>(s.sinks[head_q]) : Real(0), s.sinks != nullptr};
  const int blocks = (s.seqlen_q + kRowBlock - 1) / kRowBlock;
  parallel_for(blocks, slice::slice_work(s, 1, s.hdim_q + s.hdim_v), [&](int block) {
    const int i0 = block * kRowBlock;
    forward_rows(s, arith, c, qp.data(), kt.data(), vp.data(), i0,
                 std::min(i0 + kRowBlock, s.seqlen_q), out);
  });
  return out;
}

}  // namespace

ForwardSlice forward_slice_ref64(const AttentionShape& s, TensorView q, TensorView k, TensorView v,
                                 int batch, int head_q) {
  return forward_slice(s, slice::Exact{}, q, k, v, batch, head_q);
}

ForwardSlice forward_slice_lowp(const AttentionShape& s, bool bf16, TensorView q, TensorView k,
                                TensorView v, int batch, int head_q) {
  return forward_slice(s, slice::KernelLike{bf16}, q, k, v, batch, head_q);
}

SliceReferences<ForwardSlice> forward_slice_references(const AttentionShape& s, bool bf16,
                                                       TensorView q, TensorView k, TensorView v,
                                                       int batch, int head_q) {
  return {forward_slice_ref64(s, q, k, v, batch, head_q),
          forward_slice_lowp(s, bf16, q, k, v, batch, head_q)};
}

}  // namespace fmha_jit::reference
