// The split tail round that evens out the last round of the Hopper forward's persistent CTAs
// (templates/fwd/fmha_fwd_sm90a.h; their work list is fmha_fwd_sm90a_work.h).
//
// The CTAs take tiles round by round: num_tiles = R x grid + r tiles leave the last round with r
// tiles on grid SMs, and grid - r SMs idle for a whole tile's time (hdim 128, S 8192, 2 x 16
// heads: 2048 tiles on 132 SMs are 15.5 rounds run as 16; 2112 tiles, 16 rounds exactly, ran
// 570 TFLOP/s against 555 per FLOP). Without a mask every tile has the same keys, so the host
// may instead split that round's r tiles by keys over all CTAs (FmhaFwdSm90Params::split_*): CTA
// c takes key blocks [c L / grid, (c + 1) L / grid) of the r tiles' blocks laid end to end
// (L = r x blocks per tile). A range is shorter than one tile, so it holds one or two segments
// (the end of one tile, the start of the next), and a tile is covered by one or more CTAs.
//
// Each consumer warpgroup of a segment writes its unnormalised O fragment and its softmax state
// (row maximum, per-lane row sum) to its own workspace slot, in register order (coalesced, and
// read back by the lane that owns the same fragment positions), then counts itself in on the
// tile's counter. The warpgroup that arrives last for its 64 rows folds the other segments into
// its registers with the online-softmax rescale and stores O and LSE as an unsplit tile does, then
// resets the counter for the next launch. Nothing ever waits for another CTA, so no schedule of
// the CTAs on the SMs can deadlock.
#pragma once

#include "common/copy_sm80.h"
#include "common/fmha_params.h"
#include "common/mask.h"
#include "common/mask_fragments.h"
#include "common/platform.h"
#include "common/softmax.h"
#include "fwd/fmha_fwd_sm90a_work.h"
#include "sm90/warpgroup_sm90a.h"

// One consumer warpgroup's partial state of a segment: kFloats per thread, stored as float4
// number i of thread t at float4 offset i * 128 + t of its slot.
template <int kOChunks, int kON>
struct FmhaFwdSm90aPartial {
  enum {
    kOFloats = kOChunks * kON / 2,
    kFloats = kOFloats + 4,  // O, then row_max[2], row_sum[2]
    kVec4 = kFloats / 4,
  };
  static_assert(kFloats % 4 == 0, "whole float4 per thread");

  FMHA_DEVICE static float4* slot(const FmhaFwdSm90Params& P, int cta, int part, int consumers,
                                  int cw) {
    return reinterpret_cast<float4*>(P.split_partials) +
           static_cast<long long>((cta * 2 + part) * consumers + cw) * kVec4 * 128;
  }

  template <class Softmax>
  FMHA_DEVICE static void store(float4* dst, const float (&o)[kOChunks][kON / 2],
                                const Softmax& sm) {
    const int t = fmha_thread_idx() % 128;
#pragma unroll
    for (int i = 0; i < kOFloats / 4; ++i) {
      const int n = 4 * i;
      dst[i * 128 + t] = make_float4(
          o[n / (kON / 2)][n % (kON / 2)], o[(n + 1) / (kON / 2)][(n + 1) % (kON / 2)],
          o[(n + 2) / (kON / 2)][(n + 2) % (kON / 2)], o[(n + 3) / (kON / 2)][(n + 3) % (kON / 2)]);
    }
    dst[(kVec4 - 1) * 128 + t] =
        make_float4(sm.row_max[0], sm.row_max[1], sm.row_sum[0], sm.row_sum[1]);
  }

  // Row statistics of a stored segment.
  // Reads go through L2 (.cg): other CTAs wrote these slots during this launch.
  FMHA_DEVICE static float4 stats(const float4* src) {
    return __ldcg(src + (kVec4 - 1) * 128 + fmha_thread_idx() % 128);
  }

