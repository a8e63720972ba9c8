// Warpgroup matrix multiply-accumulate (wgmma, sm_90a only) for the Hopper kernels: shared-memory
// matrix descriptors, the fence / commit / wait protocol, and m64nNk16 MMAs with fp32 accumulators
// in registers, B always from shared memory and A from shared memory (SS) or registers (RS).
// A warpgroup is 4 consecutive warps starting at a warp index divisible by 4; all 128 threads
// issue each instruction. Accumulator layout (per thread, m64nN): N / 2 floats, for each n8
// block j: rows w * 16 + lane / 4 and + 8, columns j * 8 + 2 (lane % 4) + {0, 1}, in the order
// (row, col), (row, col + 1), (row + 8, col), (row + 8, col + 1) - mma.sync's m16n8 C layout with
// warp w of the warpgroup owning rows 16 w .. 16 w + 15.
#pragma once

#include "common/numeric.h"
#include "common/platform.h"

// Shared-memory layouts of an MMA operand: the swizzle the bulk copy wrote it with. The numbers
// are the descriptor's 2-bit layout field (PTX ISA, "Matrix Descriptor Format").
enum FmhaWgmmaSwizzle {
  kFmhaSwizzleNone = 0,
  kFmhaSwizzle128B = 1,
  kFmhaSwizzle64B = 2,
  kFmhaSwizzle32B = 3
};

// The 64-bit matrix descriptor: start address, leading- and stride-dimension byte offsets (all in
// 16-byte units, 14 bits each: shared addresses below 256 KB) and the swizzle mode in bits 62-63.
// For a K-major operand with 128-byte swizzle (rows of 64 16-bit elements), the stride offset is
// the distance between groups of 8 rows (1024 bytes) and the leading offset is unused (1).
FMHA_DEVICE unsigned long long fmha_wgmma_desc(unsigned smem_addr, unsigned lead_bytes,
                                               unsigned stride_bytes, int swizzle) {
  unsigned long long d = 0;
  d |= static_cast<unsigned long long>((smem_addr & 0x3FFFF) >> 4);
  d |= static_cast<unsigned long long>((lead_bytes & 0x3FFFF) >> 4) << 16;
  d |= static_cast<unsigned long long>((stride_bytes & 0x3FFFF) >> 4) << 32;
  d |= static_cast<unsigned long long>(swizzle & 3) << 62;
  return d;
}

// Orders register accesses to the accumulators (and to A fragments) before the next wgmma.
FMHA_DEVICE void fmha_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }

// Closes the group of wgmma issued since the last commit.
FMHA_DEVICE void fmha_wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}

// Waits until at most kPending committed groups are in flight; their accumulators are then valid.
template <int kPending>
FMHA_DEVICE void fmha_wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

// Keeps the compiler from moving accumulator reads or writes across an asynchronous MMA (the
// registers are read and written by the tensor cores between issue and wait).
template <int kN>
FMHA_DEVICE void fmha_wgmma_fence_operands(float (&d)[kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// The same for A fragments in registers (RS MMAs), which the tensor cores read after issue.
template <int kN>
FMHA_DEVICE void fmha_wgmma_fence_operands(unsigned (&a)[kN][4]) {
#pragma unroll
  for (int i = 0; i < kN; ++i) {
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+r"(a[i][e])::"memory");
  }
}

// D (+)= A B for one k16 step. kTransB = 0: B stored K-major ([n][k], like K in Q K^T);
// 1: N-major ([k][n], like V in P V). The same for A from shared memory (ss<kTransA>): 1 reads
// an A stored [k][m], like dS^T for dS K in the backward. scale_d = 0 ignores D's old value (first
// step).
template <class Element, int kN, int kTransB>
struct FmhaWgmma;

// One specialisation per (element type, N) from the macros below: the instruction text differs
// only in the shape and type suffixes and in where the operands after the N / 2 accumulators are
// numbered, which the per-N macros spell out.
// clang-format off
#define FMHA_WGMMA_REGS_64 \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, " \
  "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define FMHA_WGMMA_DOPS_64(d) \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), \
  "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), \
  "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), \
  "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), \
  "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define FMHA_WGMMA_REGS_80 \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, " \
  "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, " \
  "%34, %35, %36, %37, %38, %39"
