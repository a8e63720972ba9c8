#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "fmha_jit/config.hpp"
#include "fmha_jit/error.hpp"
#include "kernels/resolve.hpp"
#include "kernels/wgmma_sm90a/tiles.hpp"
#include "support/field_error.hpp"

using namespace fmha_jit;

namespace {

using test::field_error;

nlohmann::json base_json() {
  return {{"family", "fwd"}, {"dtype", "bf16"}, {"hdim_q", 128},
          {"hdim_v", 128},   {"arch", "sm_90"}, {"mask", "none"}};
}

}  // namespace

TEST_CASE("config: JSON round trip over every enum value and field", "[config]") {
  int fields = 0;
  FmhaKernelConfig probe;
  for_each_field(probe, [&](const FieldInfo&, auto&) { ++fields; });
  for (const auto& family : kFamilyNames) {
    for (const auto& dtype : kDTypeNames) {
      for (const auto& mask : kMaskNames) {
        for (const auto& impl : kImplNames) {
          FmhaKernelConfig c;
          c.family = family.value;
          c.dtype = dtype.value;
          c.mask = mask.value;
          c.impl = impl.value;
          c.deterministic = true;
          c.lse = false;
          c.hdim_q = 192;
          c.hdim_v = 128;
          c.arch = "gfx90a";
          c.block_m = 3;
          const nlohmann::json j = to_json(c);
          CHECK(static_cast<int>(j.size()) == fields);
          CHECK(config_from_json(j) == c);
          CHECK(config_from_json(nlohmann::json::parse(j.dump())) == c);
        }
      }
    }
  }
}

TEST_CASE("config: aliases parse to the canonical spelling", "[config]") {
  auto j = base_json();
  j["mask"] = "causal-br";
  CHECK(config_from_json(j).mask == MaskKind::causal_bottom_right);
  CHECK(to_json(config_from_json(j))["mask"] == "causal_bottom_right");
  j["mask"] = "causal";
  CHECK(config_from_json(j).mask == MaskKind::causal_top_left);
  j["mask"] = "window";
  CHECK(config_from_json(j).mask == MaskKind::sliding_window);
}

TEST_CASE("config: missing fields take their defaults", "[config]") {
  CHECK(config_from_json(nlohmann::json::object()) == FmhaKernelConfig{});
}

TEST_CASE("config: hdim_v defaults to hdim_q when only hdim_q is given", "[config]") {
  // As `fmha-jit run --hdim-q` does: a file naming one head dim means it for both.
  for (int hdim : {32, 64, 96, 192, 256}) {
    INFO("hdim_q " << hdim);
    const auto c = config_from_json({{"family", "fwd"}, {"hdim_q", hdim}, {"arch", "sm_90"}});
    CHECK(c.hdim_q == hdim);
    CHECK(c.hdim_v == hdim);
    CHECK_NOTHROW(validate(c));
  }
  // Given, hdim_v is kept, also where it differs from hdim_q.
  const auto pair = config_from_json({{"hdim_q", 192}, {"hdim_v", 128}});
  CHECK(pair.hdim_q == 192);
  CHECK(pair.hdim_v == 128);
  // hdim_v alone does not change hdim_q's default.
  const auto only_v = config_from_json({{"hdim_v", 64}});
  CHECK(only_v.hdim_q == FmhaKernelConfig{}.hdim_q);
  CHECK(only_v.hdim_v == 64);
}

