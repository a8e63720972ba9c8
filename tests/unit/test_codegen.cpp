#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <set>

#include "codegen/kernel_name.hpp"
#include "codegen/render.hpp"
#include "codegen/rtc/ptxas_report.hpp"
#include "codegen/templates.hpp"
#include "fmha_jit/error.hpp"
#include "kernels/registry.hpp"
#include "kernels/wgmma_sm90a/tiles.hpp"
#include "support/test_support.hpp"
#include "tools/fmha-jit/sweep.hpp"

using namespace fmha_jit;

TEST_CASE("codegen: the entry is thin and names every stage", "[codegen]") {
  for (Family family : {Family::fwd, Family::bwd}) {
    auto config = test::small_config(family);
    config.hdim_q = 192;
    config.hdim_v = 128;
    config.mask = MaskKind::sliding_window;
    const auto canonical = canonicalize(config);
    const auto entry = kernels::render_entry(canonical);
    CHECK(entry.symbols.size() == kernels::stage_roles(canonical).size());
    for (const auto& symbol : entry.symbols) {
      CHECK_THAT(entry.source,
                 Catch::Contains("extern \"C\" __global__") && Catch::Contains(symbol + "("));
    }
    CHECK_THAT(entry.source, Catch::Contains("kHdimQ = 192;") && Catch::Contains("kHdimV = 128;") &&
                                 Catch::Contains("kMaskKind = 3;") &&
                                 Catch::Contains("typedef fmha_bf16 Element;"));
    // Thin: constants, aliases and one call per symbol; the kernel bodies live in templates/.
    const auto lines = std::count(entry.source.begin(), entry.source.end(), '\n');
    CHECK(lines < 40);
    CHECK(entry.source.find("for (") == std::string::npos);
  }
}

TEST_CASE("codegen: the Hopper entries take their tensor maps as __grid_constant__", "[codegen]") {
  FmhaKernelConfig c;
  c.arch = "sm_90";
  c.hdim_q = c.hdim_v = 128;
  for (Family family : {Family::fwd, Family::bwd}) {
    c.family = family;
    const auto canonical = canonicalize(c);
    REQUIRE(canonical.impl == KernelImpl::wgmma_sm90a);
    const auto entry = kernels::render_entry(canonical);
    const std::string params = family == Family::fwd
                                   ? "const __grid_constant__ FmhaFwdSm90Params p"
                                   : "const __grid_constant__ FmhaBwdSm90Params p";
    // Every stage: one launch argument for the whole plan (dispatcher/runner.cpp).
    for (const auto& symbol : entry.symbols)
      CHECK_THAT(entry.source, Catch::Contains(symbol + "(" + params));
    CHECK_THAT(entry.source, Catch::Contains("__launch_bounds__(kThreads, 1)"));
    if (family == Family::bwd) {
      // The row-wise stages are the sm_80 ones, reading the common parameters.
      CHECK_THAT(entry.source, Catch::Contains("fmha_bwd_sm80_dot_do_o<") &&
                                   Catch::Contains("fmha_bwd_sm90a_dq_dk_dv<") &&
                                   Catch::Contains("fmha_bwd_sm80_convert_dq<"));
      CHECK_THAT(entry.source,
                 Catch::Contains("kVarlen>(p.bwd);") && Catch::Contains("kSinks>(p.bwd);"));
    }
  }
  // hdim 256: its own stage-2 template (both warpgroups on one 64-key tile), same stages 1 and 3.
  c.family = Family::bwd;
  c.hdim_q = c.hdim_v = 256;
  const auto entry = kernels::render_entry(canonicalize(c));
  CHECK_THAT(entry.source, Catch::Contains("#include \"bwd/fmha_bwd_sm90a_hd256.h\"") &&
                               Catch::Contains("fmha_bwd_sm90a_hd256_dq_dk_dv<") &&
                               Catch::Contains("fmha_bwd_sm80_dot_do_o<") &&
                               Catch::Contains("kBlockN = 64;"));
}

