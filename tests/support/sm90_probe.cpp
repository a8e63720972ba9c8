// The probe kernels of sm90_probe.hpp.
#include "support/sm90_probe.hpp"

#include "codegen/templates.hpp"
#include "support/test_support.hpp"

namespace fmha_jit::test {

// One CTA, one warpgroup: A [64 m][64 k] and B [64 n][64 k] bf16, both K-major with 128-byte
// swizzle (one 128-byte row per m or n), land through two TMA loads on one mbarrier; four k16
// wgmma steps accumulate D = A B^T in fp32, stored row-major to out[64][64].
const char* const kSm90ProbeSource = R"(
#include "common/copy_sm80.h"
#include "sm90/mbarrier_sm90.h"
#include "sm90/tma_sm90.h"
#include "sm90/wgmma_sm90a.h"

extern "C" __global__ void __launch_bounds__(128, 1)
fmha_sm90_probe_gemm(const __grid_constant__ FmhaTensorMap a_map,
                     const __grid_constant__ FmhaTensorMap b_map, float* out) {
  extern __shared__ __align__(1024) char smem[];
  // The 128-byte swizzle pattern repeats every 1024 bytes and the descriptors assume tiles that
  // start on such a boundary; the dynamic allocation is only guaranteed 16-byte alignment.
  const unsigned a_smem = (fmha_smem_addr(smem) + 1023u) & ~1023u;
  const unsigned b_smem = a_smem + 64 * 128;
  const unsigned bar = b_smem + 64 * 128;
  const int tid = fmha_thread_idx();
  if (tid == 0) {
    fmha_tma_prefetch_map(a_map);
    fmha_tma_prefetch_map(b_map);
    fmha_mbarrier_init(bar, 1);
    fmha_mbarrier_init_fence();
  }
  fmha_sync_threads();
  if (tid == 0) {
    fmha_mbarrier_arrive_expect_tx(bar, 2 * 64 * 128);
    fmha_tma_load_2d(a_smem, a_map, bar, 0, 0);
    fmha_tma_load_2d(b_smem, b_map, bar, 0, 0);
  }
  fmha_mbarrier_wait(bar, 0);

  float d[32];
  fmha_wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) {
    // Along k inside a 128-byte swizzle atom the start address moves 32 bytes per k16 step; 8
    // rows of 128 bytes apart is the stride offset.
    const unsigned long long a_desc =
        fmha_wgmma_desc(a_smem + ks * 32, 16, 1024, kFmhaSwizzle128B);
    const unsigned long long b_desc =
        fmha_wgmma_desc(b_smem + ks * 32, 16, 1024, kFmhaSwizzle128B);
    FmhaWgmma<fmha_bf16, 64, 0>::ss(d, a_desc, b_desc, ks > 0);
  }
  fmha_wgmma_commit();
  fmha_wgmma_wait<0>();
  fmha_wgmma_fence_operands(d);

  const int warp = fmha_warp_id();
  const int lane = fmha_lane_id();
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int row = warp * 16 + lane / 4;
    const int col = j * 8 + (lane % 4) * 2;
    out[row * 64 + col] = d[4 * j];
    out[row * 64 + col + 1] = d[4 * j + 1];
    out[(row + 8) * 64 + col] = d[4 * j + 2];
    out[(row + 8) * 64 + col + 1] = d[4 * j + 3];
  }
}