TEST_CASE("config: parse errors name field, value and accepted values", "[config]") {
  SECTION("unknown field") {
    auto j = base_json();
    j["hdim"] = 64;
    const auto e = field_error([&] { config_from_json(j); });
    CHECK(e.field() == "config field 'hdim'");
    CHECK_THAT(e.accepted(), Catch::Contains("hdim_q") && Catch::Contains("num_stages"));
  }
  SECTION("unknown enum spelling") {
    auto j = base_json();
    j["dtype"] = "fp8";
    const auto e = field_error([&] { config_from_json(j); });
    CHECK(e.field() == "dtype");
    CHECK(e.value() == "\"fp8\"");
    CHECK(e.accepted() == "fp16, bf16");
    CHECK_THAT(std::string(e.what()), Catch::Contains("dtype") && Catch::Contains("fp8"));
  }
  SECTION("wrong types") {
    for (auto [field, value] :
         std::vector<std::pair<std::string, nlohmann::json>>{{"hdim_q", "128"},
                                                             {"deterministic", 1},
                                                             {"arch", 90},
                                                             {"mask", true},
                                                             {"hdim_v", 1.5},
                                                             {"block_m", 1LL << 40}}) {
      auto j = base_json();
      j[field] = value;
      const auto e = field_error([&] { config_from_json(j); });
      CHECK(e.field() == field);
    }
  }
  SECTION("not an object") {
    const auto e = field_error([&] { config_from_json(nlohmann::json::array()); });
    CHECK(e.field() == "config");
  }
}

TEST_CASE("config: validate rejects unsupported combinations", "[config]") {
  struct Case {
    const char* field;
    nlohmann::json value;
    const char* accepted_fragment;
  };
  const std::vector<Case> cases = {
      {"hdim_q", 80, "32, 64, 96, 128, 192, 256"},
      {"hdim_q", 0, "32, 64"},
      {"hdim_v", 64, "128"},
      {"arch", "gfx942", "sm_80, sm_86, sm_89, sm_90, sm_90a, gfx90a"},
      {"arch", "gfx1100", "gfx90a"},
      {"arch", "sm_100", "sm_90a"},
      {"arch", "", "sm_80"},
      {"block_m", 64, "0 (heuristic), 1"},
      {"block_n", 64, "128"},
      {"num_warps", 8, "4"},
      {"num_stages", 2, "1"},
  };
  for (const auto& c : cases) {
    auto j = base_json();
    j[c.field] = c.value;
    if (std::string(c.field) == "hdim_q") j["hdim_v"] = c.value;
    if (std::string(c.field) == "block_m" || std::string(c.field) == "block_n" ||
        std::string(c.field) == "num_warps" || std::string(c.field) == "num_stages") {
      j["impl"] = "reference";
    }
    INFO(c.field << " = " << c.value.dump());
    const auto config = config_from_json(j);
    const auto e = field_error([&] { validate(config); });
    CHECK(e.field() == c.field);
    CHECK(e.code() == ErrorCode::invalid_config);
    CHECK_THAT(e.accepted(), Catch::Contains(c.accepted_fragment));
    CHECK_THROWS_AS(canonicalize(config), FieldError);
  }
}

TEST_CASE("config: (192, 128) is the only hdim_v != hdim_q accepted", "[config]") {
  FmhaKernelConfig c;
  c.hdim_q = 192;
  c.hdim_v = 128;
  CHECK_NOTHROW(validate(c));
  c.hdim_q = 256;
  CHECK_THROWS_AS(validate(c), FieldError);
}

TEST_CASE("config: canonical form", "[config]") {
  FmhaKernelConfig fwd;
  fwd.family = Family::fwd;
  fwd.deterministic = true;
  const auto cf = canonicalize(fwd);
  CHECK_FALSE(cf.deterministic);
  CHECK(cf.impl == KernelImpl::wgmma_sm90a);  // the Hopper forward for the default sm_90
  CHECK(cf.arch == "sm_90a");
  CHECK(cf.block_m > 0);
  CHECK(cf.block_n > 0);
  CHECK(cf.num_warps > 0);
  CHECK(cf.num_stages > 0);
  CHECK(canonicalize(cf) == cf);  // idempotent

  FmhaKernelConfig fwd2 = fwd;
  fwd2.deterministic = false;
  fwd2.impl = KernelImpl::wgmma_sm90a;
  fwd2.block_n = cf.block_n;  // explicit = heuristic value
  CHECK(canonical_string(fwd) == canonical_string(fwd2));

  FmhaKernelConfig bwd;
  bwd.family = Family::bwd;
  bwd.lse = true;
  bwd.deterministic = true;
  const auto cb = canonicalize(bwd);
  CHECK(cb.impl == KernelImpl::wgmma_sm90a);  // the Hopper backward on the default sm_90
  CHECK(cb.arch == "sm_90a");
  CHECK_FALSE(cb.lse);
  CHECK(cb.deterministic);
  CHECK(canonical_string(bwd) != canonical_string(fwd));
}

