// The deterministic mode's semaphores (fmha_bwd_sm90a_schedule.h orders the turns): the dQ writer
// waits for its CTA's turn at a query tile, adds, and releases the turn to the next key tile.
#pragma once

#include "bwd/fmha_bwd_memory_sm80.h"
#include "bwd/fmha_bwd_sm90a_schedule.h"
#include "common/fmha_params.h"
#include "sm90/mbarrier_sm90.h"
#include "sm90/tma_sm90.h"

// The dQ writer: wait until round `round` of the semaphore of (b, h, query tile m_block) counts
// the key tiles before this CTA's turn, so that this CTA's reduce-adds come next in the fixed
// order (num_m: query tiles per head); returns the semaphore, to release
// (fmha_bwd_sm90a_finish_dq_round) once those adds are complete.
template <int kMaskKind, int kBlockM, int kBlockN>
FMHA_DEVICE int* fmha_bwd_sm90a_wait_dq_turn(const FmhaBwdSm90Params& P, const FmhaBwdSm90aWork& w,
                                             int h, int m_block, int num_m, int round) {
  const FmhaFwdParams& f = P.bwd.fwd;
  int* sem = P.bwd.semaphores + (static_cast<fmha_index_t>(w.b) * f.nhead_q + h) * num_m + m_block;
  const int count = fmha_bwd_sm90a_dq_turn<kMaskKind, kBlockM, kBlockN>(f, w, m_block);
  while (((fmha_semaphore_poll(sem) >> (16 * round)) & 0xffff) != count) {
  }
  fmha_fence_proxy_async_global();  // the reductions that follow come after what the wait saw
  return sem;
}

// The writer after issuing one round of reduce-adds: hand the dQ buffers back to the consumers as
// soon as the copies have read them, and only then, when deterministic, wait for the adds to be
// complete in global memory before the next key tile may add its own. The consumers store their
// next dQ blocks meanwhile, instead of waiting out the adds' round trip to L2 every tile.
template <class Barriers, bool kDeterministic>
FMHA_DEVICE void fmha_bwd_sm90a_finish_dq_round(const Barriers& bars, int* sem, int round) {
  fmha_bulk_wait_group_read<0>();
  fmha_mbarrier_arrive(bars.dq_empty(0, round));
  fmha_mbarrier_arrive(bars.dq_empty(1, round));
  if (kDeterministic) {
    fmha_bulk_wait_group<0>();
    fmha_semaphore_release_add(sem, 1 << (16 * round));
  }
}
