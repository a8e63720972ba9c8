// The sequence harness: packed (or dense) batches, their runs, and each sequence judged as the
// dense problem of its own lengths. Sequence b's rows of a packed bshd tensor with H heads are a
// dense batch-1 tensor at row offset cu_seqlens[b] with strides (0, D, H D): the references read
// them in place.
#include "gpu/sequence_harness.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <random>

#include "fmha_jit/dispatcher.hpp"
#include "gpu/attention_harness_detail.hpp"
#include "reference/slice_reference.hpp"

namespace fmha_jit::test {
namespace {

namespace ref = reference;

// Sequences judged on every head up to this many query x key pairs; past it, on their first and
// last head (the CPU references cost lq x lk x hdim per head).
constexpr double kAllHeadsPairs = 1 << 22;

struct Batch {
  explicit Batch(const SequenceCase& sc) : c(sc) {}
  const SequenceCase& c;
  int batch = 0, total_q = 0, total_k = 0, max_q = 1, max_k = 1;
  std::vector<int> cu_q, cu_k;
  DeviceTensor q, k, v;
  DeviceBuffer cu_q_dev, cu_k_dev;
  std::vector<float> sinks;
  DeviceBuffer sinks_dev;

  int lq(int b) const { return cu_q[b + 1] - cu_q[b]; }
  int lk(int b) const { return cu_k[b + 1] - cu_k[b]; }
  bool bf16() const { return c.dtype == DType::bf16; }
  // Where row i of (sequence b, query head h) sits in the LSE: [nhead_q, total_q] when packed,
  // [batch, nhead_q, seqlen_q] when dense.
  std::size_t lse_index(int b, int h, int i) const {
    if (c.packed) return static_cast<std::size_t>(h) * total_q + cu_q[b] + i;
    return (static_cast<std::size_t>(b) * c.nhead_q + h) * max_q + i;
  }
};

std::vector<int> cumulative(const std::vector<int>& lengths) {
  std::vector<int> cu(lengths.size() + 1, 0);
  std::partial_sum(lengths.begin(), lengths.end(), cu.begin() + 1);
  return cu;
}

DeviceBuffer upload_ints(const std::vector<int>& values) {
  DeviceBuffer b(values.size() * sizeof(int));
  b.upload(values.data(), values.size() * sizeof(int));
  return b;
}

std::unique_ptr<Batch> make_batch(const SequenceCase& c, std::uint32_t seed) {
  REQUIRE(c.seqlens_q.size() == c.seqlens_k.size());
  REQUIRE(!c.seqlens_q.empty());
  auto b = std::make_unique<Batch>(c);
  b->batch = static_cast<int>(c.seqlens_q.size());
  b->cu_q = cumulative(c.seqlens_q);
  b->cu_k = cumulative(c.seqlens_k);
  b->total_q = b->cu_q.back();
  b->total_k = b->cu_k.back();
  b->max_q = std::max(1, *std::max_element(c.seqlens_q.begin(), c.seqlens_q.end()));
  b->max_k = std::max(1, *std::max_element(c.seqlens_k.begin(), c.seqlens_k.end()));
  if (!c.packed) {
    for (int i = 0; i < b->batch; ++i) {
      REQUIRE(b->lq(i) == b->max_q);
      REQUIRE(b->lk(i) == b->max_k);
    }
  }
  const auto elements = [](int rows, int heads, int hdim) {
    return static_cast<std::size_t>(rows) * heads * hdim;
  };
  b->q = random_tensor(elements(b->total_q, c.nhead_q, c.hdim), b->bf16(), seed);
  b->k = random_tensor(elements(b->total_k, c.nhead_k, c.hdim), b->bf16(), seed + 1);
  b->v = random_tensor(elements(b->total_k, c.nhead_k, c.hdim), b->bf16(), seed + 2);
  b->cu_q_dev = upload_ints(b->cu_q);
  b->cu_k_dev = upload_ints(b->cu_k);
  if (c.sinks) {
    // Sink logits of the order of the scores' maxima, so that they move the softmax measurably.
    std::mt19937 rng(seed + 7);
    std::normal_distribution<float> logit(1.f, 1.5f);
    b->sinks.resize(static_cast<std::size_t>(c.nhead_q));
    for (float& s : b->sinks) s = logit(rng);
    b->sinks_dev = DeviceBuffer(b->sinks.size() * 4);
    b->sinks_dev.upload(b->sinks.data(), b->sinks.size() * 4);
  }
  return b;
}

FmhaKernelConfig config_of(const SequenceCase& c, Family family, bool deterministic) {
  FmhaKernelConfig k;
  k.family = family;
  k.dtype = c.dtype;
  k.hdim_q = k.hdim_v = c.hdim;
  k.arch = detect_gpu_arch();
  k.mask = c.mask;
  k.varlen = c.packed;
  k.sinks = c.sinks;
  k.softcap = c.softcap > 0;
  k.deterministic = deterministic;
  return k;
}

std::shared_ptr<FmhaRunner> setup_runner(const SequenceCase& c, Family family, bool deterministic) {
  const auto r = setup_fmha_dispatcher(config_of(c, family, deterministic));
  INFO(r.error);
  REQUIRE(r.success);
  REQUIRE(r.runner->loaded());
  return r.runner;
}

FmhaProblem problem_of(const Batch& b) {
  FmhaProblem p;
  p.layout = Layout::bshd;
  p.batch = b.batch;
  p.nhead_q = b.c.nhead_q;
  p.nhead_k = b.c.nhead_k;
  p.seqlen_q = b.max_q;
  p.seqlen_k = b.max_k;
  p.hdim_q = p.hdim_v = b.c.hdim;
  p.window_left = b.c.window_left;
  p.window_right = b.c.window_right;
  p.softcap = b.c.softcap;
  if (b.c.packed) {
    p.cu_seqlens_q = static_cast<const std::int32_t*>(b.cu_q_dev.data());
    p.cu_seqlens_k = static_cast<const std::int32_t*>(b.cu_k_dev.data());
    p.total_q = b.total_q;
    p.total_k = b.total_k;
  }
  return p;
}

// Sequence b as the dense problem the references see (batch 1).
ref::AttentionShape shape_of(const Batch& b, int seq) {
  ref::AttentionShape s;
  s.batch = 1;
  s.nhead_q = b.c.nhead_q;
  s.nhead_k = b.c.nhead_k;
  s.seqlen_q = b.lq(seq);
  s.seqlen_k = b.lk(seq);
  s.hdim_q = s.hdim_v = b.c.hdim;
  s.mask_kind = static_cast<int>(b.c.mask);
  s.window_left = b.c.window_left;
  s.window_right = b.c.window_right;
  s.scale = 1.0 / std::sqrt(static_cast<double>(b.c.hdim));
  s.softcap = b.c.softcap;
  s.sinks = b.c.sinks ? b.sinks.data() : nullptr;
  return s;
}

// Rows from `row0` of a packed bshd tensor with `heads` heads, as a batch-1 view.
ref::TensorView rows_view(const std::vector<float>& host, int row0, int heads, int hdim) {
  return {host.data() + static_cast<std::size_t>(row0) * heads * hdim, {0, hdim, heads * hdim}};
}

// Rows [row0, row0 + rows) of head h of a packed tensor, row-major.
std::vector<float> head_rows(const std::vector<float>& values, int row0, int rows, int heads, int h,
                             int hdim) {
  std::vector<float> out(static_cast<std::size_t>(rows) * hdim);
  for (int i = 0; i < rows; ++i) {
    const std::size_t at = (static_cast<std::size_t>(row0 + i) * heads + h) * hdim;
    std::copy_n(values.begin() + static_cast<std::ptrdiff_t>(at), hdim,
                out.begin() + static_cast<std::ptrdiff_t>(i) * hdim);
  }
  return out;
}

std::vector<float> widen_all(const std::vector<std::uint16_t>& bits, bool bf16) {
  std::vector<float> out(bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i) out[i] = widen(bits[i], bf16);
  return out;
}

std::int64_t count_nonfinite(const std::vector<float>& values) {
  return std::count_if(values.begin(), values.end(), [](float x) { return !std::isfinite(x); });
}

bool judged_head(const Batch& b, int seq, int h, int heads) {
  return static_cast<double>(b.lq(seq)) * b.lk(seq) <= kAllHeadsPairs || h == 0 || h == heads - 1;
}

std::string where(int seq, const char* head_kind, int h, const std::string& suffix = "") {
  return "sequence " + std::to_string(seq) + ", " + head_kind + " " + std::to_string(h) + suffix;
}

// The LSE of a row that sees no key: the sink, or -inf.
bool empty_row_lse_ok(const Batch& b, int h, float lse) {
  if (!b.c.sinks) return std::isinf(lse) && lse < 0;
  const float sink = b.sinks[static_cast<std::size_t>(h)];
  return std::fabs(lse - sink) <= 1e-6f * (1.f + std::fabs(sink));
}

}  // namespace

std::string describe(const SequenceCase& c) {
  std::string s = std::string(c.packed ? "packed" : "dense") + " " +
                  std::string(to_string(c.dtype)) + " hdim " + std::to_string(c.hdim) + " " +
                  std::string(to_string(c.mask)) + " heads " + std::to_string(c.nhead_q) + "/" +
                  std::to_string(c.nhead_k) + " lengths";
  for (std::size_t i = 0; i < c.seqlens_q.size(); ++i) {
    s += (i ? "," : " ") + std::to_string(c.seqlens_q[i]) + "x" + std::to_string(c.seqlens_k[i]);
  }
  if (c.mask == MaskKind::sliding_window) {
    s += " window " + std::to_string(c.window_left) + "," + std::to_string(c.window_right);
  }
  if (c.sinks) s += " sinks";
  if (c.softcap > 0) s += " softcap " + std::to_string(c.softcap);
  return s;
}

CheckResult verify_sequences_forward(const SequenceCase& c, std::uint32_t seed) {
  const auto b = make_batch(c, seed);
  auto runner = setup_runner(c, Family::fwd, false);
  const std::size_t o_elements = static_cast<std::size_t>(b->total_q) * c.nhead_q * c.hdim;
  const std::size_t lse_elements = static_cast<std::size_t>(b->total_q) * c.nhead_q;
  DeviceBuffer o = poisoned(o_elements * 2), lse = poisoned(lse_elements * 4);
  FwdTensors t{b->q.device.data(), b->k.device.data(), b->v.device.data(), o.data(),
               static_cast<float*>(lse.data())};
  t.sinks = c.sinks ? static_cast<const float*>(b->sinks_dev.data()) : nullptr;
  runner->run_fwd(problem_of(*b), t);
  device_synchronize();
  const std::vector<float> ours = download_16bit(o, o_elements, b->bf16());
  std::vector<float> ours_lse(lse_elements);
  lse.download(ours_lse.data(), lse_elements * 4);

  detail::Judgement judgement;
  const double u = ref::unit_roundoff(b->bf16());
  for (int seq = 0; seq < b->batch; ++seq) {
    const int lq = b->lq(seq), lk = b->lk(seq);
    if (lq == 0) continue;
    const ref::AttentionShape s = shape_of(*b, seq);
    for (int h = 0; h < c.nhead_q; ++h) {
      const std::vector<float> o_rows = head_rows(ours, b->cu_q[seq], lq, c.nhead_q, h, c.hdim);
      std::vector<float> lse_rows(static_cast<std::size_t>(lq));
      for (int i = 0; i < lq; ++i) lse_rows[i] = ours_lse[b->lse_index(seq, h, i)];
      if (lk == 0) {
        // No key at all: O = 0 and the LSE the sink's (or -inf), exactly what the kernels write
        // for a row that sees none.
        if (std::any_of(o_rows.begin(), o_rows.end(), [](float x) { return x != 0.f; })) {
          judgement.fail("O", "O is not 0 in " + where(seq, "head", h) + ", which has no key");
        }
        for (float l : lse_rows) {
          if (!empty_row_lse_ok(*b, h, l)) {
            judgement.fail("LSE", "LSE " + std::to_string(l) + " in " + where(seq, "head", h) +
                                      ", which has no key");
            break;
          }
        }
        continue;
      }
      if (!judged_head(*b, seq, h, c.nhead_q)) continue;
      const auto refs = ref::forward_slice_references(
          s, b->bf16(), rows_view(b->q.host, b->cu_q[seq], c.nhead_q, c.hdim),
          rows_view(b->k.host, b->cu_k[seq], c.nhead_k, c.hdim),
          rows_view(b->v.host, b->cu_k[seq], c.nhead_k, c.hdim), 0, h);
      judgement.add("O", where(seq, "head", h),
                    ref::judge({"O", lq, c.hdim, o_rows, refs.ref64.o, refs.lowp.o, u}));
      judgement.add("LSE", where(seq, "head", h),
                    ref::judge({"LSE", lq, 1, lse_rows, refs.ref64.lse, refs.lowp.lse,
                                ref::kUnitRoundoffFp32}));
    }
  }
  // Every row of every sequence is written and finite, judged or not.
  if (const auto n = count_nonfinite(ours)) {
    judgement.fail("O", std::to_string(n) + " elements of O are NaN or infinite");
  }
  return judgement.result("forward " + describe(c));
}

void check_sequences_forward(const SequenceCase& c, std::uint32_t seed) {
  const CheckResult r = verify_sequences_forward(c, seed);
  detail::print_report(r);
  INFO(r.report);
  CHECK(r.pass);
}

namespace {

// The backward's inputs a forward produces, from the CPU's exact forward of every (sequence,
// query head): O rounded to the dtype and the LSE in fp32, per sequence [nhead_q, lq].
struct ForwardInputs {
  DeviceTensor o, d_o;
  std::vector<float> lse;  // the kernel's layout (Batch::lse_index)
  DeviceBuffer lse_dev;
  std::vector<std::vector<float>> lse_of_sequence;  // [nhead_q, lq] per sequence
};

ForwardInputs forward_inputs(const Batch& b, std::uint32_t seed) {
  const SequenceCase& c = b.c;
  ForwardInputs in;
  const std::size_t o_elements = static_cast<std::size_t>(b.total_q) * c.nhead_q * c.hdim;
  std::vector<float> o(o_elements, 0.f);
  in.lse.assign(static_cast<std::size_t>(b.total_q) * c.nhead_q, 0.f);
  for (int seq = 0; seq < b.batch; ++seq) {
    const int lq = b.lq(seq), lk = b.lk(seq);
    std::vector<float>& seq_lse =
        in.lse_of_sequence.emplace_back(static_cast<std::size_t>(lq) * c.nhead_q, 0.f);
    for (int h = 0; h < c.nhead_q && lq > 0; ++h) {
      if (lk == 0) {
        const float empty = c.sinks ? b.sinks[static_cast<std::size_t>(h)]
                                    : -std::numeric_limits<float>::infinity();
        for (int i = 0; i < lq; ++i) {
          in.lse[b.lse_index(seq, h, i)] = seq_lse[static_cast<std::size_t>(h) * lq + i] = empty;
        }
        continue;  // O stays 0
      }
      const ref::ForwardSlice f = ref::forward_slice_ref64(
          shape_of(b, seq), rows_view(b.q.host, b.cu_q[seq], c.nhead_q, c.hdim),
          rows_view(b.k.host, b.cu_k[seq], c.nhead_k, c.hdim),
          rows_view(b.v.host, b.cu_k[seq], c.nhead_k, c.hdim), 0, h);
      for (int i = 0; i < lq; ++i) {
        float* row =
            o.data() + (static_cast<std::size_t>(b.cu_q[seq] + i) * c.nhead_q + h) * c.hdim;
        for (int d = 0; d < c.hdim; ++d) {
          row[d] = ref::round_to_dtype(
              static_cast<float>(f.o[static_cast<std::size_t>(i) * c.hdim + d]), b.bf16());
        }
        const auto l = static_cast<float>(f.lse[static_cast<std::size_t>(i)]);
        in.lse[b.lse_index(seq, h, i)] = seq_lse[static_cast<std::size_t>(h) * lq + i] = l;
      }
    }
  }
  in.o = upload_rounded(o, b.bf16());
  in.d_o = random_tensor(o_elements, b.bf16(), seed + 3);
  in.lse_dev = DeviceBuffer(in.lse.size() * 4);
  in.lse_dev.upload(in.lse.data(), in.lse.size() * 4);
  return in;
}

}  // namespace

BackwardRepro verify_sequences_backward(const SequenceCase& c, bool deterministic,
                                        std::uint32_t seed, int runs) {
  const auto b = make_batch(c, seed);
  const ForwardInputs in = forward_inputs(*b, seed);
  const int group = c.nhead_q / c.nhead_k;
  const double u = ref::unit_roundoff(b->bf16());

  // References of every judged (sequence, kv head); the sinks' gradient summed over sequences.
  struct KvRefs {
    int seq, hk;
    ref::SliceReferences<ref::BackwardSlice> r;
  };
  std::vector<KvRefs> refs;
  std::vector<double> dsinks64(static_cast<std::size_t>(c.nhead_q), 0.0), dsinks_lowp = dsinks64;
  for (int seq = 0; seq < b->batch; ++seq) {
    const int lq = b->lq(seq), lk = b->lk(seq);
    if (lq == 0 || lk == 0) continue;  // checked exactly below
    const ref::BackwardInputsView view{rows_view(b->q.host, b->cu_q[seq], c.nhead_q, c.hdim),
                                       rows_view(b->k.host, b->cu_k[seq], c.nhead_k, c.hdim),
                                       rows_view(b->v.host, b->cu_k[seq], c.nhead_k, c.hdim),
                                       rows_view(in.o.host, b->cu_q[seq], c.nhead_q, c.hdim),
                                       rows_view(in.d_o.host, b->cu_q[seq], c.nhead_q, c.hdim),
                                       in.lse_of_sequence[static_cast<std::size_t>(seq)].data()};
    for (int hk = 0; hk < c.nhead_k; ++hk) {
      // The sinks' gradient sums every sequence: each is judged then.
      if (!c.sinks && !judged_head(*b, seq, hk, c.nhead_k)) continue;
      KvRefs& r = refs.emplace_back(KvRefs{
          seq, hk, ref::backward_slice_references(shape_of(*b, seq), b->bf16(), view, 0, hk)});
      for (int g = 0; g < group && c.sinks; ++g) {
        dsinks64[static_cast<std::size_t>(hk * group + g)] += r.r.ref64.dsinks[g];
        dsinks_lowp[static_cast<std::size_t>(hk * group + g)] += r.r.lowp.dsinks[g];
      }
    }
  }
  // A sequence without keys adds no sink term: its O, hence D, is 0.

  auto runner = setup_runner(c, Family::bwd, deterministic);
  const FmhaProblem p = problem_of(*b);
  const std::size_t q_elements = static_cast<std::size_t>(b->total_q) * c.nhead_q * c.hdim;
  const std::size_t k_elements = static_cast<std::size_t>(b->total_k) * c.nhead_k * c.hdim;
  BackwardRepro repro;
  repro.runs = runs;
  detail::Judgement judgement;
  std::vector<std::uint16_t> first_bits[3];
  std::vector<float> first_dsinks;
  for (int run = 0; run < runs; ++run) {
    DeviceBuffer dq = poisoned(q_elements * 2), dk = poisoned(k_elements * 2),
                 dv = poisoned(k_elements * 2),
                 d_sinks = poisoned(static_cast<std::size_t>(c.nhead_q) * 4);
    BwdTensors t{b->q.device.data(),
                 b->k.device.data(),
                 b->v.device.data(),
                 in.o.device.data(),
                 static_cast<const float*>(in.lse_dev.data()),
                 in.d_o.device.data(),
                 dq.data(),
                 dk.data(),
                 dv.data()};
    if (c.sinks) {
      t.sinks = static_cast<const float*>(b->sinks_dev.data());
      t.d_sinks = static_cast<float*>(d_sinks.data());
    }
    runner->run_bwd(p, t);
    device_synchronize();
    std::vector<std::uint16_t> bits[3] = {download_bits(dq, q_elements),
                                          download_bits(dk, k_elements),
                                          download_bits(dv, k_elements)};
    const std::vector<float> values[3] = {widen_all(bits[0], b->bf16()),
                                          widen_all(bits[1], b->bf16()),
                                          widen_all(bits[2], b->bf16())};
    const std::string in_run = runs > 1 ? ", run " + std::to_string(run) : "";
    for (const KvRefs& r : refs) {
      const int lq = b->lq(r.seq), lk = b->lk(r.seq);
      if (!judged_head(*b, r.seq, r.hk, c.nhead_k)) continue;
      const std::size_t per_head = static_cast<std::size_t>(lq) * c.hdim;
      for (int g = 0; g < group; ++g) {
        const int h = r.hk * group + g;
        judgement.add(
            "dQ", where(r.seq, "head", h, in_run),
            ref::judge({"dQ", lq, c.hdim,
                        head_rows(values[0], b->cu_q[r.seq], lq, c.nhead_q, h, c.hdim),
                        std::span<const double>(r.r.ref64.dq.data() + g * per_head, per_head),
                        std::span<const double>(r.r.lowp.dq.data() + g * per_head, per_head), u}));
      }
      judgement.add("dK", where(r.seq, "kv head", r.hk, in_run),
                    ref::judge({"dK", lk, c.hdim,
                                head_rows(values[1], b->cu_k[r.seq], lk, c.nhead_k, r.hk, c.hdim),
                                r.r.ref64.dk, r.r.lowp.dk, u}));
      judgement.add("dV", where(r.seq, "kv head", r.hk, in_run),
                    ref::judge({"dV", lk, c.hdim,
                                head_rows(values[2], b->cu_k[r.seq], lk, c.nhead_k, r.hk, c.hdim),
                                r.r.ref64.dv, r.r.lowp.dv, u}));
    }
    // A sequence without keys has dQ = 0; keys without queries have dK = dV = 0.
    for (int seq = 0; seq < b->batch; ++seq) {
      const bool no_keys = b->lk(seq) == 0, no_queries = b->lq(seq) == 0;
      const auto nonzero = [](const std::vector<float>& rows) {
        return std::any_of(rows.begin(), rows.end(), [](float x) { return x != 0.f; });
      };
      for (int h = 0; h < c.nhead_q && no_keys; ++h) {
        if (nonzero(head_rows(values[0], b->cu_q[seq], b->lq(seq), c.nhead_q, h, c.hdim))) {
          judgement.fail("dQ",
                         "dQ is not 0 in " + where(seq, "head", h, in_run) + ", which has no key");
        }
      }
      for (int hk = 0; hk < c.nhead_k && no_queries; ++hk) {
        for (int t2 = 1; t2 < 3; ++t2) {
          if (nonzero(head_rows(values[t2], b->cu_k[seq], b->lk(seq), c.nhead_k, hk, c.hdim))) {
            judgement.fail(t2 == 1 ? "dK" : "dV",
                           std::string(t2 == 1 ? "dK" : "dV") + " is not 0 in " +
                               where(seq, "kv head", hk, in_run) + ", which has no query");
          }
        }
      }
    }
    const char* names[3] = {"dQ", "dK", "dV"};
    for (int t2 = 0; t2 < 3; ++t2) {
      if (const auto n = count_nonfinite(values[t2])) {
        judgement.fail(names[t2], std::to_string(n) + " elements of " + names[t2] +
                                      " are NaN or infinite" + in_run);
      }
    }
    std::vector<float> ours_dsinks;
    if (c.sinks) {
      ours_dsinks.resize(static_cast<std::size_t>(c.nhead_q));
      d_sinks.download(ours_dsinks.data(), ours_dsinks.size() * 4);
      judgement.add("dSinks", "every sequence" + in_run,
                    ref::judge({"dSinks", 1, c.nhead_q, ours_dsinks, dsinks64, dsinks_lowp,
                                ref::kUnitRoundoffFp32}));
    }
    if (run == 0) {
      for (int t2 = 0; t2 < 3; ++t2) first_bits[t2] = std::move(bits[t2]);
      first_dsinks = ours_dsinks;
      continue;
    }
    bool same = std::memcmp(first_dsinks.data(), ours_dsinks.data(), ours_dsinks.size() * 4) == 0;
    for (int t2 = 0; t2 < 3; ++t2) same &= bits[t2] == first_bits[t2];
    if (!same) {
      repro.bit_exact = false;
      if (deterministic) {
        judgement.fail("run-to-run", "deterministic mode: run " + std::to_string(run) +
                                         " differs from run 0's bytes");
      }
    }
  }
  repro.check =
      judgement.result("backward " + describe(c) + (deterministic ? ", deterministic" : "") + ", " +
                       std::to_string(runs) + " runs");
  return repro;
}

void check_sequences_backward(const SequenceCase& c, bool deterministic, std::uint32_t seed,
                              int runs) {
  const BackwardRepro r = verify_sequences_backward(c, deterministic, seed, runs);
  detail::print_report(r.check);
  INFO(r.check.report);
  CHECK(r.check.pass);
}

}  // namespace fmha_jit::test
