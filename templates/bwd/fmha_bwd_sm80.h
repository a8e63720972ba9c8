// FlashAttention-2-style backward on tensor cores (mma.sync m16n8k16, fp32 accumulation), sm_80+.
//
// Three stages, launched in this order on one stream, each with 1-D blocks of kNumWarps * 32
// threads (the rendered wrappers carry __launch_bounds__(kNumWarps * 32)):
//   1. fmha_bwd_sm80_dot_do_o   grid (ceil(Sq / kBlockM), Hq, B), no dynamic shared memory.
//        D = rowsum(dO * O) in fp32 into p.d_rowsum, and clears stage 2's workspace: the rows of
//        p.dq_accum it owns and, when kDeterministic, its entry of p.semaphores (so the host
//        needs no memset). When kDeterministic it must use stage 2's kBlockM: semaphores count
//        query tiles of that size.
//   2. fmha_bwd_sm80_dq_dk_dv   grid (ceil(Sk / kBlockN), Hk, B), dynamic shared memory
//        FmhaBwdSm80Shape::kSmemBytes =
//          2 * (kBlockN * (kHdimQ + kHdimV)                  K and V tiles
//               + kStages * kBlockM * (kHdimQ + kHdimV)      Q and dO stages
//               + kBlockN * kBlockM * (kPInRegs ? 1 : 2))    dS^T (and P^T) tiles
//          + 8 * kStages * kBlockM                           LSE and D stages
//        with kPInRegs when each warp owns all queries of its keys (fmha_bwd_warp_split.h). Over
//        48 KB the host must raise CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES. Writes p.d_k
//        and p.d_v (Element) and adds dS K (unscaled) into p.dq_accum.
//   3. fmha_bwd_sm80_convert_dq grid (ceil(Sq / kBlockM), Hq, B), no dynamic shared memory.
//        dQ = scale * dq_accum, rounded to Element, into p.d_q (the scale is applied here, once
//        per element, rather than to every partial sum of stage 2).
// Workspace: p.dq_accum fp32 [B, Hq, Sq, kHdimQ] contiguous (row stride kHdimQ); p.semaphores
// int [B, Hq, ceil(Sq / kBlockM)] contiguous (deterministic mode only); p.d_rowsum fp32
// [B, Hq, Sq]. dk_accum / dv_accum are unused: a stage-2 CTA owns its key rows for every query
// head of its group, so GQA needs no reduction workspace and dK / dV are always deterministic.
//
// Recommended tiles (kBlockM, kBlockN, kNumWarps, kStages) [dynamic shared memory], with stage 2's
// registers (ptxas, min..max over fp16/bf16 x 4 masks x deterministic on/off, sm_80 and sm_90;
// stages 1 and 3 use <= 34). sm_80 allows 163 KB per CTA, sm_90 227 KB. The warp split inside a
// tile (fmha_bwd_warp_split.h) is the one that reads the fewest shared-memory bytes per warp:
// this kernel is bound by shared-memory reads, and that choice alone measured +14 % at hdim 128
// (H200, S 8192: 230.5 -> 263.6 TFLOP/s). Registers bound the tiles: dK and dV live in registers
// for the whole CTA, (Dq + Dv) / 2 fp32 per thread whatever the split; phase A adds dP^T and one
// part of S^T, phase C dQ (in halves when large). All run 8 warps: one CTA per SM (> 128
// registers); key tiles of 128 halve, against 64, both the dq_accum reduction traffic and the
// Q / dO re-reads per key.
//   hdim     tile               regs      why
//   32/32    128,128,8,2 [82K]   171..185  P in registers; 128-query tiles halve the barriers
//                                          and semaphore round trips per key tile
//   64/64    128,128,8,2 [162K]  225..236  as 32/32 (FA2 uses the same tile)
//   96/96    64,128,8,2 [129K]   226..231  128 queries would add 32 registers of dP^T
//   128/128  64,128,8,1 [129K]   249..255  dK + dV alone are 128 registers (FA2's tile); two
//                                          stages measured the same, 128 x 128 spilled
//   192/128  64,64,8,2 [137K]    167..196  beside dK + dV, only 64 keys leave room for dP^T
//   192/192  64,64,8,2 [161K]    200..219  as 192/128; the second stage just fits sm_80
//   256/256  64,64,8,1 [145K]    237..246  one stage, also on sm_90 where two fit [209K]: there
//                                          two measured 131 against 153 TFLOP/s (H200, S 8192)
// None spills or has a stack frame. With 2 stages the next Q / dO tile loads during a whole
// iteration, with 1 only during phase C.
//
// Algorithm of stage 2. One CTA per kBlockN keys of one kv head: K and V stay in shared memory;
// the CTA visits the query heads of its group in order and, for each, the query tiles that the
// mask leaves visible to its keys (fully masked tiles are skipped, boundary tiles masked element
// by element), streaming Q, dO, LSE and D through kStages cp.async slots. Per query tile, with
// keys as the rows of every score matrix:
//   A. dP^T = V dO^T; then, 32 queries per warp at a time, S^T = K Q^T and
//      P^T = exp2(S^T * scale_log2 - LSE * log2 e) (0 where masked or LSE = -inf) and
//      dS^T = P^T o (dP^T - D), packed to 16 bits at once. Warps split the keys (and the queries
//      when there are more warps than k16 key blocks).
//   B. dV += P^T dO, dK += dS^T Q. With keys as rows the accumulators of phase A are already the
//      A operands here (as P is in the forward), so when each warp owns all queries of its keys
//      (kPInRegs) P^T and dS^T never leave registers; otherwise they pass through shared memory
//      and the warps split the head dimension instead.
//   C. dQ = dS K from dS^T in shared memory (ldmatrix.trans), warps split queries x head dim (in
//      two halves of the head dim when a warp would hold more than 32 accumulators), added to
//      dq_accum: fp32 reductions (red.global.add) in both modes, in the deterministic one in a
//      fixed order (below).
// Copies: commit groups [K V] [tile 0] ... [tile kStages-1], then one group per iteration, issued
// as soon as phase B no longer reads the slot, so it overlaps phase C (and, with 2+ stages, the
// whole next iteration).
//
// Deterministic mode. dq_accum of (b, h, query tile m) receives the key tiles' contributions in
// decreasing key-tile order: the CTA of key tile n waits (one thread spins on an acquire load,
// then a barrier; per warp under causal masks, below) until semaphore (b, h, m) equals the number
// of key tiles after n that visit m, fmha_bwd_key_tiles(m).hi - 1 - n, which is computed by the
// same function that decides which tiles a CTA visits, so it never waits for a tile that does not
// come. It then adds with the same fp32 reductions as the atomic mode (red.global.add: no load
// round trip); after the next CTA barrier (the top of its next iteration, or the epilogue's) one
// thread fences (acq_rel, gpu scope: the reductions are complete) and increments the semaphore.
// Each element thus receives its additions in a fixed order, and fp32 addition in a fixed order and
// fixed per-CTA arithmetic make dQ bit-identical run to run. Why decreasing: every CTA walks its
// query tiles upwards, and under the masks the first query tile of key tile n + 1 is never below
// that of key tile n. So the CTA it waits for started on that query tile no later than it did and
// is normally done with it by the time it arrives: with causal masks, increasing order made key
// tile n wait for tiles 0..n-1 to reach its diagonal first and halved the throughput (H200, hdim
// 128, S 8192: 90 against 179 TFLOP/s). For that the CTAs of one (kv head, batch) take their key
// tiles in reverse, n = num_n - 1 - blockIdx.x, in this mode. No deadlock: a CTA only waits for
// CTAs of the same (kv head, batch), i.e. the same blockIdx.y/z, and higher key tiles, i.e. lower
// blockIdx.x, hence lower linear block index. The hardware dispatches CTAs in linear index order
// (FlashAttention-3's deterministic mode relies on the same), so when a CTA waits, every CTA it
// waits for is resident or finished; the lowest-index unfinished resident CTA waits only for
// finished ones, so it always progresses, finishes and frees its slot, by induction. Causal masks
// (kLateRelease): the release moves one phase later, to the barrier after the next iteration's
// phase B, where the fence finds the reductions long complete instead of stalling warp 0 on their
// round trip; and each warp polls and waits for itself (lane 0 spins, then __syncwarp) instead of
// the whole CTA behind thread 0. Either alone gained nothing; together, at S 8192, +6 % (hdim 128:
// 226.7 -> 239.7 TFLOP/s), +8 % (hdim 256), +3 % (hdim 64) (H200; see docs/METHOD.md,
// "Deterministic mode (mma_sm80)"). Not without a mask: there every CTA of a (kv head, batch)
// starts on query tile 0 at once, the later release lengthens the chain each tile's additions wait
// through, and S 2048 lost 8-21 %. Waits and releases only move, so the order and the no-deadlock
// argument are unchanged.
#pragma once

