// API misuse is refused before anything reaches a GPU, with a typed error whose message names the
// field, the value and what is accepted. These checks run on the host, so this suite covers them
// on machines without a GPU; tests/gpu repeats some with real device pointers.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "fmha_jit/dispatcher.hpp"
#include "fmha_jit/error.hpp"
#include "support/test_support.hpp"

using namespace fmha_jit;
namespace fs = std::filesystem;

namespace {

// Host memory standing in for device pointers: nothing is dereferenced before the checks throw.
alignas(256) unsigned char g_memory[1 << 16];
void* at(std::size_t offset) { return g_memory + offset; }

FmhaProblem problem64() {
  FmhaProblem p;
  p.batch = 1;
  p.nhead_q = p.nhead_k = 2;
  p.seqlen_q = p.seqlen_k = 16;
  p.hdim_q = p.hdim_v = 64;
  return p;
}

template <class F>
void expect_field_error(F&& call, ErrorCode code, const std::string& field,
                        const std::string& value, const std::string& accepted) {
  try {
    call();
    FAIL("accepted a bad " << field);
  } catch (const FieldError& e) {
    CHECK(e.code() == code);
    CHECK(e.field() == field);
    CHECK(e.value() == value);
    CHECK_THAT(e.accepted(), Catch::Contains(accepted));
    // The one-line message carries all three.
    CHECK_THAT(std::string(e.what()), Catch::StartsWith(field + " = " + value) &&
                                          Catch::Contains("accepted: " + e.accepted()));
  }
}

}  // namespace

TEST_CASE("api misuse: problems the kernel cannot run, with field, value and accepted", "[rtc]") {
  test::TempDir tmp;
  const auto r = setup_fmha_dispatcher(test::small_config(), {.cache_dir = tmp.path()});
  REQUIRE(r.success);
  FmhaRunner& runner = *r.runner;
  const FwdTensors t{at(0), at(0), at(0), at(0), nullptr};
  auto p = problem64();
  p.hdim_q = p.hdim_v = 128;
  expect_field_error([&] { runner.run_fwd(p, t); }, ErrorCode::invalid_problem, "hdim_q", "128",
                     "64 (the kernel's hdim_q)");
  p = problem64();
  p.hdim_v = 32;
  expect_field_error([&] { runner.check(p); }, ErrorCode::invalid_problem, "hdim_v", "32", "64");
  p = problem64();
  p.window_left = 8;  // the kernel has no sliding-window mask
  expect_field_error([&] { runner.run_fwd(p, t); }, ErrorCode::invalid_problem, "window_left", "8",
                     "window sizes need mask sliding_window");
  p = problem64();
  p.nhead_k = 3;
  expect_field_error([&] { runner.run_fwd(p, t); }, ErrorCode::invalid_problem, "nhead_k", "3",
                     "a divisor of nhead_q = 2");
  p = problem64();
  p.seqlen_k = 0;
  expect_field_error([&] { runner.run_fwd(p, t); }, ErrorCode::invalid_problem, "seqlen_k", "0",
                     "1 .. ");
  p = problem64();
  p.scale = -1.0f;
  expect_field_error([&] { runner.run_fwd(p, t); }, ErrorCode::invalid_problem, "scale",
                     std::to_string(-1.0f), "a finite positive number");
  // A backward call on a forward kernel.
  expect_field_error([&] { runner.run_bwd(problem64(), BwdTensors{}); },
                     ErrorCode::invalid_argument, "family", "fwd", "bwd");
}

TEST_CASE("api misuse: null or misaligned pointers and bad strides", "[rtc]") {
  test::TempDir tmp;
  const auto r = setup_fmha_dispatcher(test::small_config(), {.cache_dir = tmp.path()});
  REQUIRE(r.success);
  FmhaRunner& runner = *r.runner;
  const auto p = problem64();
  const FwdTensors good{at(0), at(0), at(0), at(0), static_cast<float*>(at(0))};
  FwdTensors t = good;
  t.q = nullptr;
  expect_field_error([&] { runner.run_fwd(p, t); }, ErrorCode::invalid_argument, "q", "null",
                     "a device pointer");
  t = good;
  t.o = nullptr;
  expect_field_error([&] { runner.run_fwd(p, t); }, ErrorCode::invalid_argument, "o", "null",
                     "a device pointer");
  t = good;
  t.k = at(1);  // odd address: not even aligned to one bf16 element
  expect_field_error([&] { runner.run_fwd(p, t); }, ErrorCode::invalid_argument, "k",
                     std::to_string(reinterpret_cast<std::uintptr_t>(at(1))), "aligned to");
  t = good;
  t.lse = reinterpret_cast<float*>(at(2));
  expect_field_error([&] { runner.run_fwd(p, t); }, ErrorCode::invalid_argument, "lse",
                     std::to_string(reinterpret_cast<std::uintptr_t>(at(2))),
                     "a pointer aligned to 4 bytes");
  auto strided = p;
  strided.v_strides = TensorStrides{-1, 64, 64};
  expect_field_error([&] { runner.run_fwd(strided, good); }, ErrorCode::invalid_argument,
                     "v batch stride", "-1", "a non-negative multiple of");
}

