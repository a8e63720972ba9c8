// The accuracy rule of the GPU tests, after FlashAttention's: a kernel's output is judged against
// the exact result of its rounded inputs (ref64) in units of the error that a careful kernel of
// the same precision makes (lowp, slice_reference.hpp). For each output of a slice, element-wise:
//
//   slice  max |ours - ref64| <= 2 max |lowp - ref64| + floor
//   rows   for each row r:  max_d |ours - ref64|_r <= 2 max_d |lowp - ref64|_r
//                                                     + u max_d |ref64|_r + floor
//   L2     ||ours - ref64|| <= 2 ||lowp - ref64|| + floor sqrt(n)
//
// A row is a query row (O, LSE, dQ) or a key (dK, dV): the slice's maximum cannot hide a row that
// is wrong, e.g. keys whose gradients are small next to the first keys' of a causal problem. NaN or
// infinity in `ours` where ref64 is finite fails, always, and so does anything but the same
// infinity where ref64 is infinite (the LSE of a row that sees no key is -inf). u is the unit
// roundoff of the precision `ours` is stored in; floor and the constants are derived in
// accuracy_rule.cpp.
//
// judge() returns a verdict with a report rather than asserting, so a test can also require that a
// broken output fails.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace fmha_jit::reference {

// Unit roundoff u of a precision: |round(x) - x| <= u |x| for x in its normal range.
inline constexpr double kUnitRoundoffBf16 = 0x1p-8;
inline constexpr double kUnitRoundoffFp16 = 0x1p-11;
inline constexpr double kUnitRoundoffFp32 = 0x1p-24;
inline constexpr double unit_roundoff(bool bf16) {
  return bf16 ? kUnitRoundoffBf16 : kUnitRoundoffFp16;
}

// One output of a slice: `rows` rows of `cols` values, row-major, in all three spans.
struct RuleInput {
  std::string name;  // for the report: "O", "LSE", "dQ head 3", ...
  int rows = 0;
  int cols = 0;
  std::span<const float> ours;  // the kernel's output, widened to float
  std::span<const double> ref64;
  std::span<const double> lowp;
  double unit_roundoff = kUnitRoundoffBf16;  // of the precision `ours` is stored in
};

struct OutputVerdict {
  std::string name;
  bool pass = false;
  std::int64_t elements = 0;
  // Elements where ours is NaN or infinite and ref64 is finite, or ref64 is infinite and ours is
  // not the same infinity.
  std::int64_t nonfinite = 0;
  // The same for lowp: its error is no yardstick there, so the output cannot pass.
  std::int64_t lowp_nonfinite = 0;

  double max_ref = 0;  // max |ref64| over finite elements
  double floor = 0;    // the absolute allowance of every check
  double max_err = 0;  // max |ours - ref64|
  double lowp_max_err = 0;
  double slice_bound = 0;  // what max_err may reach
  bool slice_ok = false;

  std::int64_t rows_failed = 0;
  // The row whose error is the largest multiple of its bound (-1 when no row has an error).
  int worst_row = -1;
  double worst_row_err = 0, worst_row_lowp_err = 0, worst_row_max_ref = 0, worst_row_bound = 0;
  bool rows_ok = false;

  double rel_l2 = 0;  // ||ours - ref64|| / ||ref64|| (||ours - ref64|| when ref64 is all 0)
  double lowp_rel_l2 = 0;
  double l2_err = 0, l2_bound = 0;  // ||ours - ref64|| and what it may reach
  bool l2_ok = false;

  // One line; failing outputs add the worst row.
  std::string report() const;
};

// Throws std::invalid_argument when the spans do not hold rows x cols values.
OutputVerdict judge(const RuleInput& in);

// The outputs of one check (a slice's O and LSE, or its dQ, dK and dV; one run of a kernel).
struct Verdict {
  std::vector<OutputVerdict> outputs;

  bool pass() const;
  // One line per output.
  std::string report() const;
};

}  // namespace fmha_jit::reference
