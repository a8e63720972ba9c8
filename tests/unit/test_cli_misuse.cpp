// Unknown flags, commands and values on the fmha-jit command line: a non-zero exit and one message
// that names what was wrong and, where the set is closed, what is accepted.
#include <catch2/catch.hpp>

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
  // A sweep point that is not supported is skipped with the reason (prebuild's contract: the
  // other points still build), and a file left with no valid point is a warning.
  auto r = run(R"({"family": "fwd", "dtype": "fp8", "arch": "sm_90", "impl": "reference"})");
  INFO(r.output);
  CHECK_THAT(r.output, Catch::Contains("dtype = \"fp8\" is not supported; accepted: fp16, bf16"));
  CHECK_THAT(r.output, Catch::Contains("warning: no valid config in " + file.string()));
  r = run("{\"family\": ");
  INFO(r.output);
  CHECK(r.status != 0);
  CHECK_THAT(r.output, Catch::Contains(file.string()));
}
