// Packed variable-length batches, sinks and the softcap on the fmha-jit command line (`run`,
// `bench`), without a GPU: what the flags are checked against, the input files of a packed batch,
// the device message a run that passed every check ends in, and bench's FLOP count.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "support/test_support.hpp"
#include "tools/npy/npy.hpp"

using namespace fmha_jit;

namespace {

// Runs fmha-jit with every GPU hidden, so that a run that passes its checks ends in the device
// message on any machine.
test::CommandResult fmha_jit_cli(const test::TempDir& tmp, const std::string& args,
                                 bool merge_stderr = true) {
  return test::run_command("FMHA_JIT_DEVICE=none " + std::string(FMHA_JIT_CLI) + " --cache-dir '" +
                           (tmp.path() / "cache").string() + "' " + args +
                           (merge_stderr ? " 2>&1" : " 2>/dev/null"));
}

// The "flops" of bench's one --dry-run row for these flags.
double dry_run_flops(const test::TempDir& tmp, const std::string& flags) {
  const auto r = fmha_jit_cli(tmp, "bench --dry-run --json --arch sm_80 " + flags, false);
  INFO("bench " << flags << "\n" << r.output);
  REQUIRE(r.status == 0);
  const auto rows = nlohmann::json::parse(r.output);
  REQUIRE(rows.size() == 1);
  return rows[0].at("flops").get<double>();
}

}  // namespace

TEST_CASE("cli varlen: bad lengths, conflicting sizes and bad softcaps are named", "[cli]") {
  test::TempDir tmp;
  struct Case {
    std::string args;
    std::vector<std::string> says;
  };
  const std::string accepted = "accepted: comma-separated sequence lengths";
  const std::vector<Case> cases = {
      {"run --seqlens-q 100,2000,17 --seqlens-k 1,2",
       {"--seqlens-k = 1,2 has 2 lengths but --seqlens-q = 100,2000,17 has 3",
        "accepted: one key length per query length"}},
      {"bench --seqlens-q 4 --seqlens-k 4,4", {"--seqlens-k = 4,4 has 2 lengths", "has 1"}},
      {"run --seqlens-q 100,-3", {"--seqlens-q", "seqlens_q = 100,-3", "entry 2", accepted}},
      {"run --seqlens-q 5 --seqlens-k -1", {"--seqlens-k", "seqlens_k = -1", accepted}},
      {"run --seqlens-q abc", {"--seqlens-q", "seqlens_q = abc", "entry 1", accepted}},
      {"bench --seqlens-q 1.5,2", {"--seqlens-q", "seqlens_q = 1.5,2", accepted}},
      {"run --seqlens-q 100,,17", {"--seqlens-q", "entry 2 is empty", accepted}},
      {"run --seqlens-q 100,", {"--seqlens-q", "entry 2 is empty", accepted}},
      {"run --seqlens-q ''", {"--seqlens-q", "the list is empty", accepted}},
      {"run --seqlens-q 2147483648", {"--seqlens-q", "entry 1", accepted}},
      {"run --seqlens-q 2147483647,1", {"--seqlens-q", "int32", accepted}},
      {"run --seqlens-q 100,200 --batch 2", {"--seqlens-q and --batch conflict", "either"}},
      {"bench --batch 2 --seqlens-q 100,200", {"--seqlens-q and --batch conflict"}},
      {"run --seqlens-q 100 --seqlen-q 64", {"--seqlens-q and --seqlen-q conflict"}},
      {"run --seqlens-q 1 --seqlens-k 1 --seqlen-k 64", {"--seqlens-q and --seqlen-k conflict"}},
      {"run --seqlens-k 100", {"--seqlens-k", "without --seqlens-q"}},
      {"run --softcap 0", {"--softcap", "softcap = 0 is not supported", "finite positive"}},
      {"run --softcap -1", {"--softcap", "softcap = -1 is not supported", "finite positive"}},
      {"bench --softcap nan", {"--softcap", "softcap = nan is not supported", "finite positive"}},
      {"run --softcap inf", {"--softcap", "softcap = inf is not supported"}},
      {"run --softcap 1e39", {"--softcap", "softcap = 1e39 is not supported"}},
      {"run --softcap 30x", {"--softcap", "softcap = 30x is not supported"}},
  };
  for (const auto& c : cases) {
    INFO("fmha-jit " << c.args);
    const auto r = fmha_jit_cli(tmp, c.args);
    INFO(r.output);
    CHECK(r.status != 0);
    for (const auto& s : c.says) CHECK_THAT(r.output, Catch::Contains(s));
    CHECK_THAT(r.output, !Catch::Contains("terminate called"));
    CHECK_THAT(r.output, !Catch::Contains("needs a GPU"));  // refused before the GPU is asked for
  }
}

