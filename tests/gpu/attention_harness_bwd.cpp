// The harness's backward check: inputs, the judged (batch, kv head) slices, every run judged, the
// deterministic mode's bytes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

#include "gpu/attention_harness_detail.hpp"
#include "reference/slice_reference.hpp"

namespace fmha_jit::test {
namespace {

namespace ref = reference;

constexpr int kBackwardSamples = 2;

struct Inputs {
  DeviceTensor q, k, v, o, d_o;
  std::vector<float> lse;
  DeviceBuffer lse_device;
};

// O and LSE, the backward's inputs that a forward produces. In the judged slices' query heads
// they are the CPU's: ref64's O rounded to the dtype and its LSE in fp32, so that the kernel under
// test and the references start from the same exact forward. When every slice is judged that is
// every head. Otherwise the other heads take the forward of the impl under test (heuristic tiles)
// on the GPU: computing them on the CPU would cost as much as judging every slice, and their
// gradients are only checked for NaN and infinity, which needs a forward's O and LSE, not exact
// ones. judged_kv[b * nhead_k + hk]: whether (batch b, kv head hk) is judged.
void forward_inputs(const AttentionCase& c, KernelImpl impl, const std::vector<bool>& judged_kv,
                    Inputs& in) {
  const bool all = std::all_of(judged_kv.begin(), judged_kv.end(), [](bool j) { return j; });
  const bool bf16 = c.dtype == DType::bf16;
  const TensorGeometry gq = geometry(c, Operand::q), gk = geometry(c, Operand::k),
                       gv = geometry(c, Operand::v), go = geometry(c, Operand::o);
  std::vector<float> o(go.storage(), std::numeric_limits<float>::quiet_NaN());
  in.lse.assign(static_cast<std::size_t>(c.batch) * c.nhead_q * c.seqlen_q, 0.f);
  if (!all) {
    AttentionCase fwd = c;
    fwd.lse = true;
    fwd.block_m = fwd.block_n = fwd.num_warps = fwd.num_stages = 0;
    const ForwardResult f = gpu_forward(fwd, impl, in.q, in.k, in.v);
    o = f.o;
    in.lse = f.lse;
  }
  const ref::AttentionShape s = detail::shape_of(c);
  const int group = c.nhead_q / c.nhead_k;
  for (int b = 0; b < c.batch; ++b) {
    for (int h = 0; h < c.nhead_q; ++h) {
      if (!judged_kv[static_cast<std::size_t>(b) * c.nhead_k + h / group]) continue;
      const ref::ForwardSlice f = ref::forward_slice_ref64(
          s, detail::view_of(in.q, gq), detail::view_of(in.k, gk), detail::view_of(in.v, gv), b, h);
      for (int i = 0; i < c.seqlen_q; ++i) {
        float* row = o.data() + go.offset(b, h, i);
        for (int d = 0; d < c.hdim_v; ++d) {
          row[d] = ref::round_to_dtype(
              static_cast<float>(f.o[static_cast<std::size_t>(i) * c.hdim_v + d]), bf16);
        }
        in.lse[(static_cast<std::size_t>(b) * c.nhead_q + h) * c.seqlen_q + i] =
            static_cast<float>(f.lse[static_cast<std::size_t>(i)]);
      }
    }
  }
  in.o = upload_rounded(o, bf16);
  in.lse_device = DeviceBuffer(in.lse.size() * 4);
  in.lse_device.upload(in.lse.data(), in.lse.size() * 4);
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isfinite(a[i]) && std::isfinite(b[i])) {
      m = std::max(m, std::fabs(double(a[i]) - b[i]));
    }
  }
  return m;
}

}  // namespace