#include "bwd/fmha_bwd_memory_sm80.h"
#include "bwd/fmha_bwd_sinks.h"
#include "bwd/fmha_bwd_sm80_dq_dk_dv.h"
#include "common/copy_sm80.h"
#include "common/fmha_params.h"
#include "common/mask.h"
#include "common/mma_sm80.h"
#include "common/numeric.h"
#include "common/platform.h"
#include "common/sequence.h"
#include "common/softmax.h"

// ---------------------------------------------------------------------------------------------
// Stage 1: D = rowsum(dO * O); clears dq_accum rows and semaphores.

template <class Element, int kHdimQ, int kHdimV, int kBlockM, int kNumWarps, bool kDeterministic,
          bool kVarlen, bool kSinks>
FMHA_DEVICE void fmha_bwd_sm80_dot_do_o(const FmhaBwdParams& p) {
  enum {
    kThreads = kNumWarps * 32,
    kChunks = kHdimV / 8,  // 16-byte chunks per row
    // Threads per row: a power of two (for the shuffle reduction) dividing the chunk count.
    kRowThreads = kChunks % 8 == 0 ? 8 : 4,
    kChunksPerThread = kChunks / kRowThreads,
    kRowsPerPass = kThreads / kRowThreads,
    kPasses = (kBlockM + kRowsPerPass - 1) / kRowsPerPass,
  };
  static_assert(kHdimV % 32 == 0 && kHdimQ % 32 == 0, "hdim must be a multiple of 32");
  const int tid = fmha_thread_idx();
  const int m_block = fmha_block_idx_x();
  const int h = fmha_block_idx_y();
  const int b = fmha_block_idx_z();
  const FmhaFwdParams& f = p.fwd;
  const FmhaSequence seq = fmha_sequence<kVarlen>(f, b);
  const int m0 = m_block * kBlockM;
  if (kVarlen && m0 >= seq.seqlen_q) return;  // past this sequence's rows
  const int rows_valid = min(kBlockM, seq.seqlen_q - m0);
  const fmha_index_t stat0 = fmha_row_stat0<kVarlen>(f, seq.q_row0, b, h) + m0;
  const float sink = kSinks ? f.sinks[h] : 0.f;

  const Element* do_ptr = static_cast<const Element*>(p.d_o) + b * p.do_strides.batch +
                          h * p.do_strides.head + (seq.q_row0 + m0) * p.do_strides.row;
  const Element* o_ptr = static_cast<const Element*>(f.o) + b * f.o_strides.batch +
                         h * f.o_strides.head + (seq.q_row0 + m0) * f.o_strides.row;
  const int sub = tid % kRowThreads;
#pragma unroll
  for (int pass = 0; pass < kPasses; ++pass) {
    const int r = pass * kRowsPerPass + tid / kRowThreads;
    float sum = 0.f;
    if (r < rows_valid) {
#pragma unroll
      for (int c = 0; c < kChunksPerThread; ++c) {
        // Interleaved so that a row's threads read consecutive 16-byte chunks.
        const int col = (c * kRowThreads + sub) * 8;
        const FmhaU32x4 a = fmha_ld_global_nc_128(do_ptr + r * p.do_strides.row + col);
        const FmhaU32x4 o = fmha_ld_global_nc_128(o_ptr + r * f.o_strides.row + col);
        const unsigned av[4] = {a.x, a.y, a.z, a.w};
        const unsigned ov[4] = {o.x, o.y, o.z, o.w};
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          // Each 32-bit word holds two elements, low half first.
          const unsigned aw = av[e];
          const unsigned ow = ov[e];
          Element lo_a, hi_a, lo_o, hi_o;
          lo_a.bits = static_cast<unsigned short>(aw & 0xffffu);
          hi_a.bits = static_cast<unsigned short>(aw >> 16);
          lo_o.bits = static_cast<unsigned short>(ow & 0xffffu);
          hi_o.bits = static_cast<unsigned short>(ow >> 16);
          sum += fmha_to_float(lo_a) * fmha_to_float(lo_o);
          sum += fmha_to_float(hi_a) * fmha_to_float(hi_o);
        }
      }
    }
    // Every lane takes part (the loop bounds are uniform), so the shuffles are well defined.
#pragma unroll
    for (int off = kRowThreads / 2; off > 0; off /= 2) sum += fmha_shfl_xor(sum, off);
    if (sub == 0 && r < rows_valid) {
      p.d_rowsum[stat0 + r] = sum;
      // The sink's share of the row's softmax is exp(sink - LSE); its gradient term is that
      // share times (0 - D): the sink has no value row (bwd/fmha_bwd_sinks.h sums the terms).
      if (kSinks) {
        const float share = fmha_exp2((sink - f.lse[stat0 + r]) * FMHA_LOG2E);
        p.dsink_rows[stat0 + r] = -share * sum;
      }
    }
  }

  // dq_accum rows [m0, m0 + rows_valid) are one contiguous span (row stride kHdimQ).
  if (rows_valid > 0) {
    float* acc = p.dq_accum + stat0 * kHdimQ;
    const int n4 = rows_valid * (kHdimQ / 4);
    for (int i = tid; i < n4; i += kThreads) fmha_st_global_f32x4(acc + i * 4, 0.f, 0.f, 0.f, 0.f);
  }
  if (kDeterministic && tid == 0) {
    // Counted over the longest sequence in a packed batch, as the workspace is.
    const int num_m = (f.seqlen_q + kBlockM - 1) / kBlockM;
    p.semaphores[(static_cast<fmha_index_t>(b) * f.nhead_q + h) * num_m + m_block] = 0;
  }
  // The Hopper atomic mode's split key tiles (bwd/fmha_bwd_sm90a_split.h): their fp32 dK / dV
  // blocks and counters, a slice per CTA of this grid.
  if (!kDeterministic && p.split_parts > 0) {
    const int ctas = static_cast<int>(gridDim.x * gridDim.y * gridDim.z);
    const int cta = m_block + static_cast<int>(gridDim.x) * (h + f.nhead_q * b);
    const fmha_index_t n4 =
        static_cast<fmha_index_t>(p.split_tiles) * kFmhaBwdSplitKeys * (kHdimQ + kHdimV) / 4;
    const fmha_index_t lo = n4 * cta / ctas, hi = n4 * (cta + 1) / ctas;
    for (fmha_index_t i = lo + tid; i < hi; i += kThreads) {
      fmha_st_global_f32x4(p.split_dkdv + i * 4, 0.f, 0.f, 0.f, 0.f);
    }
    for (int i = cta * kThreads + tid; i < p.split_tiles; i += ctas * kThreads) {
      p.split_counters[i] = 0;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Stage 3: dQ = scale * dq_accum.

template <class Element, int kHdimQ, int kBlockM, int kNumWarps, bool kVarlen>
FMHA_DEVICE void fmha_bwd_sm80_convert_dq(const FmhaBwdParams& p) {
  enum { kThreads = kNumWarps * 32, kChunks = kHdimQ / 8, kTotal = kBlockM * kChunks };
  using Mma = FmhaMmaSm80<Element>;
  const int tid = fmha_thread_idx();
  const int h = fmha_block_idx_y();
  const int b = fmha_block_idx_z();
  const FmhaFwdParams& f = p.fwd;
  const FmhaSequence seq = fmha_sequence<kVarlen>(f, b);
  const int m0 = fmha_block_idx_x() * kBlockM;
  if (kVarlen && m0 >= seq.seqlen_q) return;
  const int rows_valid = min(kBlockM, seq.seqlen_q - m0);
  const float* acc = p.dq_accum + (fmha_row_stat0<kVarlen>(f, seq.q_row0, b, h) + m0) * kHdimQ;
  Element* dq = static_cast<Element*>(p.d_q) + b * p.dq_strides.batch + h * p.dq_strides.head +
                (seq.q_row0 + m0) * p.dq_strides.row;
  const float scale = f.scale;
  for (int i = tid; i < kTotal; i += kThreads) {
    const int row = i / kChunks;
    const int col = (i % kChunks) * 8;
    if (row < rows_valid) {
      const FmhaU32x4 a = fmha_ld_global_nc_128(acc + row * kHdimQ + col);
      const FmhaU32x4 c = fmha_ld_global_nc_128(acc + row * kHdimQ + col + 4);
      const unsigned w[8] = {a.x, a.y, a.z, a.w, c.x, c.y, c.z, c.w};
      unsigned v[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        v[e] = Mma::pack(fmha_uint_as_float(w[2 * e]) * scale,
                         fmha_uint_as_float(w[2 * e + 1]) * scale);
      }
      FmhaU32x4 out;
      out.x = v[0];
      out.y = v[1];
      out.z = v[2];
      out.w = v[3];
      fmha_st_global_128(dq + row * p.dq_strides.row + col, out);
    }
  }
}