TEST_CASE("api misuse: backward workspace too small or misaligned, missing lse", "[rtc]") {
  test::TempDir tmp;
  const auto r = setup_fmha_dispatcher(test::small_config(Family::bwd), {.cache_dir = tmp.path()});
  REQUIRE(r.success);
  FmhaRunner& runner = *r.runner;
  const auto p = problem64();
  const std::size_t need = runner.bwd_workspace_bytes(p);
  REQUIRE(need > 0);
  REQUIRE(need + 512 <= sizeof g_memory);
  const BwdTensors good{at(0), at(0), at(0), at(0), static_cast<const float*>(at(0)), at(0), at(0),
                        at(0), at(0), at(0), need};
  BwdTensors t = good;
  t.workspace_bytes = need - 1;
  expect_field_error([&] { runner.run_bwd(p, t); }, ErrorCode::invalid_argument, "workspace_bytes",
                     std::to_string(need - 1), ">= " + std::to_string(need));
  t = good;
  t.workspace = at(128);
  expect_field_error([&] { runner.run_bwd(p, t); }, ErrorCode::invalid_argument, "workspace",
                     std::to_string(reinterpret_cast<std::uintptr_t>(at(128))),
                     "aligned to 256 bytes");
  t = good;
  t.lse = nullptr;  // the backward always reads the forward's LSE
  expect_field_error([&] { runner.run_bwd(p, t); }, ErrorCode::invalid_argument, "lse", "null",
                     "a device pointer");
  t = good;
  t.d_q = nullptr;
  expect_field_error([&] { runner.run_bwd(p, t); }, ErrorCode::invalid_argument, "d_q", "null",
                     "a device pointer");
}

TEST_CASE("api misuse: a correct launch without a GPU is a device_unavailable error", "[rtc]") {
  if (gpu_available()) return;  // the gpu suite launches for real there
  test::TempDir tmp;
  const auto r = setup_fmha_dispatcher(test::small_config(), {.cache_dir = tmp.path()});
  REQUIRE(r.success);
  try {
    r.runner->run_fwd(problem64(), FwdTensors{at(0), at(0), at(0), at(0), nullptr});
    FAIL("launched without a GPU");
  } catch (const Error& e) {
    CHECK(e.code() == ErrorCode::device_unavailable);
    CHECK_THAT(std::string(e.what()), Catch::Contains("needs a GPU"));
  }
}

TEST_CASE("api misuse: runner_for checks the problem before it compiles the tile variant",
          "[rtc]") {
  // Works without a GPU: the variant is compiled and cached, and loaded only where a GPU exists.
  test::TempDir tmp;
  FmhaKernelConfig c;
  c.arch = "sm_90";
  c.hdim_q = c.hdim_v = 256;
  c.mask = MaskKind::causal_top_left;
  const auto r = setup_fmha_dispatcher(c, {.cache_dir = tmp.path(), .load = false});
  REQUIRE(r.success);
  FmhaProblem p = problem64();  // 16 x 16: a short causal problem, at the wrong hdim
  expect_field_error([&] { r.runner->runner_for(p); }, ErrorCode::invalid_problem, "hdim_q", "64",
                     "256 (the kernel's hdim_q)");
  std::size_t entries = 0;
  for (const auto& e : fs::recursive_directory_iterator(tmp.path())) {
    entries += e.path().filename() == "manifest.json";
  }
  CHECK(entries == 1);  // the config's own kernel only
  p.hdim_q = p.hdim_v = 256;
  FmhaRunner& variant = r.runner->runner_for(p);
  CHECK(&variant != r.runner.get());
  CHECK(variant.config().block_n == 64);
  CHECK(variant.key() != r.key);
  CHECK(fs::exists(tmp.path() / "v1" / "entries" / variant.key().substr(0, 2) / variant.key()));
  p.seqlen_q = p.seqlen_k = 4096;
  CHECK(&r.runner->runner_for(p) == r.runner.get());
}

TEST_CASE("api misuse: an environment variable with a value not accepted fails setup", "[rtc]") {
  test::TempDir tmp;
  struct Case {
    const char* variable;
    const char* value;
  };
  for (const Case c : {Case{"FMHA_JIT_LOCK_TIMEOUT_MS", "abc"},
                       Case{"FMHA_JIT_CACHE_MAX_BYTES", "1GB"}, Case{"FMHA_JIT_LINEINFO", "true"},
                       Case{"FMHA_JIT_ARCH", "sm_100"}, Case{"FMHA_JIT_DEVICE", "nvidia"}}) {
    INFO(c.variable << "=" << c.value);
    ::setenv(c.variable, c.value, 1);
    const auto r = setup_fmha_dispatcher(test::small_config(),
                                         {.cache_dir = tmp.path() / "cache", .load = false});
    ::unsetenv(c.variable);
    CHECK_FALSE(r.success);
    CHECK_FALSE(r.runner);
    CHECK(r.error_code == ErrorCode::invalid_argument);
    CHECK_THAT(r.error, Catch::StartsWith(std::string(c.variable) + " = " + c.value) &&
                            Catch::Contains("accepted: "));
  }
  // Nothing was compiled or stored on the way to those errors.
  CHECK_FALSE(fs::exists(tmp.path() / "cache"));
}
