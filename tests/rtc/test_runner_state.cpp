// What a runner keeps between calls, followed on a machine without a GPU through the device
// layer's test double (support/fake_device.hpp): a module per context and the SM count of the
// device a call runs on; scratch memory per stream, with one call's launches on a stream never
// interleaved with another's; and the deterministic backward's plan as a function of the problem
// alone, whatever shapes the process ran before. The kernels are compiled for real (NVRTC).
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "common/fmha_params.h"
#include "device/device_api.hpp"
#include "fmha_jit/dispatcher.hpp"
#include "support/fake_device.hpp"
#include "support/test_support.hpp"

using namespace fmha_jit;
using test::FakeDevice;

namespace {

FmhaKernelConfig hopper_config(Family family, MaskKind mask, bool deterministic) {
  FmhaKernelConfig c;
  c.family = family;
  c.dtype = DType::bf16;
  c.hdim_q = c.hdim_v = 128;
  c.mask = mask;
  c.deterministic = deterministic;
  c.impl = KernelImpl::wgmma_sm90a;
  c.arch = "sm_90";
  return c;
}

std::shared_ptr<FmhaRunner> setup_in(const FmhaKernelConfig& config, const test::TempDir& root) {
  SetupOptions options;
  options.cache_dir = root.path();
  const auto r = setup_fmha_dispatcher(config, options);
  INFO(r.error);
  REQUIRE(r.success);
  return r.runner;
}

FmhaFwdSm90Params fwd_params_of(const FakeDevice::Launch& launch) {
  REQUIRE(launch.params.size() == sizeof(FmhaFwdSm90Params));
  FmhaFwdSm90Params p;
  std::memcpy(static_cast<void*>(&p), launch.params.data(), sizeof p);
  return p;
}

FmhaBwdParams bwd_params_of(const FakeDevice::Launch& launch) {
  REQUIRE(launch.params.size() == sizeof(FmhaBwdSm90Params));
  FmhaBwdSm90Params p;
  std::memcpy(static_cast<void*>(&p), launch.params.data(), sizeof p);
  return p.bwd;
}

void* stream_handle(std::uintptr_t n) { return reinterpret_cast<void*>(n * 16); }

}  // namespace

TEST_CASE("runner: each context loads its own module and launches with its device's SM count",
          "[rtc]") {
  FakeDevice fake({{"sm_90", "fake H100 SXM", 132}, {"sm_90", "fake H100 PCIe", 114}});
  test::ScopedDeviceOverride scope(fake);
  test::TempDir root;
  auto runner = setup_in(hopper_config(Family::fwd, MaskKind::none, false), root);
  REQUIRE(fake.loads().size() == 1);
  CHECK(runner->loaded());
  fake.make_current(1);
  CHECK_FALSE(runner->loaded());  // loaded on GPU 0 only

  // 32 query tiles x 16 heads x 2: more tiles than either GPU has SMs, so the persistent grid is
  // one CTA per SM.
  const FmhaProblem p = test::sized_problem(2, 16, 16, 4096, 4096, 128);
  fake.make_current(0);
  runner->run_fwd(p, test::placeholder_fwd_tensors());
  fake.make_current(1);
  runner->run_fwd(p, test::placeholder_fwd_tensors());
  CHECK(runner->loaded());
  fake.make_current(0);

  const auto loads = fake.loads();
  REQUIRE(loads.size() == 2);
  CHECK(loads[1].gpu == 1);
  const auto launches = fake.launches();
  REQUIRE(launches.size() == 2);
  for (const auto& l : launches) {
    INFO("launch on GPU " << l.gpu);
    CHECK(fake.gpu_of_module(l.module) == l.gpu);
    CHECK(l.grid.x == (l.gpu == 0 ? 132u : 114u));
  }
}

TEST_CASE("runner: the backward's scratch is per stream, and calls on a stream do not interleave",
          "[rtc]") {
  FakeDevice fake({FakeDevice::Gpu{}});
  fake.record_param_bytes(sizeof(FmhaBwdSm90Params));
  test::ScopedDeviceOverride scope(fake);
  test::TempDir root;
  auto runner = setup_in(hopper_config(Family::bwd, MaskKind::none, true), root);
  const FmhaProblem p = test::sized_problem(1, 4, 2, 1000, 1000, 128);
  BwdTensors t = test::placeholder_bwd_tensors();  // workspace null: the runner's scratch

  // 4 threads share 2 streams.
  constexpr int kThreads = 4, kCallsPerThread = 25;
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      for (int n = 0; n < kCallsPerThread; ++n) runner->run_bwd(p, t, stream_handle(1 + i % 2));
    });
  }
  for (auto& th : threads) th.join();

  const auto launches = fake.launches();
  const std::size_t stages = launches.size() / (kThreads * kCallsPerThread);
  REQUIRE(launches.size() == stages * kThreads * kCallsPerThread);
  REQUIRE(stages >= 2);
  std::map<void*, std::vector<const FakeDevice::Launch*>> by_stream;
  for (const auto& l : launches) by_stream[l.stream].push_back(&l);
  REQUIRE(by_stream.size() == 2);
  std::map<void*, float*> rowsum_of_stream;
  for (const auto& [stream, list] : by_stream) {
    INFO("stream " << stream);
    REQUIRE(list.size() % stages == 0);
    // Each call's stages follow one another: stage i of every call is the same function as stage
    // i of the first.
    bool contiguous = true;
    for (std::size_t i = 0; i < list.size(); ++i) {
      contiguous = contiguous && list[i]->function == list[i % stages]->function;
    }
    CHECK(contiguous);
    // One scratch buffer per stream, reused by every call on it.
    const float* rowsum = bwd_params_of(*list.front()).d_rowsum;
    bool same = true;
    for (const auto* l : list) same = same && bwd_params_of(*l).d_rowsum == rowsum;
    CHECK(same);
    rowsum_of_stream[stream] = const_cast<float*>(rowsum);
  }
  CHECK(rowsum_of_stream.begin()->second != rowsum_of_stream.rbegin()->second);
}