namespace {

// The field validate() rejects, or "(accepted)".
std::string rejected_field(const FmhaKernelConfig& config) {
  try {
    validate(config);
  } catch (const FieldError& e) {
    return e.field();
  }
  return "(accepted)";
}

}  // namespace

TEST_CASE("config: impl and tiles of the tensor-core forward", "[config]") {
  FmhaKernelConfig c;
  c.impl = KernelImpl::mma_sm80;
  for (auto [hq, hv] : std::vector<std::pair<int, int>>{
           {32, 32}, {64, 64}, {96, 96}, {128, 128}, {192, 192}, {256, 256}, {192, 128}}) {
    for (const char* arch : {"sm_80", "sm_86", "sm_90", "sm_90a"}) {
      c.hdim_q = hq;
      c.hdim_v = hv;
      c.arch = arch;
      INFO(arch << " " << hq << "x" << hv);
      CHECK_NOTHROW(canonicalize(c));  // every heuristic tile fits the arch
    }
  }
  c.hdim_q = c.hdim_v = 128;
  c.arch = "sm_90";
  auto bad = c;
  bad.arch = "gfx90a";
  CHECK(rejected_field(bad) == "impl");
  bad = c;
  bad.num_warps = 6;
  CHECK(rejected_field(bad) == "num_warps");
  bad = c;
  bad.block_m = 96;
  CHECK(rejected_field(bad) == "block_m");
  bad = c;
  bad.block_n = 48;
  CHECK(rejected_field(bad) == "block_n");
  bad = c;
  bad.hdim_q = bad.hdim_v = 256;
  bad.block_n = 128;
  bad.num_stages = 3;  // 2 * (128*256 + 3*128*512) bytes = 448 KB
  CHECK(rejected_field(bad) == "num_stages");
}

TEST_CASE("config: impl and tiles of the tensor-core backward", "[config]") {
  FmhaKernelConfig c;
  c.family = Family::bwd;
  c.impl = KernelImpl::mma_sm80;
  for (auto [hq, hv] : std::vector<std::pair<int, int>>{
           {32, 32}, {64, 64}, {96, 96}, {128, 128}, {192, 192}, {256, 256}, {192, 128}}) {
    for (const char* arch : {"sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"}) {
      for (bool det : {false, true}) {
        c.hdim_q = hq;
        c.hdim_v = hv;
        c.arch = arch;
        c.deterministic = det;
        INFO(arch << " " << hq << "x" << hv);
        FmhaKernelConfig r;
        REQUIRE_NOTHROW(r = canonicalize(c));  // every heuristic tile fits the arch
        CHECK(r.num_warps * 32 <= 256);
        CHECK(r.deterministic == det);
      }
    }
  }
  c.hdim_q = c.hdim_v = 128;
  c.arch = "sm_90";
  c.deterministic = false;
  const auto tile = canonicalize(c);
  CHECK(tile.block_m == 64);
  CHECK(tile.block_n == 128);
  auto bad = c;
  bad.num_warps = 2;
  CHECK(rejected_field(bad) == "num_warps");
  bad = c;
  bad.block_n = 48;  // three 16-key tiles cannot be split over 8 warps
  CHECK(rejected_field(bad) == "block_n");
  bad = c;
  bad.block_m = 96;
  CHECK(rejected_field(bad) == "block_m");
  bad = c;
  bad.num_stages = 4;
  CHECK(rejected_field(bad) == "num_stages");
  // A stage count whose shared-memory sum would overflow an int is rejected before that sum
  // (found by the config fuzzer under UBSan).
  for (const char* arch : {"sm_86", "sm_90"}) {
    bad = c;
    bad.arch = arch;
    bad.hdim_q = bad.hdim_v = 64;
    bad.block_m = bad.block_n = 64;
    bad.num_warps = 8;
    bad.num_stages = 555555555;
    CHECK(rejected_field(bad) == "num_stages");
    bad.family = Family::fwd;
    bad.block_m = 128;
    CHECK(rejected_field(bad) == "num_stages");
  }
  // Tiles far out of range, which the warp-split cost model would multiply.
  bad = c;
  bad.block_m = 1 << 30;
  CHECK(rejected_field(bad) == "block_m");
  bad = c;
  bad.block_n = 1 << 30;
  CHECK(rejected_field(bad) == "block_n");
  bad = c;
  bad.block_n = -16;
  CHECK(rejected_field(bad) == "block_n");
  bad = c;
  bad.arch = "sm_86";  // 64 x 128 with 2 stages needs 145 KB, sm_86 has 99 KB
  bad.block_m = 64;
  bad.block_n = 128;
  bad.num_warps = 8;
  bad.num_stages = 2;
  CHECK(rejected_field(bad) == "num_stages");
  // Accepted overrides: the tiles the gpu suite runs on the H200 for the other archs.
  auto ok = c;
  ok.block_m = ok.block_n = 64;
  ok.num_warps = 4;
  ok.num_stages = 1;
  CHECK(rejected_field(ok) == "(accepted)");
}