TEST_CASE("codegen: kernel names are readable and unique across the sweep", "[codegen]") {
  const auto items =
      cli::plan_sweep(nlohmann::json{{"family", {"fwd", "bwd"}},
                                     {"dtype", {"fp16", "bf16"}},
                                     {"hdim_q", {32, 64, 96, 128, 192, 256}},
                                     {"hdim_v", {32, 64, 96, 128, 192, 256}},
                                     {"mask", {"none", "causal", "causal-br", "window"}},
                                     {"deterministic", {false, true}},
                                     {"lse", {false, true}},
                                     {"arch", {"sm_80", "sm_90", "sm_90a", "gfx90a"}}});
  std::set<std::string> names;
  int valid = 0;
  for (const auto& item : items) {
    if (!item.valid) continue;
    ++valid;
    const auto name = codegen::kernel_base_name(item.config);
    CHECK(names.insert(name).second);
    CHECK(name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") == std::string::npos);
  }
  // 7 head-dim pairs x 4 masks x 2 dtypes x 4 archs, fwd x 2 lse + bwd x 2 deterministic; the
  // forwards and backwards that wgmma_sm90a serves are one kernel each for sm_90 and sm_90a.
  const int hopper_hdims = static_cast<int>(kernels::wgmma_sm90a::served_hdims(Family::fwd).size() +
                                            kernels::wgmma_sm90a::served_hdims(Family::bwd).size());
  // Plus the short causal tile variant of each Hopper forward that has one (2 causal masks x 2
  // dtypes x 2 lse), once: the sm_90 and sm_90a configs share it.
  int variant_hdims = 0;
  for (int hdim : kernels::wgmma_sm90a::served_hdims(Family::fwd)) {
    FmhaKernelConfig c;
    c.hdim_q = c.hdim_v = hdim;
    if (kernels::wgmma_sm90a::fwd_short_causal_tile(c)) ++variant_hdims;
  }
  CHECK(variant_hdims == 2);
  CHECK(valid == 7 * 4 * 2 * 4 * (2 + 2) - hopper_hdims * 4 * 2 * 2 + variant_hdims * 2 * 2 * 2);
  const auto sample = codegen::kernel_base_name(canonicalize(test::small_config()));
  CHECK(sample.starts_with("fmha_fwd_bf16_hq64_hv64_sm90_none_lse_reference_"));
}

TEST_CASE("codegen: quoted includes and template closure", "[codegen]") {
  CHECK(codegen::quoted_includes("#include \"a/b.h\"\n  #  include \"c.h\" // x\n#include <d>\n"
                                 "// #include \"not/this.h\"\nint x;\n") ==
        std::vector<std::string>{"a/b.h", "c.h"});
  const auto entry = kernels::render_entry(canonicalize(test::small_config()));
  std::set<std::string> paths;
  for (const auto* t : codegen::TemplateSet::embedded().closure(entry.source)) {
    paths.emplace(t->path);
  }
  CHECK(paths.count("common/fmha_params.h") == 1);
  CHECK(paths.count("common/mask.h") == 1);
  CHECK(paths.count("reference/fmha_reference_fwd.h") == 1);
  CHECK(paths.count("reference/fmha_reference_bwd.h") == 0);
  CHECK_THROWS_AS(codegen::TemplateSet::embedded().closure("#include \"no/such.h\"\n"), Error);
}

TEST_CASE("sweep: lists expand to a product; invalid points are skipped with a reason", "[sweep]") {
  const auto points = cli::expand_sweep(nlohmann::json::parse(
      R"({"family": ["fwd", "bwd"], "hdim_q": [64, 128], "hdim_v": [64, 128], "arch": "sm_90"})"));
  CHECK(points.size() == 8);
  const auto items = cli::plan_sweep(nlohmann::json::parse(
      R"({"family": ["fwd", "bwd"], "hdim_q": [64, 128], "hdim_v": [64, 128], "arch": "sm_90"})"));
  int valid = 0, skipped = 0;
  for (const auto& item : items) {
    if (item.valid) {
      ++valid;
    } else {
      ++skipped;
      CHECK_THAT(item.skip_reason, Catch::Contains("hdim_v"));
    }
  }
  CHECK(valid == 4);
  CHECK(skipped == 4);
}

TEST_CASE("sweep: a point without hdim_v takes its own hdim_q", "[sweep]") {
  const auto items = cli::plan_sweep(nlohmann::json::parse(
      R"({"family": ["fwd", "bwd"], "hdim_q": [64, 128], "arch": "sm_90", "impl": "reference"})"));
  REQUIRE(items.size() == 4);
  for (const auto& item : items) {
    INFO(item.point.dump() << ": " << item.skip_reason);
    CHECK(item.valid);
    CHECK(item.config.hdim_v == item.config.hdim_q);
    CHECK(item.config.hdim_q == item.point["hdim_q"].get<int>());
  }
}

TEST_CASE("sweep: duplicates after canonicalisation are dropped", "[sweep]") {
  // deterministic does not apply to fwd: two points, one kernel.
  const auto items = cli::plan_sweep(
      nlohmann::json::parse(R"({"family": "fwd", "deterministic": [false, true]})"));
  CHECK(items.size() == 1);
}

TEST_CASE("sweep: arrays of objects, and malformed documents", "[sweep]") {
  CHECK(cli::expand_sweep(nlohmann::json::parse(R"([{"hdim_q": [64, 128]}, {}])")).size() == 3);
  CHECK_THROWS_AS(cli::expand_sweep(nlohmann::json::parse(R"({"hdim_q": []})")), FieldError);
  CHECK_THROWS_AS(cli::expand_sweep(nlohmann::json::parse(R"([1, 2])")), FieldError);
  CHECK_THROWS_AS(cli::expand_sweep(nlohmann::json::parse("\"x\"")), FieldError);
  nlohmann::json huge = nlohmann::json::object();
  for (const char* f : {"hdim_q", "hdim_v", "block_m", "block_n"}) {
    huge[f] = nlohmann::json::array();
    for (int i = 0; i < 20; ++i) huge[f].push_back(i);
  }
  CHECK_THROWS_AS(cli::expand_sweep(huge), FieldError);  // 160000 points
  // Unknown fields are reported per point, not thrown for the whole file.
  const auto items = cli::plan_sweep(nlohmann::json::parse(R"({"hdimq": 64})"));
  REQUIRE(items.size() == 1);
  CHECK_FALSE(items[0].valid);
  CHECK_THAT(items[0].skip_reason, Catch::Contains("hdimq"));
}

TEST_CASE("ptxas report: registers, spills, stack, shared memory and wgmma serialisation per entry",
          "[codegen]") {
  const char* log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'k_fwd' for 'sm_90'\n"
      "ptxas info    : Function properties for k_fwd\n"
      "ptxas         .     8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n"
      "ptxas info    : Used 168 registers, used 1 barriers, 4096 bytes smem, 400 bytes cmem[0]\n"
      "ptxas info    : Compiling entry function 'k_bwd' for 'sm_90'\n"
      "ptxas info    : Function properties for k_bwd\n"
      "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 40 registers, used 1 barriers, 400 bytes cmem[0]\n"
      "ptxas info    : (C7511) Potential Performance Loss: wgmma.mma_async instructions are "
      "serialized due to insufficient register resources for the wgmma pipeline in the function "
      "'k_mma'\n"
      "ptxas info    : Compiling entry function 'k_mma' for 'sm_90a'\n"
      "ptxas info    : Used 168 registers, used 16 barriers\n";
  const auto r = codegen::rtc::parse_ptxas_report(log);
  REQUIRE(r.size() == 3);
  CHECK(r[0].symbol == "k_fwd");
  CHECK(r[0].registers == 168);
  CHECK(r[0].stack_frame_bytes == 8);
  CHECK(r[0].spill_store_bytes == 4);
  CHECK(r[0].spill_load_bytes == 12);
  CHECK(r[0].static_smem_bytes == 4096);
  CHECK(r[1].symbol == "k_bwd");
  CHECK(r[1].registers == 40);
  CHECK(r[1].spill_store_bytes == 0);
  CHECK(r[1].static_smem_bytes == 0);
  CHECK_FALSE(r[0].wgmma_serialized);
  CHECK_FALSE(r[1].wgmma_serialized);
  CHECK(r[2].symbol == "k_mma");
  CHECK(r[2].wgmma_serialized);
  // The manifest keeps the flag; a manifest written before it existed reads as not serialised.
  CHECK(support::resources_from_json(support::to_json(r[2])).wgmma_serialized);
  nlohmann::json older = support::to_json(r[2]);
  older.erase("wgmma_serialized");
  CHECK_FALSE(support::resources_from_json(older).wgmma_serialized);
  CHECK(support::resources_from_json(older).registers == 168);
  CHECK(codegen::rtc::parse_ptxas_report("garbage\n'\n").empty());
}
