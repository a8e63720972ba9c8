// Data movement for the sm_80+ tensor-core kernels: cp.async global->shared copies, ldmatrix
// fragment loads, 16-byte shared/global accesses and the swizzled shared-memory tile layout they
// all agree on.
//
// NVIDIA only (inline PTX, sm_80 and newer); NVRTC-safe: no toolkit headers.
#pragma once

#include "common/fmha_params.h"
#include "common/platform.h"

// Shared-space instructions take 32-bit addresses; converting once per kernel and doing all tile
// arithmetic in 32 bits keeps 64-bit address math out of the inner loops.
FMHA_DEVICE unsigned fmha_smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// ---------------------------------------------------------------------------------------------
// Swizzled tile of kRows x kCols 16-bit elements.
//
// A row is kCols / 8 chunks of 16 bytes. ldmatrix (plain or .trans) reads one chunk from each of
// 8 consecutive rows per 8x8 matrix; with a plain row-major layout those 8 chunks sit at the same
// bank group whenever the row pitch is a multiple of 128 bytes, an 8-way conflict. The chunk index
// is therefore XOR-ed with bits of the row so that any 8 consecutive rows at the same logical
// chunk hit 8 different 16-byte bank groups.
//
// Rows are split into column blocks of kW chunks stored one after another ([block][row][kW]), so
// that the XOR never leaves a block: kW = 8 (128-byte rows inside a block, XOR with row % 8)
// when the chunk count allows, else kW = 4 (64-byte rows, two per 128 bytes, XOR with (row / 2) %
// 4), which covers hdim 32 and 96. Both make the cp.async 16-byte stores of a warp's consecutive
// chunks conflict-free as well.
template <int kRows_, int kCols_>
struct FmhaSmemTile {
  enum {
    kRows = kRows_,
    kCols = kCols_,
    kChunks = kCols / 8,
    kW = (kChunks % 8 == 0) ? 8 : 4,
    kBlockBytes = kRows * kW * 16,
    kBytes = kRows * kCols * 2,
  };
  static_assert(kCols % 32 == 0, "tile width must be a multiple of 32 elements");

  // Per-row XOR pattern; depends on row % 8 only, so rows that differ by a multiple of 8 share it
  // (fragment loads exploit this to fold loop offsets into immediates).
  static FMHA_DEVICE int swizzle(int row) { return kW == 8 ? (row & 7) : ((row >> 1) & 3); }

  // Byte offset of 16-byte chunk `chunk` of row `row`.
  static FMHA_DEVICE unsigned offset(int row, int chunk) {
    return static_cast<unsigned>((chunk / kW) * kBlockBytes + row * (kW * 16) +
                                 (((chunk % kW) ^ swizzle(row)) * 16));
  }
};

// ---------------------------------------------------------------------------------------------
// cp.async (sm_80+). The .cg variant bypasses L1: K/V tiles are read once per CTA and staged in
// shared memory anyway. A source size of 0 zero-fills the 16 bytes without reading global memory,
// which is how out-of-range rows are predicated without a branch around the copy.

FMHA_DEVICE void fmha_cp_async_16(unsigned smem_dst, const void* gmem_src, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_dst), "l"(gmem_src),
               "r"(src_bytes)
               : "memory");
}

FMHA_DEVICE void fmha_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// Waits until at most kPending of this thread's most recent groups are still in flight.
template <int kPending>
FMHA_DEVICE void fmha_cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// Copies rows [0, kRows) of a tile whose row r starts at gmem + r * row_stride (elements) into the
// swizzled shared tile at smem; rows >= rows_valid are zero-filled. Consecutive threads take
// consecutive chunks of a row so that each warp's global reads coalesce into whole rows.
template <class Tile, int kThreads, class Element>
FMHA_DEVICE void fmha_copy_tile_async(unsigned smem, const Element* gmem, fmha_index_t row_stride,
                                      int rows_valid, int tid) {
  enum { kTotal = Tile::kRows * Tile::kChunks, kIters = (kTotal + kThreads - 1) / kThreads };
  if (kThreads % Tile::kChunks == 0) {
    // Fixed column per thread, so the row advances by a constant; when that step is a multiple of
    // 8 rows the swizzle is fixed too and every shared address is one base plus an immediate.
    enum {
      kRowStep = kThreads % Tile::kChunks == 0 ? kThreads / Tile::kChunks : 1,
      kFixedSwizzle = kRowStep % 8 == 0,
    };
    const int chunk = tid % Tile::kChunks;
    const int row0 = tid / Tile::kChunks;
    const Element* src = gmem + row0 * row_stride + chunk * 8;
    const unsigned dst = smem + Tile::offset(row0, chunk);
    const fmha_index_t step = kRowStep * row_stride;
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int row = row0 + i * kRowStep;
      if (kTotal % kThreads == 0 || row < Tile::kRows) {
        const bool valid = row < rows_valid;
        const unsigned d =
            kFixedSwizzle ? dst + i * kRowStep * (Tile::kW * 16) : smem + Tile::offset(row, chunk);
        fmha_cp_async_16(d, valid ? src + i * step : gmem, valid);
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < kIters; ++i) {
      const int id = tid + i * kThreads;
      if (kTotal % kThreads == 0 || id < kTotal) {
        const int row = id / Tile::kChunks;
        const int chunk = id % Tile::kChunks;
        const bool valid = row < rows_valid;
        const Element* src = valid ? gmem + row * row_stride + chunk * 8 : gmem;
        fmha_cp_async_16(smem + Tile::offset(row, chunk), src, valid);
      }
    }
  }
}

