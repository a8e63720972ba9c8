#include "reference/cpu_reference.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <exception>
#include <functional>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>

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

template <typename T>
const T* at(const BasicTensorView<T>& t, int b, int h, int s) {
  return t.data + b * t.strides.batch + h * t.strides.head + s * t.strides.row;
}

template <typename T>
T* at(const BasicMutableTensorView<T>& t, int b, int h, int s) {
  return t.data + b * t.strides.batch + h * t.strides.head + s * t.strides.row;
}

// Rows [0, rows) of head (b, h), widened to fp64 and packed contiguously (rows x cols).
template <typename T>
void load_head(const BasicTensorView<T>& t, int b, int h, int rows, int cols,
               std::vector<double>& dst) {
  dst.resize(static_cast<size_t>(rows) * static_cast<size_t>(cols));
  for (int r = 0; r < rows; ++r) {
    const T* src = at(t, b, h, r);
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

// Runs fn(task) for every task in [0, n). Tasks write disjoint outputs in a fixed order, so the
// results do not depend on the number of threads; small problems stay on the calling thread. The
// first exception thrown by a task is rethrown here.
void parallel_for(int n, double flops, const std::function<void(int)>& fn) {
  const unsigned hw = std::thread::hardware_concurrency();
  const double by_work = flops / 4e6;  // below ~4 MFLOP a thread costs more than it saves
  const int nthreads =
      static_cast<int>(std::min<double>({hw == 0 ? 1.0 : double(hw), by_work, double(n), 64.0}));
  if (nthreads <= 1) {
    for (int i = 0; i < n; ++i) fn(i);
    return;
  }
  std::atomic<int> next{0};
  std::mutex error_mutex;
  std::exception_ptr error;
  auto worker = [&] {
    for (int i = next.fetch_add(1); i < n; i = next.fetch_add(1)) {
      try {
        fn(i);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        next.store(n);
        return;
      }
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(nthreads - 1));
  try {
    for (int t = 1; t < nthreads; ++t) threads.emplace_back(worker);
  } catch (const std::system_error&) {
    // Could not start a thread: the ones started and this one share the work.
  }
  worker();
  for (std::thread& t : threads) t.join();
  if (error) std::rethrow_exception(error);
}

// Scaled scores of query row q against keys [lo, hi) of a packed K head, into scores[0, hi - lo).
// Returns their log-sum-exp.
double row_scores(const AttentionShape& s, const double* q, const std::vector<double>& khead,
                  FmhaKeyRange r, std::vector<double>& scores) {
  scores.resize(static_cast<size_t>(r.hi - r.lo));
  double m = kNegInf;
  for (int j = r.lo; j < r.hi; ++j) {
    const double x = s.scale * dot(q, khead.data() + static_cast<size_t>(j) * s.hdim_q, s.hdim_q);
    scores[j - r.lo] = x;
    m = std::max(m, x);
  }
  if (std::isinf(m)) return m;  // only with infinite inputs; keeps exp(x - m) away from inf - inf
  double sum = 0;
  for (double x : scores) sum += std::exp(x - m);
  return m + std::log(sum);
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
    std::vector<double> khead, vhead, qrow, scores, acc;
    load_head(k, b, hk, s.seqlen_k, s.hdim_q, khead);
    load_head(v, b, hk, s.seqlen_k, s.hdim_v, vhead);
    for (int i = 0; i < s.seqlen_q; ++i) {
      const FmhaKeyRange r =
          fmha_visible_keys(s.mask_kind, i, s.seqlen_q, s.seqlen_k, s.window_left, s.window_right);
      T* orow = at(o, b, h, i);
      double row_lse = kNegInf;
      if (r.lo >= r.hi) {
        std::fill(orow, orow + s.hdim_v, T(0));
      } else {
        load_row(at(q, b, h, i), s.hdim_q, qrow);
        row_lse = row_scores(s, qrow.data(), khead, r, scores);
        acc.assign(static_cast<size_t>(s.hdim_v), 0.0);
        for (int j = r.lo; j < r.hi; ++j) {
          const double p = std::exp(scores[j - r.lo] - row_lse);
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
                   BasicMutableTensorView<T> dv) {
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
  // One task per (batch, kv head): it owns dK and dV of that head and dQ of its query heads.
  parallel_for(s.batch * s.nhead_k, 2.5 * work(s), [&](int task) {
    const int b = task / s.nhead_k, hk = task % s.nhead_k;
    std::vector<double> khead, vhead, qrow, dorow, scores, dqrow;
    load_head(k, b, hk, s.seqlen_k, s.hdim_q, khead);
    load_head(v, b, hk, s.seqlen_k, s.hdim_v, vhead);
    // fp64 accumulators of dK and dV, summed over the query heads of the group.
    std::vector<double> dk_acc(static_cast<size_t>(s.seqlen_k) * dqk, 0.0);
    std::vector<double> dv_acc(static_cast<size_t>(s.seqlen_k) * dvo, 0.0);
    for (int h = hk * group; h < (hk + 1) * group; ++h) {
      for (int i = 0; i < s.seqlen_q; ++i) {
        const FmhaKeyRange r = fmha_visible_keys(s.mask_kind, i, s.seqlen_q, s.seqlen_k,
                                                 s.window_left, s.window_right);
        T* dqout = at(dq, b, h, i);
        if (r.lo >= r.hi) {
          std::fill(dqout, dqout + s.hdim_q, T(0));
          continue;
        }
        load_row(at(q, b, h, i), s.hdim_q, qrow);
        load_row(at(d_o, b, h, i), s.hdim_v, dorow);
        double row_lse = row_scores(s, qrow.data(), khead, r, scores);
        if (lse != nullptr) {
          row_lse =
              static_cast<double>(lse[(static_cast<int64_t>(b) * s.nhead_q + h) * s.seqlen_q + i]);
        }
        const double d_i = dot(dorow.data(), at(o, b, h, i), s.hdim_v);
        dqrow.assign(dqk, 0.0);
        for (int j = r.lo; j < r.hi; ++j) {
          const double p = std::exp(scores[j - r.lo] - row_lse);
          const double* krow = khead.data() + static_cast<size_t>(j) * dqk;
          const double* vrow = vhead.data() + static_cast<size_t>(j) * dvo;
          const double ds_scaled = s.scale * p * (dot(dorow.data(), vrow, s.hdim_v) - d_i);
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
      T* dkout = at(dk, b, hk, j);
      T* dvout = at(dv, b, hk, j);
      const double* dkj = dk_acc.data() + static_cast<size_t>(j) * dqk;
      const double* dvj = dv_acc.data() + static_cast<size_t>(j) * dvo;
      for (int d = 0; d < s.hdim_q; ++d) dkout[d] = static_cast<T>(dkj[d]);
      for (int d = 0; d < s.hdim_v; ++d) dvout[d] = static_cast<T>(dvj[d]);
    }
  });
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Shapes and layouts

Strides dense_strides(Layout layout, int nhead, int seqlen, int hdim) {
  const int64_t h = nhead, s = seqlen, d = hdim;
  if (layout == Layout::bhsd) return Strides{h * s * d, s * d, d};
  return Strides{s * h * d, d, h * d};
}

size_t dense_size(int batch, int nhead, int seqlen, int hdim) {
  return static_cast<size_t>(batch) * static_cast<size_t>(nhead) * static_cast<size_t>(seqlen) *
         static_cast<size_t>(hdim);
}

void validate(const AttentionShape& s) {
  auto positive = [](int value, const char* name) {
    if (value <= 0) {
      throw std::invalid_argument(std::string("attention reference: ") + name +
                                  " must be positive, got " + std::to_string(value));
    }
  };
  positive(s.batch, "batch");
  positive(s.nhead_q, "nhead_q");
  positive(s.nhead_k, "nhead_k");
  positive(s.seqlen_q, "seqlen_q");
  positive(s.seqlen_k, "seqlen_k");
  positive(s.hdim_q, "hdim_q");
  positive(s.hdim_v, "hdim_v");
  if (s.nhead_q % s.nhead_k != 0) {
    throw std::invalid_argument("attention reference: nhead_q (" + std::to_string(s.nhead_q) +
                                ") is not a multiple of nhead_k (" + std::to_string(s.nhead_k) +
                                ")");
  }
  if (s.mask_kind < FMHA_MASK_NONE || s.mask_kind > FMHA_MASK_SLIDING_WINDOW) {
    throw std::invalid_argument("attention reference: unknown mask_kind " +
                                std::to_string(s.mask_kind));
  }
}

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
                        MutableTensorView dk, MutableTensorView dv) {
  backward_impl(shape, q, k, v, o, d_o, lse, dq, dk, dv);
}

void attention_backward(const AttentionShape& shape, TensorViewF64 q, TensorViewF64 k,
                        TensorViewF64 v, TensorViewF64 o, TensorViewF64 d_o, const double* lse,
                        MutableTensorViewF64 dq, MutableTensorViewF64 dk, MutableTensorViewF64 dv) {
  backward_impl(shape, q, k, v, o, d_o, lse, dq, dk, dv);
}

// ---------------------------------------------------------------------------------------------
// Rounding

uint16_t float_to_half_bits(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t a = bits & 0x7fffffffu;
  if (a >= 0x7f800000u) {  // inf stays inf; NaN keeps its top payload bits and is made quiet
    return static_cast<uint16_t>(sign | 0x7c00u |
                                 (a > 0x7f800000u ? 0x200u | ((a >> 13) & 0x3ffu) : 0u));
  }
  // 65520 = 0x477ff000 lies halfway between 65504 (odd mantissa 0x3ff) and 2^16: ties to even
  // round up, so it and everything above becomes inf.
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (a < 0x38800000u) {
    // Below 2^-14: fp16 subnormal (or zero), value = round(|x| * 2^24) units of 2^-24. |x| is
    // m * 2^(e - 150) with the implicit bit in m, so the unit count is m >> (126 - e).
    const uint32_t e = a >> 23;
    const uint32_t shift = 126u - e;                      // >= 14 here
    if (shift > 24u) return static_cast<uint16_t>(sign);  // below 2^-25 (or exactly a tie to 0)
    const uint32_t m = (a & 0x7fffffu) | 0x800000u;
    uint32_t h = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (h & 1u))) ++h;  // may carry into the smallest normal
    return static_cast<uint16_t>(sign | h);
  }
  // Normal: rebias the exponent (127 -> 15) and drop 13 mantissa bits with round to nearest even;
  // a carry out of the mantissa correctly bumps the exponent.
  uint32_t h = (a - 0x38000000u) >> 13;
  const uint32_t rem = a & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1fu) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {
    // Subnormal: normalise. value = mant * 2^-24; shift the leading one up to bit 10.
    int e = -14;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --e;
    }
    bits = sign | (static_cast<uint32_t>(e + 127) << 23) | ((mant & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

uint16_t float_to_bf16_bits(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {  // NaN: truncate and force quiet (never becomes inf)
    return static_cast<uint16_t>((bits >> 16) | 0x40u);
  }
  // Round to nearest even on the low 16 bits; overflow past the largest finite bf16 carries into
  // the exponent and yields inf, as IEEE rounding requires.
  const uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

float bf16_bits_to_float(uint16_t h) {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

float round_to_dtype(float x, bool bf16) {
  return bf16 ? bf16_bits_to_float(float_to_bf16_bits(x))
              : half_bits_to_float(float_to_half_bits(x));
}

void round_to_dtype(float* data, size_t n, bool bf16) {
  for (size_t i = 0; i < n; ++i) data[i] = round_to_dtype(data[i], bf16);
}

void round_to_dtype(std::vector<float>& data, bool bf16) {
  round_to_dtype(data.data(), data.size(), bf16);
}

// ---------------------------------------------------------------------------------------------
// Comparison

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
