// Real NVRTC / hipRTC compiles through the pipeline; no GPU needed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>

#include "cache/disk_cache.hpp"
#include "cache/file_io.hpp"
#include "codegen/rtc/compiler.hpp"
#include "dispatcher/dispatcher.hpp"
#include "dispatcher/pipeline.hpp"
#include "fmha_jit/dispatcher.hpp"
#include "fmha_jit/error.hpp"
#include "kernels/resolve.hpp"
#include "kernels/wgmma_sm90a/tiles.hpp"
#include "support/test_support.hpp"

using namespace fmha_jit;
namespace fs = std::filesystem;

namespace {

bool is_elf(const std::vector<std::uint8_t>& b) {
  return b.size() > 64 && b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F';
}
int elf_machine(const std::vector<std::uint8_t>& b) { return b[18] | (b[19] << 8); }
constexpr int kEmCuda = 190;    // EM_CUDA: a cubin, not PTX text
constexpr int kEmAmdgpu = 224;  // EM_AMDGPU: a gfx code object

}  // namespace

TEST_CASE("rtc: NVRTC builds cubins for sm_80, sm_90 and sm_90a, fwd and bwd", "[rtc]") {
  test::TempDir tmp;
  for (const char* arch : {"sm_80", "sm_90", "sm_90a"}) {
    for (Family family : {Family::fwd, Family::bwd}) {
      INFO(arch << " " << to_string(family));
      auto config = test::small_config(family, arch);
      config.mask = MaskKind::causal_bottom_right;
      const auto got = dispatch::obtain_kernel(config, tmp.path());
      CHECK(got.source == BinarySource::compiled);
      const auto& k = *got.kernel;
      CHECK(is_elf(k.binary));
      CHECK(elf_machine(k.binary) == kEmCuda);
      const auto& m = k.manifest;
      CHECK(m.arch == arch);
      CHECK(m.compiler_id == "nvrtc");
      CHECK(m.binary_file == "kernel.cubin");
      // The ptxas report is parsed for every stage: registers used, nothing spilled.
      REQUIRE(m.resources.size() == m.kernel_symbols.size());
      for (const auto& r : m.resources) {
        INFO(r.symbol);
        CHECK(r.registers > 0);
        CHECK(r.spill_store_bytes == 0);
        CHECK(r.spill_load_bytes == 0);
        CHECK_FALSE(r.wgmma_serialized);
      }
      CHECK(fs::exists(cache::DiskCache(tmp.path()).entry_dir(k.key) / "source.cu"));
    }
  }
}

TEST_CASE("rtc: hipRTC builds a gfx90a code object", "[rtc]") {
  test::TempDir tmp;
  for (Family family : {Family::fwd, Family::bwd}) {
    const auto got = dispatch::obtain_kernel(test::small_config(family, "gfx90a"), tmp.path());
    CHECK(got.source == BinarySource::compiled);
    CHECK(is_elf(got.kernel->binary));
    CHECK(elf_machine(got.kernel->binary) == kEmAmdgpu);
    CHECK(got.kernel->manifest.compiler_id == "hiprtc");
    CHECK(got.kernel->manifest.binary_file == "kernel.hsaco");
  }
}

TEST_CASE("rtc: archs hipRTC would crash on never reach it", "[rtc]") {
  for (const char* arch : {"gfx942", "gfx1100", "gfx908", "sm_100"}) {
    INFO(arch);
    CHECK_THROWS_AS(codegen::rtc::compiler_for(arch), FieldError);
    auto config = test::small_config(Family::fwd, arch);
    const auto r = setup_fmha_dispatcher(config, {.cache_dir = fs::temp_directory_path()});
    CHECK_FALSE(r.success);
    CHECK(r.error_code == ErrorCode::invalid_config);
    CHECK_THAT(r.error, Catch::Contains("arch") && Catch::Contains("gfx90a"));
  }
  // Called directly with a bad arch, the hipRTC backend refuses before compiling.
  codegen::rtc::CompileRequest request;
  request.entry = {"x.cu", "extern \"C\" __global__ void k() {}"};
  request.arch = "gfx942";
  CHECK_THROWS_AS(codegen::rtc::hiprtc_compiler().compile(request), FieldError);
}

