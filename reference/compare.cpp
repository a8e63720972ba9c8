// The global comparison (max |got - ref| / max |ref| against a per-quantity tolerance) that the
// CLI's `run --verify` and example 37 report. The GPU tests use the stricter per-slice rule of
// accuracy_rule.hpp instead.
#include <algorithm>
#include <cmath>
#include <limits>

#include "cpu_reference.hpp"

namespace fmha_jit::reference {

bool ErrorStats::ok(double tol) const {
  if (nan_count != 0 || nonfinite_mismatch != 0) return false;
  // A reference that is identically zero has no scale to be relative to; it arises where the exact
  // gradient vanishes (one visible key: dS = P (dP - D) = 0) and the kernel returns rounding noise
  // of O(u * |dO| |V|) on O(1) inputs. Accept noise three orders below the relative tolerance.
  if (max_abs_ref == 0) return max_abs <= tol * 1e-3;
  return max_rel <= tol;
}

ErrorStats compare(const float* got, const float* ref, size_t n) {
  ErrorStats st;
  st.count = static_cast<int64_t>(n);
  double diff2 = 0, ref2 = 0;
  for (size_t i = 0; i < n; ++i) {
    const double g = got[i], r = ref[i];
    if (!std::isfinite(g) || !std::isfinite(r)) {
      if (std::isnan(g) && std::isnan(r)) continue;
      if (g == r) continue;  // the same infinity
      if (std::isnan(g)) {
        ++st.nan_count;
      } else {
        ++st.nonfinite_mismatch;
      }
      continue;
    }
    const double diff = std::fabs(g - r);
    st.max_abs = std::max(st.max_abs, diff);
    st.max_abs_ref = std::max(st.max_abs_ref, std::fabs(r));
    diff2 += diff * diff;
    ref2 += r * r;
  }
  const double inf = std::numeric_limits<double>::infinity();
  st.max_rel = st.max_abs == 0 ? 0.0 : (st.max_abs_ref == 0 ? inf : st.max_abs / st.max_abs_ref);
  st.rel_l2 = diff2 == 0 ? 0.0 : (ref2 == 0 ? inf : std::sqrt(diff2) / std::sqrt(ref2));
  return st;
}

// Tolerances, as bounds on max |got - ref| / max |ref|. Let u be the unit roundoff of the dtype:
// fp16 keeps 10 explicit mantissa bits, u = 2^-11 ~ 4.9e-4; bf16 keeps 7, u = 2^-8 ~ 3.9e-3.
// The reference is fed the same rounded inputs, so only the kernel's own roundings count:
//  - forward_output: O is rounded to the dtype on store (<= u |O|) and P is rounded to the dtype
//    before the P V product (error <= u * sum_j p_j |v_j| <= u max|V|); fp32 accumulation adds
//    ~1e-6. Two roundings plus headroom: 4u (fp16 2.0e-3, bf16 1.6e-2).
//  - lse: computed in fp32 from exact products of dtype values, independent of the dtype apart
//    from the rounding of the score accumulation and exp2/log2 approximations: 1e-4 both.
//  - gradient: P, dS and dO are rounded (each ~u), and dK/dV reduce over Sq and the GQA group,
//    dQ over Sk, in fp32 with atomics in some families: 16u (fp16 7.8e-3, bf16 6.3e-2). Measure
//    before tightening; rel_l2 is usually 5-10x below max_rel and is a useful second check.
double dtype_tolerance(bool bf16, Quantity quantity) {
  const double u = bf16 ? 0x1p-8 : 0x1p-11;
  switch (quantity) {
    case Quantity::forward_output: return 4 * u;
    case Quantity::lse: return 1e-4;
    case Quantity::gradient: return 16 * u;
  }
  return 16 * u;
}

}  // namespace fmha_jit::reference