TEST_CASE("config: AMD arch gets wavefront-sized warps", "[config]") {
  FmhaKernelConfig c;
  c.arch = "gfx90a";
  const auto canonical = canonicalize(c);
  CHECK(canonical.num_warps * 64 == canonical.block_n);
  CHECK(vendor_of("gfx90a") == Vendor::amd);
  CHECK(vendor_of("sm_90a") == Vendor::nvidia);
  CHECK_FALSE(vendor_of("tpu").has_value());
}

TEST_CASE("config: the Hopper forward (wgmma_sm90a) and when auto falls back", "[config]") {
  FmhaKernelConfig c;
  c.family = Family::fwd;
  for (const char* arch : {"sm_90", "sm_90a"}) {
    for (int hdim : kernels::wgmma_sm90a::served_hdims(Family::fwd)) {
      c.arch = arch;
      c.hdim_q = c.hdim_v = hdim;
      INFO(arch << " hdim " << hdim);
      const auto r = canonicalize(c);
      CHECK(r.impl == KernelImpl::wgmma_sm90a);
      CHECK(r.arch == "sm_90a");                     // wgmma exists only in the arch-specific ISA
      CHECK(r.block_m == (hdim == 64 ? 192 : 128));  // three consumer warpgroups at hdim 64
      CHECK(r.num_warps == (hdim == 64 ? 16 : 12));
      CHECK(r.block_n == (hdim >= 192 ? 80 : 128));  // 80 keys: shared memory at 192, O at 256
      CHECK(kernels::impl_fallback_reason(c).empty());
    }
  }
  // Auto falls back, with a reason, where the Hopper kernels do not reach.
  c.arch = "sm_90";
  c.hdim_q = c.hdim_v = 96;
  CHECK(canonicalize(c).impl == KernelImpl::mma_sm80);
  CHECK(canonicalize(c).arch == "sm_90");
  CHECK_THAT(kernels::impl_fallback_reason(c), Catch::Contains("hdim 96"));
  c.hdim_q = 192;
  c.hdim_v = 128;
  CHECK_THAT(kernels::impl_fallback_reason(c), Catch::Contains("hdim_q != hdim_v"));
  // The backward serves hdim 64, 128 and 256 (at 256 both warpgroups share 64 keys and split
  // the head dim); hdim 96 and 192 fall back.
  c.family = Family::bwd;
  CHECK(kernels::wgmma_sm90a::served_hdims(Family::bwd) == std::vector<int>{64, 128, 256});
  c.hdim_q = c.hdim_v = 192;
  CHECK(canonicalize(c).impl == KernelImpl::mma_sm80);
  CHECK_THAT(kernels::impl_fallback_reason(c), Catch::Contains("hdim 192 (its bwd serves"));
  for (int hdim : kernels::wgmma_sm90a::served_hdims(Family::bwd)) {
    c.hdim_q = c.hdim_v = hdim;
    INFO("bwd hdim " << hdim);
    const auto r = canonicalize(c);
    CHECK(r.impl == KernelImpl::wgmma_sm90a);
    CHECK(r.arch == "sm_90a");
    CHECK(r.block_m == (hdim == 64 ? 128 : 64));
    CHECK(r.block_n == (hdim == 256 ? 64 : 128));
    CHECK(r.num_warps == 12);
    // hdim 256: one Q stage, and its room holds a second dQ block, in both modes.
    CHECK(r.num_stages == (hdim == 256 ? 1 : 2));
    c.deterministic = true;
    CHECK(canonicalize(c).num_stages == (hdim == 256 ? 1 : 2));
    c.deterministic = false;
    CHECK(kernels::impl_fallback_reason(c).empty());
  }
  c.hdim_q = c.hdim_v = 96;
  CHECK(canonicalize(c).impl == KernelImpl::mma_sm80);
  CHECK_THAT(kernels::impl_fallback_reason(c), Catch::Contains("hdim 96"));
  c.family = Family::fwd;
  c.arch = "sm_80";
  CHECK(canonicalize(c).impl == KernelImpl::mma_sm80);
  CHECK(kernels::impl_fallback_reason(c).empty());  // nothing to fall back from

  // Asked for explicitly where it cannot run, or with tiles it does not have.
  c.arch = "sm_90";
  c.impl = KernelImpl::wgmma_sm90a;
  c.hdim_q = c.hdim_v = 128;
  CHECK(rejected_field(c) == "(accepted)");
  auto bad = c;
  bad.arch = "sm_80";
  CHECK(rejected_field(bad) == "impl");
  bad = c;
  bad.family = Family::bwd;
  CHECK(rejected_field(bad) == "(accepted)");
  bad.hdim_q = bad.hdim_v = 256;
  CHECK(rejected_field(bad) == "(accepted)");
  bad.block_n = 128;  // hdim 256: one 64-key tile shared by both warpgroups
  CHECK(rejected_field(bad) == "block_n");
  bad.block_n = 64;
  bad.num_stages = 3;  // a third Q stage does not fit beside the dO stage
  CHECK(rejected_field(bad) == "num_stages");
  bad.num_stages = 0;
  bad.hdim_q = bad.hdim_v = 128;
  bad.block_n = 0;
  bad.block_m = 128;  // S^T, dP^T 64 registers each beside dK and dV's 128
  CHECK(rejected_field(bad) == "block_m");
  bad.block_m = 64;
  bad.block_n = 64;
  CHECK(rejected_field(bad) == "block_n");
  bad.block_n = 128;
  bad.num_stages = 4;
  CHECK(rejected_field(bad) == "num_stages");
  bad = c;
  bad.hdim_q = bad.hdim_v = 32;
  CHECK(rejected_field(bad) == "impl");
  bad = c;
  bad.block_m = 64;
  CHECK(rejected_field(bad) == "block_m");
  bad = c;
  bad.num_warps = 8;
  CHECK(rejected_field(bad) == "num_warps");
  // 192 query rows (three consumer warpgroups, 16 warps) only at hdim 64.
  bad = c;
  bad.block_m = 192;
  CHECK(rejected_field(bad) == "block_m");
  bad.hdim_q = bad.hdim_v = 64;
  CHECK(rejected_field(bad) == "(accepted)");
  CHECK(canonicalize(bad).num_warps == 16);
  bad.num_warps = 12;
  CHECK(rejected_field(bad) == "num_warps");
  // Key tiles: 64 or 128 up to hdim 128; 64 or 80 at hdim 256 (128 keys spill there, and 80
  // is a wgmma N only the hdim 256 kernel is built for).
  bad = c;
  bad.block_n = 80;
  CHECK(rejected_field(bad) == "block_n");
  bad.hdim_q = bad.hdim_v = 256;
  CHECK(rejected_field(bad) == "(accepted)");
  bad.block_n = 64;
  CHECK(rejected_field(bad) == "(accepted)");
  bad.block_n = 128;
  CHECK(rejected_field(bad) == "block_n");
  bad.block_n = 80;
  bad.num_stages = 3;  // 64 KB of Q and three 80-key K and V stages: 304 KB
  CHECK(rejected_field(bad) == "num_stages");
  // hdim 64's heuristic tile is the 192-row one; asking for 128 rows or 12 warps gets 128 rows.
  FmhaKernelConfig hd64 = c;
  hd64.hdim_q = hd64.hdim_v = 64;
  CHECK(canonicalize(hd64).block_m == 192);
  CHECK(canonicalize(hd64).num_warps == 16);
  hd64.num_warps = 12;
  CHECK(canonicalize(hd64).block_m == 128);
  hd64.num_warps = 0;
  hd64.block_m = 128;
  CHECK(canonicalize(hd64).num_warps == 12);
  bad = c;
  bad.hdim_q = bad.hdim_v = 256;
  bad.block_n = 128;  // O 128 + S 64 + P 32 registers: more than a consumer thread has
  CHECK(rejected_field(bad) == "block_n");
  bad = c;
  bad.num_stages = 5;
  CHECK(rejected_field(bad) == "num_stages");
  bad = c;
  bad.num_stages = 4;  // 32 KB of Q + 4 x 64 KB of K and V > 227 KB
  CHECK(rejected_field(bad) == "num_stages");
  bad.num_stages = 3;
  CHECK(rejected_field(bad) == "(accepted)");
}