// The P V shape of the forward: A [64 m][64 k] from registers (read out of its swizzled TMA tile
// in the mma.sync A-fragment layout), B [64 k][128 n] N-major (like V: two 64-column slabs of
// 128-byte rows), D = A B by four RS k16 steps with B transposed. lbo / sbo are the descriptor's
// byte offsets under test: between the two 64-column slabs, and between 8-row groups along k.
extern "C" __global__ void __launch_bounds__(128, 1)
fmha_sm90_probe_gemm_nmajor(const __grid_constant__ FmhaTensorMap a_map,
                            const __grid_constant__ FmhaTensorMap b_map, float* out, unsigned lbo,
                            unsigned sbo) {
  extern __shared__ __align__(1024) char smem[];
  const unsigned a_smem = (fmha_smem_addr(smem) + 1023u) & ~1023u;
  const unsigned b_smem = a_smem + 64 * 128;  // two slabs of 64 rows x 128 bytes
  const unsigned bar = b_smem + 2 * 64 * 128;
  const int tid = fmha_thread_idx();
  if (tid == 0) {
    fmha_mbarrier_init(bar, 1);
    fmha_mbarrier_init_fence();
  }
  fmha_sync_threads();
  if (tid == 0) {
    fmha_mbarrier_arrive_expect_tx(bar, 3 * 64 * 128);
    fmha_tma_load_2d(a_smem, a_map, bar, 0, 0);
    fmha_tma_load_2d(b_smem, b_map, bar, 0, 0);
    fmha_tma_load_2d(b_smem + 64 * 128, b_map, bar, 64, 0);
  }
  fmha_mbarrier_wait(bar, 0);

  const int warp = fmha_warp_id();
  const int lane = fmha_lane_id();
  // Element (r, k) of a 128-byte-swizzled tile: 16-byte chunk k / 8 of row r, XOR r % 8.
  auto a_word = [&](int r, int k) {
    unsigned v;
    asm volatile("ld.shared.b32 %0, [%1];\n"
                 : "=r"(v)
                 : "r"(a_smem + r * 128 + ((((k / 8) ^ (r & 7))) << 4) + (k % 8) * 2));
    return v;
  };
  unsigned a[4][4];
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) {
    const int r = warp * 16 + lane / 4;
    const int k = ks * 16 + (lane % 4) * 2;
    a[ks][0] = a_word(r, k);
    a[ks][1] = a_word(r + 8, k);
    a[ks][2] = a_word(r, k + 8);
    a[ks][3] = a_word(r + 8, k + 8);
  }
  float d[64];
  fmha_wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) {
    const unsigned long long b_desc =
        fmha_wgmma_desc(b_smem + ks * 16 * 128, lbo, sbo, kFmhaSwizzle128B);
    FmhaWgmma<fmha_bf16, 128, 1>::rs(d, a[ks], b_desc, ks > 0);
  }
  fmha_wgmma_commit();
  fmha_wgmma_wait<0>();
  fmha_wgmma_fence_operands(d);
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const int row = warp * 16 + lane / 4;
    const int col = j * 8 + (lane % 4) * 2;
    out[row * 128 + col] = d[4 * j];
    out[row * 128 + col + 1] = d[4 * j + 1];
    out[(row + 8) * 128 + col] = d[4 * j + 2];
    out[(row + 8) * 128 + col + 1] = d[4 * j + 3];
  }
}

// Every other wgmma instance once (its operand list must assemble), and the bulk store / reduce.
template <class E, int kN>
__device__ void fmha_sm90_probe_mma(float* out, unsigned smem, const unsigned (&a)[4]) {
  float d[kN / 2];
  const unsigned long long desc = fmha_wgmma_desc(smem, 16, 1024, kFmhaSwizzle128B);
  fmha_wgmma_fence();
  FmhaWgmma<E, kN, 0>::ss(d, desc, desc, 0);
  FmhaWgmma<E, kN, 1>::rs(d, a, desc, 1);
  fmha_wgmma_commit();
  fmha_wgmma_wait<0>();
  fmha_wgmma_fence_operands(d);
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) out[i * 128 + fmha_thread_idx()] = d[i];
}

