// Kernel parameter blocks shared by the host dispatcher and every device template.
//
// This header is compiled three ways: by the host C++ compiler (dispatcher/), by NVRTC and by
// hipRTC. It therefore uses only built-in types: no <cstdint>, no toolkit headers. The structs are
// passed by value as the single kernel argument, so host and device must agree on their layout;
// static_asserts in dispatcher/launch.cpp pin the sizes.
#pragma once

typedef long long fmha_index_t;

// Strides are in elements, the last dimension (hdim) is always contiguous. A tensor is addressed as
// base + b * batch + h * head + s * row + d.
struct FmhaStrides {
  fmha_index_t batch;
  fmha_index_t head;
  fmha_index_t row;
};

// Forward: O = softmax(scale * Q K^T + mask) V, and LSE = logsumexp of the masked, scaled scores
// (natural log) when the kernel was generated with LSE output.
struct FmhaFwdParams {
  const void* q;  // [B, Hq, Sq, Dq] addressed through q_strides
  const void* k;  // [B, Hk, Sk, Dq]
  const void* v;  // [B, Hk, Sk, Dv]
  void* o;        // [B, Hq, Sq, Dv]
  float* lse;     // [B, Hq, Sq] contiguous; may be null when the kernel writes no LSE
  FmhaStrides q_strides;
  FmhaStrides k_strides;
  FmhaStrides v_strides;
  FmhaStrides o_strides;
  int batch;
  int nhead_q;
  int nhead_k;  // nhead_q % nhead_k == 0; query head h reads key/value head h / (nhead_q / nhead_k)
  int seqlen_q;
  int seqlen_k;
  int window_left;   // sliding window only; -1 = unbounded
  int window_right;  // sliding window only; -1 = unbounded
  float scale;       // softmax scale applied to Q K^T
  // scale * log2(e): kernels evaluate exp2(s * scale_log2 - m). Softcap kernels first turn s
  // into softcap * tanh(s * softcap_scale) (the capped scaled score), and scale_log2 is log2(e).
  float scale_log2;
  float softcap;        // softcap kernels: the cap (> 0)
  float softcap_scale;  // softcap kernels: scale / softcap
  // Sinks kernels: [nhead_q] fp32 logits joining each row's softmax denominator.
  const float* sinks;
  // Varlen kernels (common/sequence.h): sequence b is rows cu_seqlens_q[b] .. cu_seqlens_q[b + 1]
  // of Q and O and rows cu_seqlens_k[b] .. of K and V (batch strides 0); seqlen_q and seqlen_k
  // are the longest lengths, total_q and total_k the token counts; LSE is [nhead_q, total_q].
  const int* cu_seqlens_q;
  const int* cu_seqlens_k;
  int total_q;
  int total_k;
};

// Keys of one split key tile's fp32 dK / dV block in the backward's workspace (FmhaBwdParams::
// split_dkdv): the wgmma_sm90a kernels that split (hdim 64 / 128) take 128-key tiles; stage 1,
// which clears the blocks, does not know the tile, and the host sizes them with the same number.
enum { kFmhaBwdSplitKeys = 128 };

// Threads of the backward's sinks-gradient stage (bwd/fmha_bwd_sinks.h): one CTA per query head.
enum { kFmhaDsinksThreads = 256 };

// Backward: given dO, O and LSE of the forward, computes dQ, dK, dV.
struct FmhaBwdParams {
  FmhaFwdParams fwd;  // q, k, v, o and lse (lse is required, never null here)
  const void* d_o;    // [B, Hq, Sq, Dv] addressed through do_strides
  void* d_q;          // [B, Hq, Sq, Dq] addressed through dq_strides
  void* d_k;          // [B, Hk, Sk, Dq] addressed through dk_strides
  void* d_v;          // [B, Hk, Sk, Dv] addressed through dv_strides
  FmhaStrides do_strides;
  FmhaStrides dq_strides;
  FmhaStrides dk_strides;
  FmhaStrides dv_strides;
  float* d_rowsum;  // workspace: D = rowsum(dO * O), [B, Hq, Sq] fp32
  float*
      dq_accum;  // workspace: fp32 dQ accumulation (layout owned by the kernel family); may be null
  float* dk_accum;  // workspace: fp32 dK accumulation for GQA reduction; may be null
  float* dv_accum;  // workspace: fp32 dV accumulation for GQA reduction; may be null
  int* semaphores;  // workspace: ordering counters for the deterministic mode; may be null
  // Sinks kernels: [nhead_q] fp32, the sinks' gradient, and the workspace of per-row terms it
  // sums (the LSE's layout), in a fixed order.
  float* d_sinks;
  float* dsink_rows;
  // Deterministic mode: how many (kv head, batch) pairs share one stretch of the launch order,
  // chain position by chain position (bwd/fmha_bwd_sm90a_schedule.h, fmha_bwd_key_tile_cta); >= 1.
  int det_group_heads;
  // Deterministic mode: how many of the last pairs take their chains in increasing key-tile order
  // (fmha_bwd_key_tile_cta); 0 .. pairs.
  int det_asc_pairs;
  // Deterministic mode, 0 or 1 .. pairs: the launch is one pair per group up to the last
  // det_tail_pairs pairs, which form one group (fmha_bwd_key_tile_cta); det_group_heads must be 1
  // then. 0: groups of det_group_heads throughout.
  int det_tail_pairs;
  // Deterministic mode, 0 or 1: every odd pair's chain ascends as well (fmha_bwd_key_tile_cta),
  // so that directions alternate pair by pair (the host sets it where the chains walk).
  int det_alternate;
  // Deterministic mode with det_alternate: the odd lead pairs from det_asc_walk_from on (pairs that
  // start after the launch's first wave) walk their ascending chains too, with det_asc_walk_up
  // own cells first (fmha_bwd_sm90a_plan_walk); 0: they keep the ascending order.
  int det_asc_walk_up;
  int det_asc_walk_from;
  // wgmma_sm90a atomic mode under a causal mask: how many (kv head, batch) pairs share one section
  // of the 1-D launch order, key tile by key tile, largest first (fmha_bwd_key_tile_cta); >= 1.
  int causal_section_pairs;
  // wgmma_sm90a deterministic mode under a causal mask: cells of its own each key tile visits on
  // the way up of the up-down walk (bwd/fmha_bwd_sm90a_schedule.h, FmhaBwdSm90aWork); 0 keeps
  // the head-major order. Moves the visits in time only, never the order of the additions.
  int det_up_cells;
  // wgmma_sm90a atomic mode, split tail (bwd/fmha_bwd_sm90a_schedule.h, fmha_bwd_key_tile_cta;
  // kernels/wgmma_sm90a/bwd_schedule.cpp, bwd_split_tail): key tiles from linear index split_first
  // on (the last split_tiles of the launch order) run as split_parts CTAs each, over parts of their
  // query tiles. split_parts = 0: no split, and the two workspace pointers may be null.
  float* split_dkdv;    // workspace: fp32 [split_tiles][kFmhaBwdSplitKeys][hdim_q + hdim_v]
  int* split_counters;  // workspace: parts counted in, per split key tile
  int split_first;
  int split_tiles;
  int split_parts;
};