TEST_CASE("rtc: a compile error carries the log and the options", "[rtc]") {
  for (const char* arch : {"sm_90", "gfx90a"}) {
    INFO(arch);
    const auto& compiler = codegen::rtc::compiler_for(arch);
    codegen::rtc::CompileRequest request;
    request.entry = {"broken.cu", "extern \"C\" __global__ void k() { this is not C++; }\n"};
    request.arch = arch;
    request.options = compiler.options(test::small_config(Family::fwd, arch));
    try {
      compiler.compile(request);
      FAIL("compiled broken source");
    } catch (const CompileError& e) {
      CHECK_THAT(e.log(), Catch::Contains("error"));
      CHECK_THAT(e.what(), Catch::Contains("broken.cu"));
      CHECK(e.options() == request.options);
    }
  }
}

TEST_CASE("rtc: FMHA_JIT_LINEINFO=1 adds line tables under a key of their own", "[rtc]") {
  test::TempDir tmp;
  const auto config = test::small_config(Family::fwd, "sm_90");
  const auto& nvrtc = codegen::rtc::nvrtc_compiler();
  const auto plain = nvrtc.options(canonicalize(config));
  const auto base = setup_fmha_dispatcher(config, {.cache_dir = tmp.path(), .load = false});
  REQUIRE(base.success);
  ::setenv("FMHA_JIT_LINEINFO", "1", 1);
  dispatch::clear_memory_cache();  // a config set up once keeps its runner for the process
  const auto with_lines = nvrtc.options(canonicalize(config));
  const auto lined = setup_fmha_dispatcher(config, {.cache_dir = tmp.path(), .load = false});
  ::unsetenv("FMHA_JIT_LINEINFO");
  dispatch::clear_memory_cache();
  CHECK(std::count(plain.begin(), plain.end(), "-lineinfo") == 0);
  CHECK(std::count(with_lines.begin(), with_lines.end(), "-lineinfo") == 1);
  REQUIRE(lined.success);
  CHECK(lined.source == BinarySource::compiled);
  CHECK(lined.key != base.key);
}

TEST_CASE("rtc: disk hit after the in-process cache is dropped; memory hit before", "[rtc]") {
  test::TempDir tmp;
  const auto config = test::small_config(Family::fwd, "sm_90");
  const auto first = setup_fmha_dispatcher(config, {.cache_dir = tmp.path(), .load = false});
  REQUIRE(first.success);
  CHECK(first.source == BinarySource::compiled);
  const auto second = setup_fmha_dispatcher(config, {.cache_dir = tmp.path(), .load = false});
  CHECK(second.source == BinarySource::memory);
  CHECK(second.runner == first.runner);
  dispatch::clear_memory_cache();
  const auto third = setup_fmha_dispatcher(config, {.cache_dir = tmp.path(), .load = false});
  CHECK(third.source == BinarySource::disk);
  CHECK(third.key == first.key);
  CHECK(third.config == canonicalize(config));
}

TEST_CASE("rtc: a corrupt entry is rebuilt, not loaded", "[rtc]") {
  test::TempDir tmp;
  const auto config = test::small_config(Family::bwd, "sm_90");
  const auto first = dispatch::obtain_kernel(config, tmp.path());
  dispatch::clear_memory_cache();
  const auto dir = cache::DiskCache(tmp.path()).entry_dir(first.kernel->key);
  fs::resize_file(dir / "kernel.cubin", 100);
  const auto second = dispatch::obtain_kernel(config, tmp.path());
  CHECK(second.source == BinarySource::compiled);
  CHECK(second.kernel->binary == first.kernel->binary);
  dispatch::clear_memory_cache();
  CHECK(dispatch::obtain_kernel(config, tmp.path()).source == BinarySource::disk);
}

