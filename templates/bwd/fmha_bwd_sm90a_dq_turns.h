// The deterministic mode's semaphores (fmha_bwd_sm90a_schedule.h orders the turns): the dQ writer
// waits for its CTA's turn at a query tile, adds, and releases the turn to the next key tile.
#pragma once

#include "bwd/fmha_bwd_memory_sm80.h"
#include "bwd/fmha_bwd_sm90a_schedule.h"
#include "common/fmha_params.h"
#include "sm90/mbarrier_sm90.h"
#include "sm90/tma_sm90.h"

// The semaphore of (b, h, query tile m_block).
FMHA_DEVICE int* fmha_bwd_sm90a_dq_semaphore(const FmhaBwdSm90Params& P, const FmhaBwdSm90aWork& w,
                                             int h, int m_block, int num_m) {
  const FmhaFwdParams& f = P.bwd.fwd;
  return P.bwd.semaphores + (static_cast<fmha_index_t>(w.b) * f.nhead_q + h) * num_m + m_block;
}

// The dQ writer: wait until round `round` of the semaphore of (b, h, query tile m_block) counts
// the key tiles before this CTA's turn, so that this CTA's reduce-adds come next in the fixed
// order (num_m: query tiles per head); returns the semaphore, to release
// (fmha_bwd_sm90a_finish_dq_round) once those adds are complete.
// `ahead`: the semaphore's value the writer read during its previous visit
// (fmha_bwd_sm90a_finish_dq_round), or -1 (no count matches). Where it already shows the turn the
// writer goes without a load: that read was followed by the previous visit's release fence, which
// made it an acquire. Otherwise it polls with acquire loads. Counts only grow, so a value read
// early is at most behind.
template <int kMaskKind, int kBlockM, int kBlockN>
FMHA_DEVICE int* fmha_bwd_sm90a_wait_dq_turn(const FmhaBwdSm90Params& P, const FmhaBwdSm90aWork& w,
                                             int h, int m_block, int num_m, int round, int ahead) {
  const FmhaFwdParams& f = P.bwd.fwd;
  int* sem = fmha_bwd_sm90a_dq_semaphore(P, w, h, m_block, num_m);
  const int count = fmha_bwd_sm90a_dq_turn<kMaskKind, kBlockM, kBlockN>(f, w, m_block);
  if (((ahead >> (16 * round)) & 0xffff) != count) {
    while (((fmha_semaphore_poll(sem) >> (16 * round)) & 0xffff) != count) {
    }
  }
  fmha_fence_proxy_async_global();  // the reductions that follow come after what the wait saw
  return sem;
}

// The writer after issuing one round of reduce-adds: hand the dQ buffers back to the consumers as
// soon as the copies have read them, and only then, when deterministic, wait for the adds to be
// complete in global memory before the next key tile may add its own. The consumers store their
// next dQ blocks meanwhile, instead of waiting out the adds' round trip to L2 every tile.
// Deterministic: `next` is the next visit's semaphore (null after the last), read while the adds
// complete, so that its round trip to L2 is off the writer's path (a turn polled only once the
// next dQ blocks are in took one round trip per visit, about 1 us at hdim 256 under the adds'
// load); returns the value read, or -1.
template <class Barriers, bool kDeterministic>
FMHA_DEVICE int fmha_bwd_sm90a_finish_dq_round(const Barriers& bars, int* sem, int round,
                                               const int* next) {
  fmha_bulk_wait_group_read<0>();
  fmha_mbarrier_arrive(bars.dq_empty(0, round));
  fmha_mbarrier_arrive(bars.dq_empty(1, round));
  int ahead = -1;
  if (kDeterministic) {
    if (next) ahead = fmha_semaphore_peek(next);
    fmha_bulk_wait_group<0>();
    fmha_semaphore_release_add(sem, 1 << (16 * round));  // also the acquire fence of `ahead`
  }
  return ahead;
}