TEST_CASE("cli varlen: a packed run with sinks and a softcap passes every check, then needs a GPU",
          "[cli]") {
  test::TempDir tmp;
  const std::string common = "run --arch sm_80 --hdim-q 64 --nhead-q 4 --nhead-k 2 --verify ";
  const auto dense = fmha_jit_cli(tmp, common + "--batch 3 --seqlen-q 100");
  INFO(dense.output);
  REQUIRE(dense.status == 1);
  REQUIRE_THAT(dense.output, Catch::Contains("fmha-jit run needs a GPU, and none is usable"));
  for (const std::string flags :
       {"--seqlens-q 100,2000,17 --sinks --softcap 30",
        "--seqlens-q 100,0,17 --seqlens-k 0,5,9 --sinks --softcap 0.5 --mask causal --layout bshd",
        "--family bwd --seqlens-q 3,0 --sinks --softcap 30 --mask window:8,0 --deterministic",
        "--family bwd --seqlens-q 0,0 --softcap 30"}) {
    INFO(flags);
    const auto r = fmha_jit_cli(tmp, common + flags);
    INFO(r.output);
    CHECK(r.status == dense.status);
    CHECK(r.output == dense.output);
  }
}

TEST_CASE("cli varlen: run --inputs reads the packed shapes and checks the batch's files",
          "[cli]") {
  test::TempDir tmp;
  const auto in = tmp.path() / "in";
  std::filesystem::create_directories(in);
  // 2 sequences: 3 + 5 = 8 query rows, 4 + 2 = 6 key rows; Hq 4, Hk 2, D 64; bshd.
  const auto write = [&](const std::string& name, std::vector<std::int64_t> shape) {
    std::vector<float> data(static_cast<std::size_t>(npy::element_count(shape)), 0.5f);
    npy::write_npy(in / name, shape, data);
  };
  const std::string served =
      "run --arch sm_80 --hdim-q 64 --nhead-q 4 --nhead-k 2 --layout bshd "
      "--seqlens-q 3,5 --seqlens-k 4,2 --inputs '" +
      in.string() + "' ";
  write("q.npy", {8, 4, 64});
  write("k.npy", {6, 2, 64});
  write("v.npy", {2, 6, 64});  // bhsd's order: named with the expected shape
  auto r = fmha_jit_cli(tmp, served);
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Catch::Contains("v.npy: shape (2, 6, 64) does not match the flags: "
                                       "expected (total_k, Hk, Dv) = (6, 2, 64)"));
  write("v.npy", {6, 2, 64});
  r = fmha_jit_cli(tmp, served);
  INFO(r.output);
  CHECK_THAT(r.output, Catch::Contains("needs a GPU"));

  // --sinks reads sinks.npy: missing, then of the wrong length, then right.
  r = fmha_jit_cli(tmp, served + "--sinks");
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Catch::Contains("no sinks.npy") && Catch::Contains("(Hq,) = (4)"));
  write("sinks.npy", {2});
  r = fmha_jit_cli(tmp, served + "--sinks");
  INFO(r.output);
  CHECK_THAT(r.output, Catch::Contains("sinks.npy: shape (2) does not match"));
  write("sinks.npy", {4});
  r = fmha_jit_cli(tmp, served + "--sinks");
  INFO(r.output);
  CHECK_THAT(r.output, Catch::Contains("needs a GPU"));

  // cu_seqlens files beside the inputs must be the flags' batch, and int32.
  const std::vector<std::int64_t> cu_shape{3};
  const std::vector<std::int32_t> good{0, 4, 6}, other{0, 2, 6};
  npy::write_npy(in / "cu_seqlens_k.npy", cu_shape, std::span<const std::int32_t>(other));
  r = fmha_jit_cli(tmp, served);
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Catch::Contains("cu_seqlens_k.npy: [0, 2, 6] is not the batch of the "
                                       "flags; accepted: [0, 4, 6]"));
  npy::write_npy(in / "cu_seqlens_k.npy", cu_shape, std::vector<float>{0, 4, 6});
  r = fmha_jit_cli(tmp, served);
  INFO(r.output);
  CHECK_THAT(r.output,
             Catch::Contains("cu_seqlens_k.npy") && Catch::Contains("expected '<i4' (int32)"));
  npy::write_npy(in / "cu_seqlens_k.npy", cu_shape, std::span<const std::int32_t>(good));
  r = fmha_jit_cli(tmp, served);
  INFO(r.output);
  CHECK_THAT(r.output, Catch::Contains("needs a GPU"));
  // A dense run over a packed batch's folder is told where its lengths go.
  r = fmha_jit_cli(tmp, "run --arch sm_80 --hdim-q 64 --inputs '" + in.string() + "'");
  INFO(r.output);
  CHECK(r.status == 1);
  CHECK_THAT(r.output, Catch::Contains("cu_seqlens_k.npy describes a packed batch") &&
                           Catch::Contains("--seqlens-q"));
}