  // The weight of a segment whose row maximum is `m` once the rows are rescaled to the common
  // maximum `mx` (a row that saw only masked keys has maximum -inf and weight 0).
  FMHA_DEVICE static float weight(float m, float mx, float scale_log2) {
    const float shift = mx == fmha_neg_inf() ? 0.f : mx * scale_log2;
    return fmha_softmax_exp2(m * scale_log2 - shift);
  }
};

// The segments of the split tile of this CTA's iter-th item, for one consumer warpgroup: the
// CTAs first .. last hold them (slot(c) is CTA c's), and u is the tile's index in the round.
template <int kOChunks, int kON>
struct FmhaFwdSm90aSegments {
  using Partial = FmhaFwdSm90aPartial<kOChunks, kON>;
  int u, first, last, consumers, cw;

  template <int kMaskKind>
  FMHA_DEVICE static FmhaFwdSm90aSegments of(const FmhaFwdSm90Params& P, int iter, int consumers,
                                             int cw, int& part) {
    FmhaFwdSm90aWork w;
    fmha_fwd_sm90a_work<kMaskKind>(P, iter, w);
    FmhaFwdSm90aSegments s;
    s.u = w.tile - fmha_fwd_sm90a_split_first_tile(P);
    s.first = fmha_fwd_sm90a_split_owner(P, s.u * P.split_blocks);
    s.last = fmha_fwd_sm90a_split_owner(P, (s.u + 1) * P.split_blocks - 1);
    s.consumers = consumers;
    s.cw = cw;
    part = w.part;
    return s;
  }
  // CTA c's range starts inside this tile (its first segment) or in the one before (its second).
  FMHA_DEVICE const float4* slot(const FmhaFwdSm90Params& P, int c) const {
    const int part = fmha_fwd_sm90a_split_lo(P, c) / P.split_blocks == u ? 0 : 1;
    return Partial::slot(P, c, part, consumers, cw);
  }
};

// The end of the iter-th item, a segment, for one consumer warpgroup: writes its partial state
// and counts it in. Returns true in the warpgroup that arrived last, with `sm` then holding the
// tile's statistics over all segments (row maximum and this lane's row sums, so that finalize()
// gives the tile's normalisation and LSE); that warpgroup then stages O with
// fmha_fwd_sm90a_split_stage and stores the tile as usual. `flag` is a word of shared memory
// only this warpgroup uses; `barrier` the warpgroup's named barrier.
template <int kMaskKind, int kOChunks, int kON, class Softmax>
FMHA_DEVICE bool fmha_fwd_sm90a_split_finish(const FmhaFwdSm90Params& P, int iter, int consumers,
                                             int cw, const float (&o)[kOChunks][kON / 2],
                                             Softmax& sm, unsigned flag, int barrier) {
  using Partial = FmhaFwdSm90aPartial<kOChunks, kON>;
  // The item again, rather than its fields kept live in registers through the key loop.
  int part;
  const auto seg =
      FmhaFwdSm90aSegments<kOChunks, kON>::template of<kMaskKind>(P, iter, consumers, cw, part);
  Partial::store(Partial::slot(P, fmha_block_idx_x(), part, consumers, cw), o, sm);
  __threadfence();  // this thread's partial is visible GPU-wide before the count
  fmha_named_barrier_sync(barrier, 128);
  if (fmha_thread_idx() % 128 == 0) {
    int* counter = P.split_counters + seg.u * consumers + cw;
    const int arrived = atomicAdd(counter, 1) + 1;
    const bool is_last = arrived == seg.last - seg.first + 1;
    if (is_last) *counter = 0;  // every segment is in: the next launch starts from zero
    fmha_st_shared_b32(flag, is_last ? 1u : 0u);
  }
  fmha_named_barrier_sync(barrier, 128);
  const bool is_last = fmha_ld_shared_b32(flag) != 0;
  // Every thread has read the flag before the word is overwritten: by thread 0's O staging, or,
  // with one Q buffer, by the next tile's Q once this warpgroup lets the buffer go.
  fmha_named_barrier_sync(barrier, 128);
  if (!is_last) return false;
  __threadfence();  // the other segments' partials, counted in before, are read after the count
  // One pass of the online softmax over the segments' statistics (this one's included, from the
  // workspace like the others), unrolled so that several loads are in flight at once.
  const float scale_log2 = P.fwd.scale_log2;
  float mx[2] = {fmha_neg_inf(), fmha_neg_inf()};
  float sum[2] = {0.f, 0.f};
#pragma unroll 4
  for (int c = seg.first; c <= seg.last; ++c) {
    const float4 st = Partial::stats(seg.slot(P, c));
    const float m[2] = {st.x, st.y};
    const float l[2] = {st.z, st.w};
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float next = fmha_max(mx[r], m[r]);
      sum[r] = sum[r] * Partial::weight(mx[r], next, scale_log2) +
               l[r] * Partial::weight(m[r], next, scale_log2);
      mx[r] = next;
    }
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    sm.row_max[r] = mx[r];
    sm.row_sum[r] = sum[r];
  }
  return true;
}