BackwardRepro verify_backward(const AttentionCase& c, KernelImpl impl, bool deterministic,
                              std::uint32_t seed, int runs, const BackwardFault& fault) {
  const bool bf16 = c.dtype == DType::bf16;
  const FmhaProblem p = problem_of(c);
  const TensorGeometry geoms[3] = {geometry(c, Operand::q), geometry(c, Operand::k),
                                   geometry(c, Operand::v)};
  const TensorGeometry &gq = geoms[0], &gk = geoms[1], &gv = geoms[2];
  const TensorGeometry go = geometry(c, Operand::o);
  Inputs in;
  in.q = random_tensor(gq, bf16, seed);
  in.k = random_tensor(gk, bf16, seed + 1);
  in.v = random_tensor(gv, bf16, seed + 2);
  in.d_o = random_tensor(go, bf16, seed + 3);

  const int group = c.nhead_q / c.nhead_k;
  const double pairs = static_cast<double>(c.seqlen_q) * c.seqlen_k;
  // ref64 and lowp of a kv head's slice, and ref64's forward of its query heads.
  const double macs = group * pairs * (2.0 * (4 * c.hdim_q + 3 * c.hdim_v) + (c.hdim_q + c.hdim_v));
  const auto slices = detail::slices_to_check(c.batch, c.nhead_k, macs, seed, kBackwardSamples);
  std::vector<bool> judged_kv(static_cast<std::size_t>(c.batch) * c.nhead_k, false);
  for (const detail::Slice& sl : slices) {
    judged_kv[static_cast<std::size_t>(sl.batch) * c.nhead_k + sl.head] = true;
  }
  forward_inputs(c, impl, judged_kv, in);

  const ref::AttentionShape s = detail::shape_of(c);
  const ref::BackwardInputsView inputs{detail::view_of(in.q, gq),   detail::view_of(in.k, gk),
                                       detail::view_of(in.v, gv),   detail::view_of(in.o, go),
                                       detail::view_of(in.d_o, go), in.lse.data()};
  std::vector<ref::SliceReferences<ref::BackwardSlice>> refs;
  for (const detail::Slice& sl : slices) {
    refs.push_back(ref::backward_slice_references(s, bf16, inputs, sl.batch, sl.head));
  }

  auto runner = detail::setup(Family::bwd, c, impl, deterministic);
  BackwardRepro repro;
  repro.runs = runs;
  detail::Judgement judgement;
  const char* names[3] = {"dQ", "dK", "dV"};
  std::vector<std::uint16_t> first_bits[3];
  std::vector<float> first[3];
  for (int run = 0; run < runs; ++run) {
    DeviceBuffer dq = poisoned(gq.storage() * 2), dk = poisoned(gk.storage() * 2),
                 dv = poisoned(gv.storage() * 2);
    runner->run_bwd(p, {in.q.device.data(), in.k.device.data(), in.v.device.data(),
                        in.o.device.data(), static_cast<const float*>(in.lse_device.data()),
                        in.d_o.device.data(), dq.data(), dk.data(), dv.data()});
    device_synchronize();
    if (fault) {
      BackwardRun faulty{c, run, dq, dk, dv};
      fault(faulty);
    }
    const DeviceBuffer* buffers[3] = {&dq, &dk, &dv};
    std::vector<std::uint16_t> bits[3];
    std::vector<float> values[3];
    for (int t = 0; t < 3; ++t) {
      bits[t] = download_bits(*buffers[t], geoms[t].storage());
      values[t].resize(bits[t].size());
      for (std::size_t i = 0; i < bits[t].size(); ++i) values[t][i] = widen(bits[t][i], bf16);
    }
    const std::string in_run = runs > 1 ? ", run " + std::to_string(run) : "";
    for (std::size_t n = 0; n < slices.size(); ++n) {
      const detail::Slice& sl = slices[n];
      const ref::SliceReferences<ref::BackwardSlice>& r = refs[n];
      const std::size_t per_head = static_cast<std::size_t>(c.seqlen_q) * c.hdim_q;
      for (int g = 0; g < group; ++g) {
        const int h = sl.head * group + g;
        const std::vector<float> ours = detail::slice_rows(values[0], gq, sl.batch, h);
        const std::span<const double> ref64(r.ref64.dq.data() + g * per_head, per_head);
        const std::span<const double> lowp(r.lowp.dq.data() + g * per_head, per_head);
        judgement.add("dQ", "b " + std::to_string(sl.batch) + ", h " + std::to_string(h) + in_run,
                      ref::judge({"dQ", c.seqlen_q, c.hdim_q, ours, ref64, lowp,
                                  detail::dtype_unit_roundoff(c)}));
      }
      const std::string where =
          "b " + std::to_string(sl.batch) + ", kv head " + std::to_string(sl.head) + in_run;
      judgement.add("dK", where,
                    ref::judge({"dK", c.seqlen_k, c.hdim_q,
                                detail::slice_rows(values[1], gk, sl.batch, sl.head), r.ref64.dk,
                                r.lowp.dk, detail::dtype_unit_roundoff(c)}));
      judgement.add("dV", where,
                    ref::judge({"dV", c.seqlen_k, c.hdim_v,
                                detail::slice_rows(values[2], gv, sl.batch, sl.head), r.ref64.dv,
                                r.lowp.dv, detail::dtype_unit_roundoff(c)}));
    }
    for (int t = 0; t < 3; ++t) {
      // Every slice, judged or not: exact gradients are finite; the padding untouched.
      if (const auto n = detail::nonfinite_elements(values[t], geoms[t])) {
        judgement.fail(names[t], std::to_string(n) + " elements of " + names[t] +
                                     " are NaN or infinite" + in_run);
      }
      if (const auto n = detail::padding_written(bits[t], geoms[t])) {
        judgement.fail("padding", std::to_string(n) + " padding elements of " + names[t] +
                                      " were written" + in_run);
      }
      if (run == 0) continue;
      repro.max_diff[t] = std::max(repro.max_diff[t], max_abs_diff(first[t], values[t]));
      if (bits[t] != first_bits[t]) {
        repro.bit_exact = false;
        if (deterministic) {
          judgement.fail("run-to-run", std::string("deterministic mode: ") + names[t] + " of run " +
                                           std::to_string(run) + " differs from run 0's bytes");
        }
      }
    }
    if (run == 0) {
      for (int t = 0; t < 3; ++t) {
        first_bits[t] = std::move(bits[t]);
        first[t] = std::move(values[t]);
      }
    }
  }
  repro.check = judgement.result(
      "backward " + describe(c) + ", impl " + std::string(to_string(impl)) +
      (deterministic ? ", deterministic" : "") + ", " + std::to_string(runs) + " runs, " +
      std::to_string(slices.size()) + " of " + std::to_string(c.batch * c.nhead_k) + " kv slices");
  return repro;
}

BackwardRepro check_backward(const AttentionCase& c, KernelImpl impl, bool deterministic,
                             std::uint32_t seed, int runs) {
  const BackwardRepro r = verify_backward(c, impl, deterministic, seed, runs);
  detail::print_report(r.check);
  INFO(r.check.report);
  INFO("max |ddQ| " << r.max_diff[0] << " |ddK| " << r.max_diff[1] << " |ddV| " << r.max_diff[2]
                    << " over " << runs << " runs");
  CHECK(r.check.pass);
  return r;
}

}  // namespace fmha_jit::test