TEST_CASE("config: short causal forwards on Hopper get a tile variant", "[config]") {
  FmhaKernelConfig c;
  c.family = Family::fwd;
  c.arch = "sm_90";
  c.mask = MaskKind::causal_top_left;
  c.hdim_q = c.hdim_v = 256;
  auto v = kernels::problem_tile_variant(c);
  REQUIRE(v);
  // 64 keys instead of 80; its own canonical config (and so its own key and cache entry).
  CHECK(v->config.impl == KernelImpl::wgmma_sm90a);
  CHECK(canonicalize(v->config).block_n == 64);
  CHECK(canonicalize(c).block_n == 80);
  CHECK(canonicalize(v->config).arch == "sm_90a");
  FmhaProblem p;
  p.hdim_q = p.hdim_v = 256;
  p.seqlen_q = p.seqlen_k = kernels::wgmma_sm90a::kShortCausalSeqlen;
  CHECK(v->applies(p));
  p.seqlen_k = kernels::wgmma_sm90a::kShortCausalSeqlen + 1;  // either length decides
  CHECK_FALSE(v->applies(p));
  p.seqlen_k = 512;
  p.seqlen_q = 2048;
  CHECK_FALSE(v->applies(p));

  c.hdim_q = c.hdim_v = 64;  // 128 query rows (two consumer warpgroups) instead of 192
  c.mask = MaskKind::causal_bottom_right;
  v = kernels::problem_tile_variant(c);
  REQUIRE(v);
  CHECK(canonicalize(v->config).block_m == 128);
  CHECK(canonicalize(v->config).num_warps == 12);
  CHECK(canonicalize(c).block_m == 192);

  // None where the long tile measured faster or is not the heuristic's to change.
  auto none = [](FmhaKernelConfig x) { return !kernels::problem_tile_variant(x).has_value(); };
  FmhaKernelConfig x = c;
  x.hdim_q = x.hdim_v = 128;  // 64 keys measured slower at every length
  CHECK(none(x));
  x = c;
  x.mask = MaskKind::none;
  CHECK(none(x));
  x = c;
  x.family = Family::bwd;
  CHECK(none(x));
  x = c;
  x.block_n = 128;  // a tile the user chose holds for every problem
  CHECK(none(x));
  x = c;
  x.num_stages = 2;
  CHECK(none(x));
  x = c;
  x.arch = "sm_80";
  CHECK(none(x));
  x = c;
  x.impl = KernelImpl::mma_sm80;
  CHECK(none(x));
}