// The last warpgroup of a split tile: O = sum over the segments of their weighted O, times
// inv_sum, handed to stage(row half, column, x, y) two adjacent columns at a time. Read from the
// workspace (this warpgroup's own segment included) rather than folded into the accumulators,
// which stay dead here: folding them in registers spilled at hdim 256.
template <int kMaskKind, int kOChunks, int kON, class Stage>
FMHA_DEVICE void fmha_fwd_sm90a_split_stage(const FmhaFwdSm90Params& P, int iter, int consumers,
                                            int cw, const float (&max)[2],
                                            const float (&inv_sum)[2], Stage&& stage) {
  using Partial = FmhaFwdSm90aPartial<kOChunks, kON>;
  int part;
  const auto seg =
      FmhaFwdSm90aSegments<kOChunks, kON>::template of<kMaskKind>(P, iter, consumers, cw, part);
  const float scale_log2 = P.fwd.scale_log2;
  const int t = fmha_thread_idx() % 128;
  // Each segment's O arrives as up to 16 float4 loads in flight at once (one load per step,
  // dependent on the last, took about a round's time at hdim 256); wider passes spilled there.
  enum {
    kVec4 = Partial::kOFloats / 4,
    kPerPass = kVec4 <= 16       ? kVec4
               : kVec4 % 16 == 0 ? 16
                                 : kVec4 / 2,  // hdim 192: 2 x 12
  };
  static_assert(kVec4 % kPerPass == 0, "whole passes");
#pragma unroll
  for (int pass = 0; pass < kVec4 / kPerPass; ++pass) {
    float4 acc[kPerPass];
#pragma unroll
    for (int i = 0; i < kPerPass; ++i) acc[i] = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 1
    for (int c = seg.first; c <= seg.last; ++c) {
      const float4* src = seg.slot(P, c);
      const float4 st = Partial::stats(src);
      const float w0 = Partial::weight(st.x, max[0], scale_log2);
      const float w1 = Partial::weight(st.y, max[1], scale_log2);
#pragma unroll
      for (int i = 0; i < kPerPass; ++i) {
        const float4 v = __ldcg(src + (pass * kPerPass + i) * 128 + t);
        // Fragment elements 4i .. 4i + 3: two columns of row half 0, the same two of row half 1.
        acc[i].x += v.x * w0;
        acc[i].y += v.y * w0;
        acc[i].z += v.z * w1;
        acc[i].w += v.w * w1;
      }
    }
#pragma unroll
    for (int i = 0; i < kPerPass; ++i) {
      const int n = 4 * (pass * kPerPass + i);
      const int col = (n / (kON / 2)) * kON + (n % (kON / 2)) / 4 * 8;
      stage(0, col, acc[i].x * inv_sum[0], acc[i].y * inv_sum[0]);
      stage(1, col, acc[i].z * inv_sum[1], acc[i].w * inv_sum[1]);
    }
  }
}
