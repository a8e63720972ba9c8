// What the harness's source files share (attention_harness.cpp: cases, tensors and runs;
// attention_harness_checks.cpp: slices, judging, the forward's check;
// attention_harness_bwd.cpp: the backward's check). Not for the test files.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fmha_jit/dispatcher.hpp"
#include "gpu/attention_harness.hpp"
#include "reference/accuracy_rule.hpp"
#include "reference/cpu_reference.hpp"

namespace fmha_jit::test::detail {

namespace ref = fmha_jit::reference;

// The case's runner for `impl`, with the case's tile override unless impl is reference; REQUIREs
// that setup succeeds.
std::shared_ptr<FmhaRunner> setup(Family family, const AttentionCase& c, KernelImpl impl,
                                  bool deterministic = false);

ref::AttentionShape shape_of(const AttentionCase& c);
ref::Strides ref_strides(const TensorStrides& s);
inline ref::TensorView view_of(const DeviceTensor& t, const TensorGeometry& g) {
  return {t.host.data(), ref_strides(g.strides)};
}

struct Slice {
  int batch = 0;
  int head = 0;
};
// Every (batch, head) of `heads` per batch when judging them all costs at most a few seconds of
// CPU (macs_per_slice multiply-adds each), else `samples` of them: the last batch's last head and
// others drawn with the seed.
std::vector<Slice> slices_to_check(int batch, int heads, double macs_per_slice, std::uint32_t seed,
                                   int samples);

// Rows [0, g.seqlen) of head (b, h) of a storage-order tensor, row-major.
std::vector<float> slice_rows(const std::vector<float>& storage, const TensorGeometry& g, int b,
                              int h);

// Elements of a storage-order output that are NaN or infinite (every exact value is finite).
std::int64_t nonfinite_elements(const std::vector<float>& storage, const TensorGeometry& g);
// Storage positions between elements (padding) that do not hold 0xFFFF any more.
std::int64_t padding_written(const std::vector<std::uint16_t>& bits, const TensorGeometry& g);

// Collects the verdicts of one check into a CheckResult.
class Judgement {
 public:
  // One judged output; `output` is its kind ("O", "dK", ...), `where` the slice and run.
  void add(const std::string& output, const std::string& where, const ref::OutputVerdict& v);
  // A failure found outside the rule (non-finite values outside the judged slices, padding
  // written, runs that differ).
  void fail(const std::string& output, const std::string& line);
  // The result, its report ending with `summary` and the worst margins seen.
  CheckResult result(const std::string& summary) const;

 private:
  CheckResult result_;
  int judged_ = 0;
  int lines_ = 0;
  // The largest error / bound ratios of the slice, row and L2 checks over passing outputs.
  double worst_slice_ = 0, worst_row_ = 0, worst_l2_ = 0;
};

// Prints the report when FMHA_JIT_TEST_RULE_REPORT=1 (attention_harness.hpp).
void print_report(const CheckResult& r);

// The unit roundoff of an output stored in the case's dtype.
inline double dtype_unit_roundoff(const AttentionCase& c) {
  return ref::unit_roundoff(c.dtype == DType::bf16);
}

}  // namespace fmha_jit::test::detail