extern "C" __global__ void __launch_bounds__(128, 1)
fmha_sm90_probe_instances(const __grid_constant__ FmhaTensorMap o_map,
                          const __grid_constant__ FmhaTensorMap dq_map, float* out) {
  extern __shared__ __align__(1024) char smem[];
  const unsigned base = fmha_smem_addr(smem);
  const unsigned a[4] = {base, base + 1, base + 2, base + 3};
  fmha_sm90_probe_mma<fmha_bf16, 128>(out, base, a);
  fmha_sm90_probe_mma<fmha_fp16, 64>(out + 8192, base, a);
  fmha_sm90_probe_mma<fmha_fp16, 128>(out + 16384, base, a);
  fmha_fence_proxy_async_shared();
  fmha_sync_threads();
  if (fmha_thread_idx() == 0) {
    fmha_tma_store_4d(o_map, base, 0, 0, 0, 0);
    fmha_tma_reduce_add_2d(dq_map, base, 0, 0);
    fmha_bulk_commit_group();
    fmha_bulk_wait_group_read<0>();
    fmha_bulk_wait_group<0>();
  }
}

// Two warps pass `rounds` rows of 32 words through two shared-memory slots, the pattern of the
// Hopper backward's producer publishing LSE, D and the query row to its consumers: the producer
// stores with st.shared and arrives on the slot's full barrier (32 arrivals); the consumer waits
// on it, loads, and after __syncwarp its lane 0 arrives on the slot's empty barrier, which the
// producer waits on before it stores into the slot again. by_barrier = 1 orders the same stores
// and loads with __syncthreads instead. out[lane] = the sum of what the consumer's lane read.
extern "C" __global__ void __launch_bounds__(64, 1)
fmha_sm90_probe_handoff(unsigned* out, int rounds, int by_barrier) {
  __shared__ __align__(16) unsigned slots[2][32];
  __shared__ __align__(8) unsigned long long bars[4];  // full[0], full[1], empty[0], empty[1]
  const unsigned slot0 = fmha_smem_addr(&slots[0][0]);
  const unsigned bar0 = fmha_smem_addr(&bars[0]);
  const int lane = fmha_lane_id(), warp = fmha_warp_id();
  if (fmha_thread_idx() == 0) {
    for (int s = 0; s < 2; ++s) {
      fmha_mbarrier_init(bar0 + 8 * s, 32);
      fmha_mbarrier_init(bar0 + 8 * (2 + s), 1);
    }
    fmha_mbarrier_init_fence();
  }
  fmha_sync_threads();
  unsigned sum = 0;
  for (int r = 0; r < rounds; ++r) {
    const int s = r % 2;
    const unsigned parity = (r / 2) & 1;
    const unsigned word = slot0 + (s * 32 + lane) * 4;
    if (by_barrier) {
      if (warp == 0) fmha_st_shared_b32(word, r * 32 + lane);
      fmha_sync_threads();
      if (warp == 1) sum += fmha_ld_shared_b32(word);
      fmha_sync_threads();
    } else if (warp == 0) {
      fmha_mbarrier_wait(bar0 + 8 * (2 + s), parity ^ 1u);
      fmha_st_shared_b32(word, r * 32 + lane);
      fmha_mbarrier_arrive(bar0 + 8 * s);
    } else {
      fmha_mbarrier_wait(bar0 + 8 * s, parity);
      sum += fmha_ld_shared_b32(word);
      __syncwarp();
      if (lane == 0) fmha_mbarrier_arrive(bar0 + 8 * (2 + s));
    }
  }
  if (warp == 1) out[lane] = sum;
}
)";

codegen::rtc::CompileOutput compile_sm90_probe(const std::string& arch) {
  const auto& set = codegen::TemplateSet::embedded();
  codegen::rtc::CompileRequest req;
  req.entry = {"fmha_sm90_probe.cu", kSm90ProbeSource};
  for (const auto* t : set.closure(kSm90ProbeSource)) req.headers.push_back({t->path, t->text});
  req.arch = arch;
  const auto& compiler = codegen::rtc::compiler_for(arch);
  req.options = compiler.options(small_config(Family::fwd, arch));
  return compiler.compile(req);
}

}  // namespace fmha_jit::test
