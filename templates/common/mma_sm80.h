// Warp-level tensor-core MMA for sm_80+: mma.sync m16n8k16 with fp32 accumulation, for fp16 and
// bf16 operands, and the fp32 -> packed 16-bit conversion that turns accumulators into A operands.
//
// Fragment ownership (lane l, g = l / 4, t = l % 4), as defined by the PTX ISA:
//   A (16x16, row-major): a0 = A[g][2t..2t+1]    a1 = A[g+8][2t..2t+1]
//                         a2 = A[g][2t+8..2t+9]  a3 = A[g+8][2t+8..2t+9]
//   B (16x8, "col"):      b0 = B[2t..2t+1][g]    b1 = B[2t+8..2t+9][g]
//   C (16x8, fp32):       c0,c1 = C[g][2t..2t+1] c2,c3 = C[g+8][2t..2t+1]
// An accumulator pair (c0,c1) / (c2,c3) of two adjacent n8 tiles is exactly the A fragment of the
// next product along k, which is what lets P stay in registers between the two GEMMs of attention.
//
// NVIDIA only (inline PTX); NVRTC-safe.
#pragma once

#include "common/numeric.h"
#include "common/platform.h"

template <class Element>
struct FmhaMmaSm80;

template <>
struct FmhaMmaSm80<fmha_fp16> {
  // d += a * b. Not volatile: the instruction is pure, so the compiler may schedule it freely
  // among the fragment loads.
  static FMHA_DEVICE void mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  // Round-to-nearest-even; `lo` lands in the low half (the lower column index).
  static FMHA_DEVICE unsigned pack(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
  }
};

template <>
struct FmhaMmaSm80<fmha_bf16> {
  static FMHA_DEVICE void mma(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  static FMHA_DEVICE unsigned pack(float lo, float hi) {
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
  }
};
