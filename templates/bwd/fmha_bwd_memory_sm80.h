// Memory primitives of the sm_80+ backward kernels that the forward does not need: 4-byte
// cp.async for the per-row statistics, 64-bit shared loads, 128-bit read-only global loads, the
// fp32 reductions into the dQ workspace and the semaphores of the deterministic mode.
//
// Kept apart from the kernels so that each is one obviously-correct instruction (and so that the
// host-side emulator used to test the kernels can substitute this one file). NVIDIA only (inline
// PTX, sm_80 and newer); NVRTC-safe: no toolkit headers.
#pragma once

#include "common/copy_sm80.h"
#include "common/platform.h"

// LSE and D rows start at arbitrary float offsets (seqlen_q need not be a multiple of 4), so they
// are staged 4 bytes at a time; .ca is the only cp.async flavour that accepts 4-byte copies. A
// source size of 0 zero-fills the destination without touching global memory.
FMHA_DEVICE void fmha_cp_async_4(unsigned smem_dst, const void* gmem_src, bool valid) {
  const int src_bytes = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_dst), "l"(gmem_src),
               "r"(src_bytes)
               : "memory");
}

struct FmhaF32x2 {
  float x, y;
};

FMHA_DEVICE FmhaF32x2 fmha_ld_shared_f32x2(unsigned smem) {
  FmhaF32x2 v;
  asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n" : "=f"(v.x), "=f"(v.y) : "r"(smem) : "memory");
  return v;
}

// Read-only path: only for data no thread writes during the kernel (O, dO, the finished dQ sums).
FMHA_DEVICE FmhaU32x4 fmha_ld_global_nc_128(const void* gmem) {
  FmhaU32x4 v;
  asm volatile("ld.global.nc.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(gmem));
  return v;
}

FMHA_DEVICE void fmha_st_global_f32x4(void* gmem, float x, float y, float z, float w) {
  asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(gmem), "f"(x), "f"(y), "f"(z),
               "f"(w)
               : "memory");
}

// The dQ accumulation: a thread issues dozens of additions per tile at constant offsets from one
// row pointer. Before sm_90 they are the compiler's atomicAdd, so that the offsets fold into the
// instructions (as inline asm operands in an earlier layout, each address took its own 64-bit
// register pair, 64 extra registers at hdim 192); on sm_90 inline PTX, see below, which the
// current phase-C address scheme keeps at 0 spills in every variant (rtc test).

// gmem[0] += x, gmem[1] += y, results unused; gmem must be 8-byte aligned. sm_90 has a vector
// reduction, halving the requests. Written as PTX `red` there: the compiler's float2 atomicAdd
// becomes `atom` with result registers in PTX, which ptxas turned into a fire-and-forget RED in
// the atomic mode but kept as ATOMG in the deterministic one (H200, ncu: 33.6 M ATOMG), each
// holding its result registers for an L2 round trip.
FMHA_DEVICE void fmha_red_add_f32x2(float* gmem, float x, float y) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("red.relaxed.gpu.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(gmem), "f"(x), "f"(y)
               : "memory");
#else
  atomicAdd(gmem, x);
  atomicAdd(gmem + 1, y);
#endif
}

// Semaphores of the deterministic mode. The waiter spins with acquire loads so that everything the
// releasing CTAs wrote before their release is visible once the count is seen. Called by one
// thread; the caller's following barrier extends the ordering to the whole CTA.
FMHA_DEVICE int fmha_semaphore_poll(const int* sem) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(sem) : "memory");
  return v;
}

// A strong relaxed load: it does not wait for its value (an acquire load's L1 invalidation does),
// so a reader can issue it ahead and go on. Its value orders nothing until a gpu-scope acq_rel
// fence follows it in program order (the PTX memory model's acquire pattern), e.g. the one in
// fmha_semaphore_release_add.
FMHA_DEVICE int fmha_semaphore_peek(const int* sem) {
  int v;
  asm volatile("ld.relaxed.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(sem) : "memory");
  return v;
}

FMHA_DEVICE void fmha_semaphore_wait_eq(const int* sem, int count) {
  while (fmha_semaphore_poll(sem) != count) {
  }
}

// Called by one thread after a CTA barrier that follows every thread's additions: the barrier
// orders the other threads' writes before this thread's, and the gpu-scope acq_rel fence makes
// all of them visible before the count (CUTLASS's generic barrier uses the same pattern), so the
// other threads need no gpu-scope fence of their own.
FMHA_DEVICE void fmha_semaphore_release_add(int* sem, int amount) {
  asm volatile(
      "fence.acq_rel.gpu;\n"
      "red.relaxed.gpu.global.add.s32 [%0], %1;\n" ::"l"(sem),
      "r"(amount)
      : "memory");
}

FMHA_DEVICE void fmha_semaphore_release_inc(int* sem) { fmha_semaphore_release_add(sem, 1); }

// Returns x through an empty asm statement the optimizer cannot see through. Fragment addresses
// are derived from a few per-warp bases by XOR-ing and adding constants; when a base is loop
// invariant the compiler hoists every derived address out of the query-tile loop, one register
// each, which pushes the largest tiles into spills. Laundering the bases once per iteration keeps
// the derivations inside the loop, where they fold into the instructions' immediates.
FMHA_DEVICE unsigned fmha_opaque(unsigned x) {
  asm volatile("" : "+r"(x));
  return x;
}
