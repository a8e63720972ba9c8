// Lets a host test compile the index arithmetic of the device templates (templates/) and run it:
// the CUDA keywords become plain C++, blockIdx / threadIdx become variables the test sets, and
// the intrinsics common/platform.h names get host stand-ins. Only headers without inline PTX can
// be included (host compilers reject PTX constraints). Include it after every standard and
// library header (it defines __CUDACC__, which some of them test) and before the templates, in
// one translation unit.
#pragma once

#include <algorithm>
#include <cmath>

#define __CUDACC__ 1
#define __host__
#define __device__
#define __global__
#define __shared__
#define __forceinline__ inline
#define __launch_bounds__(...)

namespace fmha_jit::test {
struct HostDim3 {
  unsigned x = 0, y = 0, z = 0;
};
}  // namespace fmha_jit::test

// The "current" CTA and thread of the device functions, and the launch's grid; the test sets
// them before each call.
inline fmha_jit::test::HostDim3 blockIdx, threadIdx, gridDim;

using std::max;
using std::min;

inline void __syncthreads() {}
inline unsigned __float_as_uint(float x) {
  unsigned u;
  __builtin_memcpy(&u, &x, sizeof u);
  return u;
}
inline float __uint_as_float(unsigned u) {
  float x;
  __builtin_memcpy(&x, &u, sizeof x);
  return x;
}
template <class T>
T __shfl_xor_sync(unsigned, T v, int, int) {
  return v;
}