// Per-lane addressing of ldmatrix fragments in a swizzled tile. Every ldmatrix of the kernels
// reads, per lane, row row0 + lane_row and chunk chunk0 + lane_chunk, with row0 a multiple of 8,
// chunk0 even and lane_chunk in {0, 1}. Then the swizzle depends on the lane only and
//   offset = (chunk0 / kW) * kBlockBytes + row0 * kW * 16 + (X ^ ((chunk0 % kW) / 2 * 32)),
//   X = lane_row * kW * 16 + (lane_chunk ^ swizzle(lane_row)) * 16,
// where the XOR only touches bits 5..6 (bit 5 for kW = 4), which X's row term, the tile bases and
// the constant terms never use (all are multiples of kW * 16). So a fragment address is one
// per-tile register XOR an immediate plus an immediate. Spelling this out keeps the compiler from
// materialising, and hoisting out of the key loop, one register per distinct (row0, chunk0),
// which otherwise pushes the big tiles into spills. Requires tile bases that are multiples of
// 128 bytes (the dynamic shared buffer is declared __align__(128) and every tile size is a
// multiple of 1 KB).
template <class Tile>
struct FmhaFragAddr {
  using TileType = Tile;
  unsigned base;  // tile base + X

  FMHA_DEVICE static unsigned lane_term(int lane_row, int lane_chunk) {
    return static_cast<unsigned>(lane_row * (Tile::kW * 16) +
                                 ((lane_chunk ^ Tile::swizzle(lane_row)) * 16));
  }
  FMHA_DEVICE void init(unsigned tile_base, unsigned lane_x) { base = tile_base + lane_x; }

  // row0 must be a compile-time multiple of 8 and chunk0 a compile-time even constant (after
  // unrolling) for everything but the XOR to fold into the instruction's immediate.
  FMHA_DEVICE unsigned at(int row0, int chunk0) const {
    return (base ^ static_cast<unsigned>(((chunk0 % Tile::kW) / 2) * 32)) +
           static_cast<unsigned>((chunk0 / Tile::kW) * Tile::kBlockBytes + row0 * (Tile::kW * 16));
  }
};

// ---------------------------------------------------------------------------------------------
// ldmatrix: four 8x8 matrices of 16-bit elements; lanes 8m..8m+7 supply the row addresses of
// matrix m, and register m of every lane receives its fragment of matrix m.

FMHA_DEVICE void fmha_ldmatrix_x4(unsigned (&r)[4], unsigned smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem));
}

// Transposing variant: turns row-major [k][n] data (V as stored) into the column-major B
// fragments the mma expects.
FMHA_DEVICE void fmha_ldmatrix_x4_trans(unsigned (&r)[4], unsigned smem) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem));
}

// ---------------------------------------------------------------------------------------------
// Plain shared / global accesses used by the epilogue.

FMHA_DEVICE void fmha_st_shared_b32(unsigned smem, unsigned v) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(smem), "r"(v) : "memory");
}

FMHA_DEVICE unsigned fmha_ld_shared_b32(unsigned smem) {
  unsigned v;
  asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(smem) : "memory");
  return v;
}

struct FmhaU32x4 {
  unsigned x, y, z, w;
};

FMHA_DEVICE FmhaU32x4 fmha_ld_shared_128(unsigned smem) {
  FmhaU32x4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(smem)
               : "memory");
  return v;
}

FMHA_DEVICE void fmha_st_global_128(void* gmem, const FmhaU32x4& v) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(gmem), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w)
               : "memory");
}
