#include "tools/fmha-jit/run_reference.hpp"

#include <cmath>
#include <limits>

#include "reference/cpu_reference.hpp"
#include "tools/fmha-jit/attention_io.hpp"
#include "tools/fmha-jit/packed_batch.hpp"

namespace fmha_jit::cli {
namespace {
namespace ref = fmha_jit::reference;

// The rows of a (packed) tensor from row0 on, as the reference's batch-1 view.
ref::TensorView rows(std::span<const float> data, const TensorStrides& s, std::int64_t row0) {
  return {data.data() + row0 * s.row, ref_strides(s)};
}
ref::MutableTensorView rows(std::vector<float>& data, const TensorStrides& s, std::int64_t row0) {
  return {data.data() + row0 * s.row, ref_strides(s)};
}

ref::AttentionShape base_shape(const FmhaProblem& p, MaskKind mask, const ReferenceInputs& in) {
  ref::AttentionShape shape = reference_shape(p, mask);
  shape.sinks = in.sinks.empty() ? nullptr : in.sinks.data();
  return shape;
}

ref::AttentionShape sequence_shape(ref::AttentionShape shape, const Sequence& s) {
  shape.batch = 1;
  shape.seqlen_q = static_cast<int>(s.seqlen_q);
  shape.seqlen_k = static_cast<int>(s.seqlen_k);
  return shape;
}

// The packed LSE is [nhead_q, total_q]; the reference's LSE of one sequence is [nhead_q, Sq].
std::int64_t packed_lse_index(const FmhaProblem& p, const Sequence& s, std::int64_t h,
                              std::int64_t i) {
  return h * p.total_q + s.q_row0 + i;
}

}  // namespace

ReferenceOutputs reference_forward(const FmhaProblem& p, MaskKind mask, const ReferenceInputs& in) {
  const ref::AttentionShape shape = base_shape(p, mask, in);
  ReferenceOutputs out;
  out.o.assign(static_cast<std::size_t>(p.o_elements()), 0.f);
  out.lse.assign(static_cast<std::size_t>(p.lse_elements()), 0.f);
  if (!p.varlen()) {
    ref::attention_forward(shape, rows(in.q, p.q_stride(), 0), rows(in.k, p.k_stride(), 0),
                           rows(in.v, p.v_stride(), 0), rows(out.o, p.o_stride(), 0),
                           out.lse.data());
    return out;
  }
  for (const Sequence& s : sequences(p)) {
    if (s.seqlen_q == 0) continue;
    if (s.seqlen_k == 0) {
      // The reference takes no empty sequence; its rule for rows that see no key applies: O = 0
      // (as filled) and LSE = the head's sink, or -inf without sinks.
      for (std::int64_t h = 0; h < p.nhead_q; ++h) {
        const float lse = shape.sinks ? shape.sinks[h] : -std::numeric_limits<float>::infinity();
        for (std::int64_t i = 0; i < s.seqlen_q; ++i) out.lse[packed_lse_index(p, s, h, i)] = lse;
      }
      continue;
    }
    std::vector<float> lse(static_cast<std::size_t>(p.nhead_q * s.seqlen_q));
    ref::attention_forward(sequence_shape(shape, s), rows(in.q, p.q_stride(), s.q_row0),
                           rows(in.k, p.k_stride(), s.k_row0), rows(in.v, p.v_stride(), s.k_row0),
                           rows(out.o, p.o_stride(), s.q_row0), lse.data());
    for (std::int64_t h = 0; h < p.nhead_q; ++h) {
      for (std::int64_t i = 0; i < s.seqlen_q; ++i) {
        out.lse[packed_lse_index(p, s, h, i)] = lse[h * s.seqlen_q + i];
      }
    }
  }
  return out;
}

ReferenceOutputs reference_backward(const FmhaProblem& p, MaskKind mask,
                                    const ReferenceInputs& in) {
  const ref::AttentionShape shape = base_shape(p, mask, in);
  ReferenceOutputs out;
  // Keys of an empty query sequence get no gradient from it: zeros, as the kernels write.
  out.dq.assign(static_cast<std::size_t>(p.q_elements()), 0.f);
  out.dk.assign(static_cast<std::size_t>(p.k_elements()), 0.f);
  out.dv.assign(static_cast<std::size_t>(p.v_elements()), 0.f);
  if (shape.sinks) out.d_sinks.assign(static_cast<std::size_t>(p.nhead_q), 0.f);
  float* d_sinks = shape.sinks ? out.d_sinks.data() : nullptr;
  if (!p.varlen()) {
    ref::attention_backward(shape, rows(in.q, p.q_stride(), 0), rows(in.k, p.k_stride(), 0),
                            rows(in.v, p.v_stride(), 0), rows(in.o, p.o_stride(), 0),
                            rows(in.d_o, p.do_stride(), 0), in.lse.data(),
                            rows(out.dq, p.dq_stride(), 0), rows(out.dk, p.dk_stride(), 0),
                            rows(out.dv, p.dv_stride(), 0), d_sinks);
    return out;
  }
  // The sinks' gradient sums over every row of every sequence: accumulated here in fp64.
  std::vector<double> d_sinks_sum(static_cast<std::size_t>(p.nhead_q), 0.0);
  for (const Sequence& s : sequences(p)) {
    if (s.seqlen_q == 0) continue;
    if (s.seqlen_k == 0) {
      // Rows without keys: dQ = 0 (as filled); their sink term -exp(sink - LSE) * rowsum(dO * O)
      // is kept, computed from the O and LSE given, as the kernels compute it.
      if (!shape.sinks) continue;
      const TensorStrides os = p.o_stride(), ds = p.do_stride();
      for (std::int64_t h = 0; h < p.nhead_q; ++h) {
        for (std::int64_t i = 0; i < s.seqlen_q; ++i) {
          const std::int64_t row = s.q_row0 + i;
          double dot = 0;
          for (std::int64_t d = 0; d < p.hdim_v; ++d) {
            dot += double(in.d_o[h * ds.head + row * ds.row + d]) *
                   double(in.o[h * os.head + row * os.row + d]);
          }
          const double lse = in.lse[packed_lse_index(p, s, h, i)];
          d_sinks_sum[h] -= std::exp(double(shape.sinks[h]) - lse) * dot;
        }
      }
      continue;
    }
    std::vector<float> lse(static_cast<std::size_t>(p.nhead_q * s.seqlen_q));
    for (std::int64_t h = 0; h < p.nhead_q; ++h) {
      for (std::int64_t i = 0; i < s.seqlen_q; ++i) {
        lse[h * s.seqlen_q + i] = in.lse[packed_lse_index(p, s, h, i)];
      }
    }
    std::vector<float> seq_d_sinks(static_cast<std::size_t>(p.nhead_q), 0.f);
    ref::attention_backward(
        sequence_shape(shape, s), rows(in.q, p.q_stride(), s.q_row0),
        rows(in.k, p.k_stride(), s.k_row0), rows(in.v, p.v_stride(), s.k_row0),
        rows(in.o, p.o_stride(), s.q_row0), rows(in.d_o, p.do_stride(), s.q_row0), lse.data(),
        rows(out.dq, p.dq_stride(), s.q_row0), rows(out.dk, p.dk_stride(), s.k_row0),
        rows(out.dv, p.dv_stride(), s.k_row0), d_sinks ? seq_d_sinks.data() : nullptr);
    for (std::int64_t h = 0; h < p.nhead_q; ++h) d_sinks_sum[h] += seq_d_sinks[h];
  }
  for (std::int64_t h = 0; h < p.nhead_q && d_sinks; ++h) d_sinks[h] = float(d_sinks_sum[h]);
  return out;
}

}  // namespace fmha_jit::cli