TEST_CASE("cli varlen: bench counts the FLOPs of a packed batch sequence by sequence", "[cli]") {
  test::TempDir tmp;
  const std::vector<std::pair<int, int>> seqs = {{100, 100}, {2000, 1500}, {17, 40},
                                                 {0, 8},     {33, 0},      {64, 64}};
  std::string seqlens_q, seqlens_k;
  int max_q = 0, max_k = 0;
  for (const auto& [q, k] : seqs) {
    seqlens_q += (seqlens_q.empty() ? "" : ",") + std::to_string(q);
    seqlens_k += (seqlens_k.empty() ? "" : ",") + std::to_string(k);
    max_q = std::max(max_q, q);
    max_k = std::max(max_k, k);
  }
  const std::string shape = "--hdim-q 64 --hdim-v 64 --nhead-q 3 ";
  for (const std::string mask : {"none", "causal", "causal-br", "window:16,4"}) {
    for (const std::string family : {"fwd", "bwd"}) {
      const std::string flags = shape + "--mask " + mask + " --family " + family + " ";
      INFO(flags);
      double dense_sum = 0;
      for (const auto& [q, k] : seqs) {
        // An empty sequence has no pairs; the dense flags take no length of 0.
        if (q == 0 || k == 0) continue;
        dense_sum += dry_run_flops(tmp, flags + "--batch 1 --seqlen-q " + std::to_string(q) +
                                            " --seqlen-k " + std::to_string(k));
      }
      const double packed = dry_run_flops(
          tmp, flags + "--seqlens-q " + seqlens_q + " --seqlens-k " + seqlens_k + " --sinks");
      CHECK(packed == dense_sum);
      // Not the padded count of B sequences of the longest lengths.
      const double padded =
          dry_run_flops(tmp, flags + "--batch " + std::to_string(seqs.size()) + " --seqlen-q " +
                                 std::to_string(max_q) + " --seqlen-k " + std::to_string(max_k));
      CHECK(packed < padded / 2);
    }
  }
}

TEST_CASE("cli varlen: a packed batch is (total, heads, dim) unless --layout says otherwise",
          "[cli]") {
  const test::TempDir tmp;
  const auto layout = [&](const std::string& flags) {
    const auto r = fmha_jit_cli(tmp, "bench --dry-run --json --arch sm_80 " + flags, false);
    INFO("bench " << flags << "\n" << r.output);
    REQUIRE(r.status == 0);
    return nlohmann::json::parse(r.output).at(0).at("layout").get<std::string>();
  };
  CHECK(layout("--seqlens-q 100,0,7") == "bshd");
  CHECK(layout("--seqlens-q 100,0,7 --layout bhsd") == "bhsd");
  CHECK(layout("--seqlen-q 100") == "bhsd");
  CHECK(layout("--seqlen-q 100 --layout bshd") == "bshd");
}