TEST_CASE("runner: the deterministic backward's plan does not depend on the shapes run before",
          "[rtc]") {
  FakeDevice fake({FakeDevice::Gpu{}});
  fake.record_param_bytes(sizeof(FmhaBwdSm90Params));
  test::ScopedDeviceOverride scope(fake);
  const FmhaKernelConfig config = hopper_config(Family::bwd, MaskKind::causal_top_left, true);
  // 8 (kv head, batch) pairs of 68 key tiles: the plan alternates the chains' directions and
  // lets some ascending ones walk (bwd_causal_sections), unlike the order without a plan.
  const FmhaProblem shape = test::sized_problem(8, 4, 1, 8704, 8704, 128);
  BwdTensors t = test::placeholder_bwd_tensors();
  t.workspace = test::placeholder_workspace();
  t.workspace_bytes = std::size_t{1} << 40;

  // The plan a fresh process uses; each cache root has its own runner.
  test::TempDir fresh_root;
  auto fresh = setup_in(config, fresh_root);
  fresh->run_bwd(shape, t);
  const FmhaBwdParams want = bwd_params_of(fake.launches().back());
  REQUIRE(want.det_alternate == 1);

  // A runner that ran 200 other causal shapes first, as a resumed training run or a server has.
  test::TempDir busy_root;
  auto busy = setup_in(config, busy_root);
  for (int n = 0; n < 200; ++n) {
    busy->run_bwd(test::sized_problem(1, 2, 2, 64 + n, 64 + n, 128), t);
  }
  busy->run_bwd(shape, t);
  const FmhaBwdParams got = bwd_params_of(fake.launches().back());
  CHECK(got.det_group_heads == want.det_group_heads);
  CHECK(got.det_asc_pairs == want.det_asc_pairs);
  CHECK(got.det_tail_pairs == want.det_tail_pairs);
  CHECK(got.det_alternate == want.det_alternate);
  CHECK(got.det_asc_walk_up == want.det_asc_walk_up);
  CHECK(got.det_asc_walk_from == want.det_asc_walk_from);
  CHECK(got.det_up_cells == want.det_up_cells);
}

TEST_CASE(
    "runner: a forward runs in the caller's workspace, and a plan first needed inside a "
    "graph capture is left out",
    "[rtc]") {
  FakeDevice fake({FakeDevice::Gpu{}});
  fake.record_param_bytes(sizeof(FmhaFwdSm90Params));
  test::ScopedDeviceOverride scope(fake);
  test::TempDir root;
  // 64 query tiles x 32 heads = 2048 tiles: the last round on 132 SMs is split by keys, in a
  // zero-filled workspace.
  const FmhaProblem p = test::sized_problem(1, 32, 32, 8192, 8192, 128);
  auto runner = setup_in(hopper_config(Family::fwd, MaskKind::none, false), root);
  const std::size_t need = runner->fwd_workspace_bytes(p);
  REQUIRE(need > 0);
  FmhaProblem other_hdim = p;
  other_hdim.hdim_q = other_hdim.hdim_v = 64;
  CHECK_THROWS_WITH(runner->fwd_workspace_bytes(other_hdim), Catch::Contains("hdim"));
  const std::size_t allocated = fake.allocations();
  std::vector<std::uint8_t> memory(need + 512);
  auto* workspace = reinterpret_cast<std::uint8_t*>(
      (reinterpret_cast<std::uintptr_t>(memory.data()) + 255) / 256 * 256);
  FwdTensors t = test::placeholder_fwd_tensors();
  t.workspace = workspace;
  t.workspace_bytes = need;
  runner->run_fwd(p, t);
  CHECK(fake.allocations() == allocated);  // nothing of the runner's own
  const FmhaFwdSm90Params used = fwd_params_of(fake.launches().back());
  REQUIRE(used.split_tiles > 0);
  const auto in_workspace = [&](const void* ptr) {
    const auto* b = static_cast<const std::uint8_t*>(ptr);
    return b >= workspace && b < workspace + need;
  };
  CHECK(in_workspace(used.split_counters));
  CHECK(in_workspace(used.split_partials));

  t.workspace_bytes = need - 1;
  CHECK_THROWS_WITH(runner->run_fwd(p, t),
                    Catch::Contains("workspace_bytes") && Catch::Contains(std::to_string(need)));
  t.workspace = workspace + 16;
  t.workspace_bytes = need;
  CHECK_THROWS_WITH(runner->run_fwd(p, t), Catch::Contains("aligned to 256 bytes"));
  runner->run_fwd(p, test::placeholder_fwd_tensors());  // without one: the runner's scratch
  CHECK(fake.allocations() == allocated + 1);

  // The causal forward uploads its tile plan on a shape's first call, unless the stream is being
  // captured: then it runs in the static order and allocates nothing.
  auto causal = setup_in(hopper_config(Family::fwd, MaskKind::causal_bottom_right, false), root);
  fake.set_capturing(true);
  causal->run_fwd(p, test::placeholder_fwd_tensors());
  CHECK(fwd_params_of(fake.launches().back()).tile_order == nullptr);
  CHECK(fake.allocations() == allocated + 1);
  fake.set_capturing(false);
  causal->run_fwd(p, test::placeholder_fwd_tensors());
  CHECK(fwd_params_of(fake.launches().back()).tile_order != nullptr);
  CHECK(fake.allocations() == allocated + 2);
}
