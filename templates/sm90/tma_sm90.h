// Bulk tensor copies (TMA, sm_90) between global memory and shared memory, described by tensor
// maps that the host encodes through the driver (cuTensorMapEncodeTiled) and passes by value as
// __grid_constant__ kernel parameters. Loads complete on an mbarrier (mbarrier_sm90.h); stores
// and reductions complete in bulk groups of the issuing thread.
#pragma once

#include "common/fmha_params.h"
#include "common/platform.h"

// The generic address of a tensor map parameter, the form the copy instructions take.
FMHA_DEVICE unsigned long long fmha_tensor_map_addr(const FmhaTensorMap& map) {
  return reinterpret_cast<unsigned long long>(&map);
}

// Pulls the tensor map into the copy engine's cache ahead of the first copy that uses it.
FMHA_DEVICE void fmha_tma_prefetch_map(const FmhaTensorMap& map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(fmha_tensor_map_addr(map)) : "memory");
}

// Box of a 2-D map at element coordinates (c0 innermost, c1) into shared memory at `dst`; the
// bytes are counted down on barrier `bar`. Out-of-range elements are filled with zeros.
FMHA_DEVICE void fmha_tma_load_2d(unsigned dst, const FmhaTensorMap& map, unsigned bar, int c0,
                                  int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];\n" ::"r"(dst),
      "l"(fmha_tensor_map_addr(map)), "r"(bar), "r"(c0), "r"(c1)
      : "memory");
}

// The same for a 4-D map (c0 innermost: head dim, sequence, head, batch).
FMHA_DEVICE void fmha_tma_load_4d(unsigned dst, const FmhaTensorMap& map, unsigned bar, int c0,
                                  int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6}], [%2];\n" ::"r"(dst),
      "l"(fmha_tensor_map_addr(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}

// Shared memory at `src` into the box of a 4-D map; elements outside the tensor are not written.
FMHA_DEVICE void fmha_tma_store_4d(const FmhaTensorMap& map, unsigned src, int c0, int c1, int c2,
                                   int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(
          fmha_tensor_map_addr(map)),
      "r"(src), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}

// fp32 reduce-add of shared memory at `src` into the box of a 3-D map (the backward's dQ
// accumulators: head dim, query row, batch x head); elements outside the tensor are skipped.
FMHA_DEVICE void fmha_tma_reduce_add_3d(const FmhaTensorMap& map, unsigned src, int c0, int c1,
                                        int c2) {
  asm volatile(
      "cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.bulk_group [%0, {%2, %3, %4}], "
      "[%1];\n" ::"l"(fmha_tensor_map_addr(map)),
      "r"(src), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

// fp32 reduce-add of shared memory at `src` into the box of a 2-D map.
FMHA_DEVICE void fmha_tma_reduce_add_2d(const FmhaTensorMap& map, unsigned src, int c0, int c1) {
  asm volatile(
      "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.bulk_group [%0, {%2, %3}], [%1];\n" ::
          "l"(fmha_tensor_map_addr(map)),
      "r"(src), "r"(c0), "r"(c1)
      : "memory");
}

FMHA_DEVICE void fmha_bulk_commit_group() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}

// Waits until at most kPending bulk groups of this thread still read their shared memory (the
// source may be overwritten then; the global writes may still be in flight).
template <int kPending>
FMHA_DEVICE void fmha_bulk_wait_group_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(kPending) : "memory");
}

// Waits until at most kPending bulk groups of this thread are incomplete (writes done).
template <int kPending>
FMHA_DEVICE void fmha_bulk_wait_group() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// Makes this thread's ordinary shared-memory stores visible to the async proxy (bulk copies and
// wgmma read shared memory through it): each writing thread fences before the CTA barrier that
// precedes the copy or the MMA.
FMHA_DEVICE void fmha_fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// The same between this thread's generic accesses to global memory and its bulk copies there:
// after acquiring a semaphore (generic load) and before the reduction it orders (async proxy).
FMHA_DEVICE void fmha_fence_proxy_async_global() {
  asm volatile("fence.proxy.async.global;\n" ::: "memory");
}