TEST_CASE("rtc: threads compile each key once, different keys concurrently", "[rtc]") {
  test::TempDir tmp;
  dispatch::clear_memory_cache();
  std::vector<FmhaKernelConfig> configs;
  for (Family family : {Family::fwd, Family::bwd}) {
    for (DType dtype : {DType::fp16, DType::bf16}) {
      auto c = test::small_config(family, "sm_90");
      c.dtype = dtype;
      c.hdim_q = c.hdim_v = 32;
      configs.push_back(c);
    }
  }
  std::atomic<int> compiled{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (std::size_t i = 0; i < configs.size(); ++i) {
        const auto& c = configs[(i + t) % configs.size()];
        if (dispatch::obtain_kernel(c, tmp.path()).source == BinarySource::compiled) ++compiled;
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(compiled == static_cast<int>(configs.size()));
}

TEST_CASE("rtc: no GPU needed for setup; the runner says why it cannot launch", "[rtc]") {
  if (gpu_available()) return;  // covered by the gpu suite there
  test::TempDir tmp;
  const auto r = setup_fmha_dispatcher(test::small_config(), {.cache_dir = tmp.path()});
  REQUIRE(r.success);
  REQUIRE(r.runner);
  CHECK_FALSE(r.runner->loaded());
  FmhaProblem p;
  p.hdim_q = p.hdim_v = 64;
  int dummy[64];
  FwdTensors t{dummy, dummy, dummy, dummy, nullptr};
  try {
    r.runner->run_fwd(p, t);
    FAIL("launched without a GPU");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::device_unavailable);
  }
}

namespace {

// Compiles every config on all cores (obtain_kernel is thread-safe; Catch's assertions are not,
// so the results are checked afterwards on this thread). Returns the manifests in config order.
std::vector<cache::Manifest> compile_all(const std::vector<FmhaKernelConfig>& configs,
                                         const fs::path& root) {
  std::vector<cache::Manifest> out(configs.size());
  std::vector<std::string> errors(configs.size());
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> threads;
  const unsigned n = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned t = 0; t < n; ++t) {
    threads.emplace_back([&] {
      for (std::size_t i; (i = next++) < configs.size();) {
        try {
          out[i] = dispatch::obtain_kernel(configs[i], root).kernel->manifest;
        } catch (const std::exception& e) {
          errors[i] = e.what();
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  for (std::size_t i = 0; i < configs.size(); ++i) {
    INFO(canonical_string(configs[i]));
    CHECK(errors[i] == "");
  }
  return out;
}

// Nothing spilled, and ptxas kept the wgmma pipeline: a kernel whose wgmma it serialised runs
// correctly at a fraction of its speed, which no gpu test notices (an N 64 Q K^T on a 128-key
// block once serialised the causal forwards at hdim 64 and 128; docs/METHOD.md, "Compile time").
void require_fast_kernel(const cache::Manifest& m) {
  for (const auto& r : m.resources) {
    INFO(r.symbol);
    CHECK(r.registers > 0);
    CHECK(r.registers <= 255);
    CHECK(r.spill_store_bytes == 0);
    CHECK(r.spill_load_bytes == 0);
    CHECK(r.stack_frame_bytes == 0);
    CHECK_FALSE(r.wgmma_serialized);
  }
}

}  // namespace

TEST_CASE("rtc: every shipped tensor-core backward compiles with 0 spills", "[rtc]") {
  // Register pressure depends on the arch's tile (sm_86 gets the 99 KB tiles, sm_80 one stage at
  // hdim 256), the head dims, the mask and the dQ mode; the dtype only changes the packing
  // instructions, so it is varied on sm_90 alone to keep this test within CI's budget.
  test::TempDir tmp;
  std::vector<FmhaKernelConfig> configs;
  for (const char* arch : {"sm_80", "sm_86", "sm_90"}) {
    for (auto [hq, hv] : test::head_dim_pairs()) {
      for (DType dtype : {DType::bf16, DType::fp16}) {
        if (dtype == DType::fp16 && std::string(arch) != "sm_90") continue;
        for (MaskKind mask : {MaskKind::none, MaskKind::causal_top_left,
                              MaskKind::causal_bottom_right, MaskKind::sliding_window}) {
          for (bool det : {false, true}) {
            FmhaKernelConfig c;
            c.family = Family::bwd;
            c.dtype = dtype;
            c.hdim_q = hq;
            c.hdim_v = hv;
            c.mask = mask;
            c.arch = arch;
            c.deterministic = det;
            c.impl = KernelImpl::mma_sm80;
            configs.push_back(c);
          }
        }
      }
    }
  }
  CHECK(configs.size() == 4 * 7 * 4 * 2);
  const auto manifests = compile_all(configs, tmp.path());
  for (std::size_t i = 0; i < configs.size(); ++i) {
    INFO(canonical_string(configs[i]));
    require_fast_kernel(manifests[i]);
  }
}

TEST_CASE("rtc: every shipped tensor-core forward compiles with 0 spills", "[rtc]") {
  test::TempDir tmp;
  std::vector<FmhaKernelConfig> configs;
  for (const char* arch : {"sm_80", "sm_90"}) {
    for (auto [hq, hv] : test::head_dim_pairs()) {
      for (DType dtype : {DType::fp16, DType::bf16}) {
        for (MaskKind mask : {MaskKind::none, MaskKind::causal_top_left,
                              MaskKind::causal_bottom_right, MaskKind::sliding_window}) {
          for (bool lse : {false, true}) {
            FmhaKernelConfig c;
            c.lse = lse;
            c.family = Family::fwd;
            c.dtype = dtype;
            c.hdim_q = hq;
            c.hdim_v = hv;
            c.mask = mask;
            c.arch = arch;
            c.impl = KernelImpl::mma_sm80;
            configs.push_back(c);
          }
        }
      }
    }
  }
  CHECK(configs.size() == 2 * 7 * 2 * 4 * 2);
  const auto manifests = compile_all(configs, tmp.path());
  for (std::size_t i = 0; i < configs.size(); ++i) {
    INFO(canonical_string(configs[i]));
    require_fast_kernel(manifests[i]);
  }
}

TEST_CASE("rtc: packed batches, sinks and softcap compile, both families, spills bounded",
          "[rtc]") {
  // Each modifier alone and all together, every mask, the shipped head dims of both dQ modes;
  // on sm_90 the forward resolves to wgmma_sm90a, the backward to mma_sm80 (wgmma_sm90a's
  // backward does not serve them yet). bf16 only: the dtype changes the packing instructions, not
  // the register budget.
  test::TempDir tmp;
  std::vector<FmhaKernelConfig> configs;
  struct Mods {
    bool varlen, sinks, softcap;
  };
  for (const char* arch : {"sm_80", "sm_90"}) {
    for (int hdim : {64, 128, 256}) {
      for (MaskKind mask : {MaskKind::none, MaskKind::causal_top_left,
                            MaskKind::causal_bottom_right, MaskKind::sliding_window}) {
        for (Mods m : {Mods{true, false, false}, Mods{false, true, false}, Mods{false, false, true},
                       Mods{true, false, true}, Mods{true, true, true}}) {
          for (int variant = 0; variant < 3; ++variant) {  // fwd, bwd, deterministic bwd
            FmhaKernelConfig c;
            c.family = variant == 0 ? Family::fwd : Family::bwd;
            c.deterministic = variant == 2;
            c.dtype = DType::bf16;
            c.hdim_q = c.hdim_v = hdim;
            c.mask = mask;
            c.arch = arch;
            c.varlen = m.varlen;
            c.sinks = m.sinks;
            c.softcap = m.softcap;
            configs.push_back(c);
          }
        }
      }
    }
  }
  const auto manifests = compile_all(configs, tmp.path());
  for (std::size_t i = 0; i < configs.size(); ++i) {
    INFO(canonical_string(configs[i]));
    const bool hopper = configs[i].family == Family::fwd && configs[i].arch == std::string("sm_90");
    CHECK(canonicalize(configs[i]).impl ==
          (hopper ? KernelImpl::wgmma_sm90a : KernelImpl::mma_sm80));
    // A packed batch keeps its sequence's offsets and lengths in registers where a dense one
    // reads them from the parameters, and the cap needs a few more: on the tiles that already use
    // every register (mma_sm80's backward at hdim 64 / 128, its forward at hdim 64, the Hopper
    // forward at hdim 256) that spills a little (docs/VARLEN.md, "Not done yet"). Bounded here, so
    // that it cannot grow unnoticed.
    for (const auto& r : manifests[i].resources) {
      INFO(r.symbol);
      CHECK(r.registers > 0);
      CHECK(r.registers <= 255);
      CHECK(r.spill_store_bytes <= 96);
      CHECK(r.spill_load_bytes <= 96);
      CHECK(r.stack_frame_bytes <= 96);
      CHECK_FALSE(r.wgmma_serialized);
    }
  }
}

namespace {

// Every dtype and mask of `family` at `hdims` for sm_90 (auto resolves them to wgmma_sm90a),
// both values of the family's own flag (the forward's LSE, the backward's deterministic mode),
// compiled; each must be wgmma_sm90a for sm_90a with 0 spills.
void require_hopper_kernels_fast(Family family) {
  test::TempDir tmp;
  std::vector<FmhaKernelConfig> configs;
  for (int hdim : kernels::wgmma_sm90a::served_hdims(family)) {
    for (DType dtype : {DType::fp16, DType::bf16}) {
      for (MaskKind mask : {MaskKind::none, MaskKind::causal_top_left,
                            MaskKind::causal_bottom_right, MaskKind::sliding_window}) {
        for (bool flag : {false, true}) {
          FmhaKernelConfig c;
          c.family = family;
          (family == Family::fwd ? c.lse : c.deterministic) = flag;
          c.dtype = dtype;
          c.hdim_q = c.hdim_v = hdim;
          c.mask = mask;
          c.arch = "sm_90";
          configs.push_back(c);
        }
      }
    }
  }
  // Short causal forwards run on a tile variant (kernels::problem_tile_variant): shipped too.
  for (std::size_t i = 0, n = configs.size(); i < n; ++i) {
    if (const auto v = kernels::problem_tile_variant(configs[i])) configs.push_back(v->config);
  }
  const auto manifests = compile_all(configs, tmp.path());
  for (std::size_t i = 0; i < configs.size(); ++i) {
    INFO(canonical_string(configs[i]));
    CHECK(canonicalize(configs[i]).impl == KernelImpl::wgmma_sm90a);
    CHECK(manifests[i].arch == "sm_90a");
    require_fast_kernel(manifests[i]);
  }
}

}  // namespace

TEST_CASE("rtc: every shipped Hopper forward compiles for sm_90a with 0 spills", "[rtc]") {
  // The consumers run at 240 registers after setmaxnreg; hdim 256 (O alone is 128 of them) is
  // the one that spilled at 232.
  require_hopper_kernels_fast(Family::fwd);
}

TEST_CASE("rtc: the Hopper forward with two consumer warpgroups at hdim 64 (128 rows)", "[rtc]") {
  // hdim 64 ships with 192 rows (three consumer warpgroups, covered by the shipped sweep above);
  // 128 rows stay accepted: 12 warps, 240 registers per consumer after setmaxnreg.
  test::TempDir tmp;
  std::vector<FmhaKernelConfig> configs;
  for (MaskKind mask : {MaskKind::none, MaskKind::causal_top_left, MaskKind::sliding_window}) {
    FmhaKernelConfig c;
    c.hdim_q = c.hdim_v = 64;
    c.mask = mask;
    c.block_m = 128;
    configs.push_back(c);
  }
  const auto manifests = compile_all(configs, tmp.path());
  for (std::size_t i = 0; i < configs.size(); ++i) {
    INFO(canonical_string(configs[i]));
    CHECK(canonicalize(configs[i]).num_warps == 12);
    require_fast_kernel(manifests[i]);
  }
}

TEST_CASE("rtc: every shipped Hopper backward compiles for sm_90a with 0 spills", "[rtc]") {
  // dK and dV stay in registers for the whole CTA beside S^T, dP^T, their 16-bit copies and dQ:
  // the consumers' 232 registers are the budget (at hdim 256 each warpgroup holds a head-dim
  // half of them, fmha_bwd_sm90a_hd256.h).
  require_hopper_kernels_fast(Family::bwd);
}
