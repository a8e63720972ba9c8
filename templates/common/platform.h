// Portability layer for device templates compiled by NVRTC / nvcc and by hipRTC / hip-clang.
//
// Runtime compilers are invoked with no include path, so nothing here may include a toolkit or
// standard header: only compiler built-ins and the intrinsics both RTCs declare implicitly are
// used.
#pragma once

#if defined(__HIPCC_RTC__) || defined(__HIPCC__) || defined(__HIP__)
#define FMHA_PLATFORM_HIP 1
#elif defined(__CUDACC_RTC__) || defined(__CUDACC__)
#define FMHA_PLATFORM_CUDA 1
#else
#error "common/platform.h is device code: compile it with NVRTC, nvcc, hipRTC or hip-clang"
#endif

#define FMHA_DEVICE __device__ __forceinline__
#define FMHA_GLOBAL extern "C" __global__
#define FMHA_LAUNCH_BOUNDS(threads) __launch_bounds__(threads)
#define FMHA_SHARED __shared__

// The warp size must be a compile-time constant because per-lane register arrays are sized by it.
// hip-clang's host pass does not define __AMDGCN_WAVEFRONT_SIZE; it never generates device code, so
// its fallback value only has to be self-consistent.
#if defined(FMHA_PLATFORM_HIP)
#if defined(__AMDGCN_WAVEFRONT_SIZE)
#define FMHA_WARP_SIZE __AMDGCN_WAVEFRONT_SIZE
#else
#define FMHA_WARP_SIZE 64
#endif
#else
#define FMHA_WARP_SIZE 32
#endif

#define FMHA_LOG2E 1.4426950408889634f
#define FMHA_LN2 0.6931471805599453f

// Kernels are launched with 1-D blocks and a 3-D grid.
FMHA_DEVICE int fmha_thread_idx() { return static_cast<int>(threadIdx.x); }
FMHA_DEVICE int fmha_block_idx_x() { return static_cast<int>(blockIdx.x); }
FMHA_DEVICE int fmha_block_idx_y() { return static_cast<int>(blockIdx.y); }
FMHA_DEVICE int fmha_block_idx_z() { return static_cast<int>(blockIdx.z); }
FMHA_DEVICE int fmha_lane_id() { return fmha_thread_idx() % FMHA_WARP_SIZE; }
FMHA_DEVICE int fmha_warp_id() { return fmha_thread_idx() / FMHA_WARP_SIZE; }
FMHA_DEVICE void fmha_sync_threads() { __syncthreads(); }

FMHA_DEVICE unsigned fmha_float_as_uint(float x) {
#if defined(FMHA_PLATFORM_HIP)
  return __builtin_bit_cast(unsigned, x);
#else
  return __float_as_uint(x);
#endif
}

FMHA_DEVICE float fmha_uint_as_float(unsigned x) {
#if defined(FMHA_PLATFORM_HIP)
  return __builtin_bit_cast(float, x);
#else
  return __uint_as_float(x);
#endif
}

// No <cmath> INFINITY under the RTCs; the bit pattern is exact on every target.
FMHA_DEVICE float fmha_neg_inf() { return fmha_uint_as_float(0xff800000u); }

// exp2f maps to the hardware exp2 (ex2.approx on NVIDIA, v_exp_f32 on AMD) with denormal handling;
// accurate to a couple of ulp, which is what every FMHA kernel family relies on.
FMHA_DEVICE float fmha_exp2(float x) { return exp2f(x); }
// Evaluated once per row, so the accurate library log2 is affordable.
FMHA_DEVICE float fmha_log2(float x) { return log2f(x); }
// fmaxf ignores a NaN operand; a NaN score still reaches the output through exp2(NaN).
FMHA_DEVICE float fmha_max(float a, float b) { return fmaxf(a, b); }

FMHA_DEVICE float fmha_shfl_xor(float v, int lane_mask) {
#if defined(FMHA_PLATFORM_HIP)
  return __shfl_xor(v, lane_mask, FMHA_WARP_SIZE);
#else
  return __shfl_xor_sync(0xffffffffu, v, lane_mask, FMHA_WARP_SIZE);
#endif
}

// Butterfly all-reduce of kN independent values (interleaved for instruction-level parallelism).
// Every lane ends with the bitwise same result because IEEE addition is commutative, so values
// derived from it stay warp-uniform. Must be reached by all lanes of the warp.
template <int kN>
FMHA_DEVICE void fmha_warp_sum(float (&v)[kN]) {
#pragma unroll
  for (int offset = FMHA_WARP_SIZE / 2; offset > 0; offset /= 2) {
#pragma unroll
    for (int n = 0; n < kN; ++n) v[n] += fmha_shfl_xor(v[n], offset);
  }
}

FMHA_DEVICE float fmha_warp_sum(float v) {
  float a[1] = {v};
  fmha_warp_sum<1>(a);
  return a[0];
}

// Deterministic block sum: warps reduce, then every thread adds the warp partials in warp order.
// smem holds kThreads / FMHA_WARP_SIZE floats. Contains barriers: call from uniform control flow.
template <int kThreads>
FMHA_DEVICE float fmha_block_sum(float v, float* smem) {
  constexpr int kWarps = kThreads / FMHA_WARP_SIZE;
  static_assert(kThreads % FMHA_WARP_SIZE == 0, "block must be a whole number of warps");
  v = fmha_warp_sum(v);
  if (fmha_lane_id() == 0) smem[fmha_warp_id()] = v;
  fmha_sync_threads();
  float total = 0.f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) total += smem[w];
  fmha_sync_threads();  // smem may be reused by the caller right away
  return total;
}