#define FMHA_WGMMA_DOPS_80(d) \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), \
  "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), \
  "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), \
  "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), \
  "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), \
  "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39])
#define FMHA_WGMMA_REGS_128 \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, " \
  "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, " \
  "%34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, " \
  "%50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define FMHA_WGMMA_DOPS_128(d) \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), \
  "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), \
  "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), \
  "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), \
  "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
  "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), \
  "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), \
  "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), \
  "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
  "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), \
  "+f"(d[62]), "+f"(d[63])

#define FMHA_WGMMA_DEFINE(ELEM, TY, N, NREG, REGS, DOPS, SS_SCALE, SS_TAIL, RS_SCALE, RS_TAIL)    \
  template <int kTransB>                                                                          \
  struct FmhaWgmma<ELEM, N, kTransB> {                                                            \
    /* A (m64 x k16) from shared memory: K-major (kTransA = 0) or M-major (1). */                 \
    template <int kTransA = 0>                                                                    \
    static FMHA_DEVICE void ss(float (&d)[NREG], unsigned long long a_desc,                       \
                               unsigned long long b_desc, int scale_d) {                          \
      asm volatile("{\n  .reg .pred p;\n  setp.ne.b32 p, " SS_SCALE ", 0;\n"                     \
                   "  wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY "." TY " {" REGS        \
                   SS_TAIL "}\n"                                                                  \
                   : DOPS(d)                                                                      \
                   : "l"(a_desc), "l"(b_desc), "r"(scale_d), "n"(kTransB), "n"(kTransA));         \
    }                                                                                             \
    /* A from registers: each warp's m16n8k16 A fragment (4 x 32 bits) of rows 16 w ... */       \
    static FMHA_DEVICE void rs(float (&d)[NREG], const unsigned (&a)[4],                          \
                               unsigned long long b_desc, int scale_d) {                          \
      asm volatile("{\n  .reg .pred p;\n  setp.ne.b32 p, " RS_SCALE ", 0;\n"                     \
                   "  wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY "." TY " {" REGS        \
                   RS_TAIL "}\n"                                                                  \
                   : DOPS(d)                                                                      \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b_desc), "r"(scale_d),       \
                     "n"(kTransB));                                                               \
    }                                                                                             \
  };

#define FMHA_WGMMA_N64(ELEM, TY)                                                  \
  FMHA_WGMMA_DEFINE(ELEM, TY, 64, 32, FMHA_WGMMA_REGS_64, FMHA_WGMMA_DOPS_64,     \
                    "%34", "}, %32, %33, p, 1, 1, %36, %35;\n",                     \
                    "%37", "}, {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n")
#define FMHA_WGMMA_N80(ELEM, TY)                                                  \
  FMHA_WGMMA_DEFINE(ELEM, TY, 80, 40, FMHA_WGMMA_REGS_80, FMHA_WGMMA_DOPS_80,     \
                    "%42", "}, %40, %41, p, 1, 1, %44, %43;\n",                     \
                    "%45", "}, {%40, %41, %42, %43}, %44, p, 1, 1, %46;\n")
#define FMHA_WGMMA_N128(ELEM, TY)                                                 \
  FMHA_WGMMA_DEFINE(ELEM, TY, 128, 64, FMHA_WGMMA_REGS_128, FMHA_WGMMA_DOPS_128,  \
                    "%66", "}, %64, %65, p, 1, 1, %68, %67;\n",                     \
                    "%69", "}, {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n")

FMHA_WGMMA_N64(fmha_bf16, "bf16")
FMHA_WGMMA_N80(fmha_bf16, "bf16")
FMHA_WGMMA_N128(fmha_bf16, "bf16")
FMHA_WGMMA_N64(fmha_fp16, "f16")
FMHA_WGMMA_N80(fmha_fp16, "f16")
FMHA_WGMMA_N128(fmha_fp16, "f16")
// clang-format on