// The driver's CUtensorMap: 128 opaque bytes, 64-byte aligned, encoded on the host
// (cuTensorMapEncodeTiled) and read by the bulk tensor copies (sm90/tma_sm90.h). The run-time
// compilers see no driver headers, so host and kernels share this declaration.
struct alignas(64) FmhaTensorMap {
  unsigned long long opaque[16];
};

// Forward on sm_90a (fwd/fmha_fwd_sm90a.h): the tensor maps of Q, K, V and O, all 4-D
// (head dim, sequence, head, batch) with 64-element inner boxes and 128-byte swizzle, ahead of
// the common parameters. Passed as a __grid_constant__ parameter: the copies read the maps in
// place from parameter memory.
struct FmhaFwdSm90Params {
  FmhaTensorMap q_map;  // box (64, kBlockM): a CTA's query rows, one 64-column slab per copy
  FmhaTensorMap k_map;  // box (64, kBlockN)
  FmhaTensorMap v_map;  // box (64, kBlockN)
  FmhaTensorMap o_map;  // box (64, 64): one consumer warpgroup's rows
  FmhaFwdParams fwd;
  // The split tail round (fwd/fmha_fwd_sm90a_split.h; kernels/wgmma_sm90a/fwd_schedule.cpp,
  // fwd_split_tail): rounds before split_round run whole tiles; the split_tiles tiles after them
  // (from tile split_round x grid on) are split by keys over every CTA. split_tiles = 0: no split,
  // and the two workspace pointers may be null. (split_tiles x split_blocks + 1) x split_ctas <
  // 2^31.
  float* split_partials;  // workspace: per CTA, segment and consumer warpgroup, O and row stats
  int* split_counters;    // workspace: per split tile and consumer warpgroup; zero between launches
  int num_m_blocks;       // ceil(seqlen_q / kBlockM)
  int num_tiles;          // num_m_blocks * nhead_q * batch: the persistent scheduler's work list
  int split_round;        // the CTAs' round of the split tiles: whole rounds before it
  int split_tiles;        // tiles in the split round (num_tiles mod grid), or 0
  int split_blocks;       // key blocks of a tile: ceil(seqlen_k / kBlockN)
  int split_ctas;         // CTAs that take a range: min(grid, split_tiles x split_blocks)
  // Causal masks: CTA c's r-th tile is tile_order[r x grid + c] (-1: none) for r below
  // tile_order_rounds, a plan of the host's (kernels/wgmma_sm90a/fwd_schedule.cpp, fwd_tile_order);
  // null: the static order of fmha_fwd_sm90a_tile_index.
  const int* tile_order;
  int tile_order_rounds;
  // Causal masks, static order (no tile_order): the list deals the (batch, head) pairs in sections
  // of this many, each section heaviest m-block first (fmha_fwd_sm90a_tile). The host passes every
  // pair (one section, the order the plans were measured against) unless it could not plan the
  // shape (past the runner's plan cap): then the L2 section of
  // kernels/wgmma_sm90a/fwd_schedule.cpp, fwd_l2_section_kv_heads, so the CTAs running together
  // share K and V.
  int causal_section_heads;
};

// Backward on sm_90a (bwd/fmha_bwd_sm90a.h): every stage takes this struct (one launch argument
// for the whole plan); stages 1 and 3 read only `bwd`. Q, K, V, dO maps as in the forward
// (4-D, 64-column boxes, 128-byte swizzle); dq_accum_map is 3-D fp32 (head dim, query row,
// batch x query head) over p.bwd.dq_accum with boxes of 32 columns (128 bytes) by 64 rows.
struct FmhaBwdSm90Params {
  FmhaTensorMap q_map;         // box (64, kBlockM)
  FmhaTensorMap k_map;         // box (64, kBlockN)
  FmhaTensorMap v_map;         // box (64, kBlockN)
  FmhaTensorMap do_map;        // box (64, kBlockM)
  FmhaTensorMap dq_accum_map;  // box (32, 64)
  FmhaBwdParams bwd;
};
