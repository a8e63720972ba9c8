// Several processes prebuild the same kernels into one empty cache at once: each key must be
// compiled by exactly one of them, every process must succeed, and all must load the same bytes.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "cache/disk_cache.hpp"
#include "support/test_support.hpp"

using namespace fmha_jit;

namespace {

// Small reference kernels so the test is about the cache, not the compiler.
const char* kSweep = R"({
  "family": ["fwd", "bwd"],
  "dtype": ["fp16", "bf16"],
  "hdim_q": [32, 64],
  "hdim_v": [32, 64],
  "mask": ["none", "causal"],
  "arch": "sm_90",
  "impl": "reference"
})";

}  // namespace

TEST_CASE("stress: 8 processes prebuilding one config set into one empty cache", "[stress]") {
  test::TempDir tmp;
  const auto sweep = tmp.path() / "sweep.json";
  std::ofstream(sweep) << kSweep;
  const auto cache_dir = tmp.path() / "cache";

  constexpr int kProcesses = 8;
  std::vector<test::CommandResult> results(kProcesses);
  std::vector<std::thread> launchers;
  for (int i = 0; i < kProcesses; ++i) {
    launchers.emplace_back([&, i] {
      results[i] =
          test::run_command(std::string(FMHA_JIT_CLI) + " prebuild --json -j 2 --cache-dir '" +
                            cache_dir.string() + "' '" + sweep.string() + "' 2>/dev/null");
    });
  }
  for (auto& t : launchers) t.join();

  std::map<std::string, int> compiles;                // key -> processes that compiled it
  std::map<std::string, std::set<std::string>> seen;  // key -> binary checksums loaded
  for (int i = 0; i < kProcesses; ++i) {
    INFO("process " << i << " output: " << results[i].output);
    REQUIRE(results[i].status == 0);
    const auto report = nlohmann::json::parse(results[i].output);
    CHECK(report.at("failed") == 0);
    for (const auto& k : report.at("kernels")) {
      const std::string key = k.at("key");
      compiles[key] += k.at("source") == "compiled" ? 1 : 0;
      seen[key].insert(k.at("binary_xxh3").get<std::string>());
    }
  }
  REQUIRE(compiles.size() == 8 * 2);  // 2 families x 2 dtypes x 2 hdims x 2 masks
  for (const auto& [key, n] : compiles) {
    INFO(key);
    CHECK(n == 1);
    CHECK(seen[key].size() == 1);
  }
  cache::DiskCache cache(cache_dir);
  const auto report = cache.verify(false);
  CHECK(report.ok == 16);
  CHECK(report.bad == 0);
}
