// Unknown flags, commands and values on the fmha-jit command line: a non-zero exit and one message
// that names what was wrong and, where the set is closed, what is accepted.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "support/test_support.hpp"

using namespace fmha_jit;

TEST_CASE("cli misuse: unknown flags, commands and values are named in the error", "[cli]") {
  test::TempDir tmp;
  const std::string sweep = (tmp.path() / "sweep.json").string();
  std::ofstream(sweep) << R"({"family": "fwd", "impl": "reference", "arch": "sm_90"})";
  struct Case {
    std::string args;
    std::vector<std::string> says;
  };
  const std::vector<Case> cases = {
      {"", {"A command (one of: prebuild,", "is required"}},
      {"--bogus", {"not expected: --bogus"}},
      {"frobnicate", {"not expected: frobnicate"}},
      {"prebuild --frob " + sweep, {"not expected: --frob"}},
      {"prebuild --jobs 0 " + sweep, {"--jobs", "0", "1 to 1024"}},
      {"prebuild -j abc " + sweep, {"--jobs", "abc"}},
      {"run --dtype fp8", {"--dtype", "fp8", "fp16", "bf16"}},
      {"run --mask diagonal", {"mask = diagonal is not supported; accepted: none, causal"}},
      {"run --scale -1", {"scale = -1 is not supported; accepted: a finite positive number"}},
      {"run --layout hsbd", {"--layout", "hsbd", "bhsd", "bshd"}},
      {"bench --impl fast", {"--impl", "fast", "reference", "mma_sm80"}},
      {"run --hdim-q 4096", {"--hdim-q", "4096", "1 to 1024"}},
      {"verify --fix --bogus", {"not expected: --bogus"}},
      {"bench-jit --cold-rounds 0", {"--cold-rounds", "0", "1 to 100"}},
  };
  for (const auto& c : cases) {
    INFO("fmha-jit " << c.args);
    const auto r = test::run_command(std::string(FMHA_JIT_CLI) + " --cache-dir '" +
                                     (tmp.path() / "cache").string() + "' " + c.args + " 2>&1");
    INFO(r.output);
    CHECK(r.status != 0);
    for (const auto& s : c.says) CHECK_THAT(r.output, Catch::Contains(s));
    CHECK_THAT(r.output, !Catch::Contains("terminate called"));  // never an uncaught exception
  }
}

TEST_CASE("cli misuse: a prebuild file with an unsupported value or broken JSON names it",
          "[cli]") {
  test::TempDir tmp;
  const auto file = tmp.path() / "bad.json";
  const auto run = [&](const std::string& text) {
    std::ofstream(file) << text;
    return test::run_command(std::string(FMHA_JIT_CLI) + " prebuild --cache-dir '" +
                             (tmp.path() / "cache").string() + "' '" + file.string() + "' 2>&1");
  };
  // A point that is not supported is skipped with the reason; a file left with no valid point
  // has nothing to build, which is an error naming the file.
  auto r = run(R"({"family": "fwd", "dtype": "fp8", "arch": "sm_90", "impl": "reference"})");
  INFO(r.output);
  CHECK(r.status != 0);
  CHECK_THAT(r.output, Catch::Contains("dtype = \"fp8\" is not supported; accepted: fp16, bf16"));
  CHECK_THAT(r.output, Catch::Contains("error: ") && Catch::Contains(file.string()));
  r = run("{\"family\": ");
  INFO(r.output);
  CHECK(r.status != 0);
  CHECK_THAT(r.output, Catch::Contains(file.string()));
}

