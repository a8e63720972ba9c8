// Warp specialisation on sm_90a: register reallocation between warpgroups (setmaxnreg) and the
// named barriers the roles synchronise on. A warpgroup is 4 consecutive warps (128 threads)
// starting at a warp index divisible by 4.
#pragma once

#include "common/platform.h"

// The warpgroup index, broadcast from lane 0: the compiler then knows it is the same across the
// warp and keeps what derives from it (the wgmma descriptors, shared-memory bases) in uniform
// registers instead of 2 x 32 ordinary ones per descriptor.
FMHA_DEVICE int fmha_warpgroup_idx() {
  return __shfl_sync(0xffffffffu, fmha_thread_idx() / 128, 0);
}

// Lowers (producer) or raises (consumers) the per-thread register limit of the calling
// warpgroup; every thread of the warpgroup executes it. A producer that only issues bulk copies
// needs few registers, and what it gives back lets the consumers hold their accumulators.
template <int kRegs>
FMHA_DEVICE void fmha_setmaxnreg_dec() {
  static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256, "setmaxnreg takes 24..256 by 8");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

template <int kRegs>
FMHA_DEVICE void fmha_setmaxnreg_inc() {
  static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256, "setmaxnreg takes 24..256 by 8");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

// Named barrier `id` (1..15; 0 is __syncthreads) over `threads` threads, a multiple of 32: sync
// waits for all of them, arrive counts this warp in and goes on.
FMHA_DEVICE void fmha_named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// The same barrier for warps that reach it through different instructions, such as two
// instantiations of a role templated on its warpgroup: bar.sync is barrier.sync.aligned, which
// requires every warp of one barrier generation to execute the same instruction
// (compute-sanitizer's synccheck reports "Divergent thread(s) in block" otherwise).
FMHA_DEVICE void fmha_named_barrier_sync_unaligned(int id, int threads) {
  asm volatile("barrier.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

FMHA_DEVICE void fmha_named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
