// Shared-memory transaction barriers (mbarrier, sm_90) for the Hopper kernels: a producer arms a
// barrier with the number of bytes its bulk copies will deliver, the copy engine counts them
// down, and consumers wait on the barrier's phase parity. One barrier per pipeline stage and
// direction (full: data landed; empty: consumers are done with the slot).
#pragma once

#include "common/platform.h"

// Initialises the 8-byte barrier at shared address `bar` for `arrivals` arriving threads. Call
// from one thread, then make it visible with fmha_mbarrier_init_fence() and a CTA barrier before
// any thread or copy uses it.
FMHA_DEVICE void fmha_mbarrier_init(unsigned bar, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals) : "memory");
}

// Orders the initialisations above before later uses by the async proxy (the copy engine), which
// does not observe ordinary shared-memory stores otherwise. A CTA is a cluster of one here.
FMHA_DEVICE void fmha_mbarrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// One arrival that also raises the barrier's expected transaction count by `bytes`: the producer
// calls it once per stage before issuing the copies that complete on this barrier.
FMHA_DEVICE void fmha_mbarrier_arrive_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}

// A plain arrival (consumers releasing a slot).
FMHA_DEVICE void fmha_mbarrier_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

// True once the phase with parity `parity` has completed. try_wait may suspend the thread for a
// system-dependent time before returning false, so a loop around it does not spin hot.
FMHA_DEVICE bool fmha_mbarrier_try_wait(unsigned bar, unsigned parity) {
  unsigned done;
  asm volatile(
      "{\n"
      "  .reg .pred p;\n"
      "  mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "  selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}

FMHA_DEVICE void fmha_mbarrier_wait(unsigned bar, unsigned parity) {
  while (!fmha_mbarrier_try_wait(bar, parity)) {
  }
}

// Position in a ring of pipeline stages: slot and the parity of its current fill (the phase a
// consumer waits for on the slot's full barrier; a producer waits for the opposite parity on its
// empty barrier, which a fresh barrier passes at once: every slot starts free).
struct FmhaRingPos {
  int slot;
  unsigned phase;
  template <int kStages>
  FMHA_DEVICE void advance() {
    if (++slot == kStages) {
      slot = 0;
      phase ^= 1u;
    }
  }
};