TEST_CASE("cli misuse: prebuild fails for a file with nothing to build; skipped points are counted",
          "[cli]") {
  test::TempDir tmp;
  const auto good = tmp.path() / "good.json", bad = tmp.path() / "bad.json",
             empty = tmp.path() / "empty.json", mixed = tmp.path() / "mixed.json";
  std::ofstream(good) << R"({"family": "fwd", "impl": "reference", "arch": "sm_90"})";
  // hdim 80 is no supported head dim: every point is skipped.
  std::ofstream(bad) << R"({"family": ["fwd", "bwd"], "hdim_q": 80, "hdim_v": 80})";
  std::ofstream(empty) << "[]";
  // One valid point and one skipped (hdim_v 64 with hdim_q 128 is no supported pair).
  std::ofstream(mixed) << R"({"family": "fwd", "impl": "reference", "arch": "sm_90",
                              "hdim_q": 128, "hdim_v": [128, 64]})";
  const auto prebuild = [&](const std::string& args) {
    return test::run_command(std::string(FMHA_JIT_CLI) + " prebuild --cache-dir '" +
                             (tmp.path() / "cache").string() + "' " + args + " 2>&1");
  };
  const auto quoted = [](const std::filesystem::path& f) { return "'" + f.string() + "'"; };
  for (const std::string dry : {"--dry-run ", ""}) {
    for (const auto& nothing : {bad, empty}) {
      INFO("prebuild " << dry << nothing.string());
      auto r = prebuild(dry + quoted(nothing));
      INFO(r.output);
      CHECK(r.status != 0);
      CHECK_THAT(r.output, Catch::Contains("error: ") && Catch::Contains(nothing.string()));
      CHECK_THAT(r.output, Catch::Contains("nothing to build"));
    }
  }
  // Listed with a file that has configs, the empty one still fails the run and is named; the
  // good file's kernel is still listed. (Dry runs only: a unit test compiles nothing.)
  auto r = prebuild("--dry-run " + quoted(good) + " " + quoted(bad));
  INFO(r.output);
  CHECK(r.status != 0);
  CHECK_THAT(r.output, Catch::Contains("fmha_fwd_") && Catch::Contains(bad.string()));
  CHECK_THAT(r.output, !Catch::Contains(good.string() + ":"));
  // Skipped points of a file that also has a valid one are counted, not an error.
  r = prebuild("--dry-run " + quoted(mixed));
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Catch::Contains("1 kernels would be built") && Catch::Contains("1 skipped"));
  r = prebuild("--dry-run --json " + quoted(mixed));
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK_THAT(r.output, Catch::Contains("\"skipped\": 1"));
}

TEST_CASE("cli misuse: an environment variable with a value not accepted fails every command",
          "[cli]") {
  test::TempDir tmp;
  const auto file = tmp.path() / "one.json";
  std::ofstream(file) << R"({"family": "fwd", "impl": "reference", "arch": "sm_90"})";
  struct Case {
    std::string variable, value;
    std::string accepted;  // a fragment of what the message says is accepted
  };
  const std::vector<Case> cases = {
      {"FMHA_JIT_LOCK_TIMEOUT_MS", "abc", "non-negative integer"},
      {"FMHA_JIT_LOCK_TIMEOUT_MS", "-5", "non-negative integer"},
      {"FMHA_JIT_LOCK_TIMEOUT_MS", "100ms", "non-negative integer"},
      {"FMHA_JIT_LOCK_TIMEOUT_MS", "99999999999999999999999", "at most"},
      {"FMHA_JIT_CACHE_MAX_BYTES", "garbage", "non-negative integer"},
      {"FMHA_JIT_CACHE_MAX_BYTES", "1e9", "non-negative integer"},
      {"FMHA_JIT_CACHE_MAX_BYTES", "18446744073709551616", "at most"},
      {"FMHA_JIT_DEVICE", "gpu", "none, cuda, hip"},
      {"FMHA_JIT_DEVICE", "CUDA", "none, cuda, hip"},
      {"FMHA_JIT_LINEINFO", "yes", "0, 1"},
      {"FMHA_JIT_LINEINFO", "2", "0, 1"},
      {"FMHA_JIT_ARCH", "sm_75", "sm_80"},
      {"FMHA_JIT_ARCH", "SM_90", "sm_90a"},
  };
  // arch seeks the GPU, list only reads the cache, a dry run keys a config.
  const std::vector<std::string> commands = {"arch", "list",
                                             "prebuild --dry-run '" + file.string() + "'"};
  for (const auto& c : cases) {
    for (const auto& command : commands) {
      INFO(c.variable << "=" << c.value << " fmha-jit " << command);
      const auto r =
          test::run_command(c.variable + "='" + c.value + "' " + FMHA_JIT_CLI + " --cache-dir '" +
                            (tmp.path() / "cache").string() + "' " + command + " 2>&1");
      INFO(r.output);
      CHECK(r.status == 1);
      CHECK_THAT(r.output, Catch::Contains("error: " + c.variable + " = " + c.value) &&
                               Catch::Contains(c.accepted));
      CHECK_THAT(r.output, !Catch::Contains("terminate called"));
    }
  }
  // Set but empty is the shell's way of unsetting: the default applies.
  const auto r = test::run_command(
      "FMHA_JIT_LOCK_TIMEOUT_MS= FMHA_JIT_ARCH= " + std::string(FMHA_JIT_CLI) + " arch 2>&1");
  INFO(r.output);
  CHECK(r.status == 0);
}
