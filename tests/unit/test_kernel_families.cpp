// The kernel families behind kernels/family.hpp: each family's stages, entry, launch plan and
// shared memory agree with one another, and resolve() picks, refuses and passes over families as
// the registry orders them.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/arch.hpp"
#include "fmha_jit/error.hpp"
#include "kernels/registry.hpp"
#include "kernels/resolve.hpp"
#include "support/field_error.hpp"
#include "support/test_support.hpp"

using namespace fmha_jit;

namespace {

// Configs over every family, direction, mask and the head dims each serves.
std::vector<FmhaKernelConfig> configs_of_every_family() {
  std::vector<FmhaKernelConfig> out;
  for (KernelImpl impl : {KernelImpl::reference, KernelImpl::mma_sm80, KernelImpl::wgmma_sm90a}) {
    for (Family family : {Family::fwd, Family::bwd}) {
      for (MaskKind mask : {MaskKind::none, MaskKind::causal_bottom_right}) {
        for (int hdim : {64, 128, 256}) {
          FmhaKernelConfig c;
          c.family = family;
          c.dtype = DType::bf16;
          c.hdim_q = c.hdim_v = hdim;
          c.mask = mask;
          c.impl = impl;
          c.arch = "sm_90";
          c.deterministic = family == Family::bwd && mask != MaskKind::none;
          out.push_back(c);
        }
      }
    }
  }
  return out;
}

}  // namespace

TEST_CASE("kernel families: stages, entry, plan and shared memory agree", "[kernels]") {
  for (const FmhaKernelConfig& given : configs_of_every_family()) {
    const FmhaKernelConfig c = canonicalize(given);
    INFO(canonical_string(c));
    const kernels::KernelFamily& family = kernels::family_of(c.impl);
    CHECK(family.impl() == given.impl);
    const std::vector<codegen::StageRole> roles = family.stage_roles(c);
    const codegen::EntrySpec spec = family.entry_spec(c);
    REQUIRE(spec.stages.size() == roles.size());
    for (std::size_t i = 0; i < roles.size(); ++i) CHECK(spec.stages[i].role == roles[i]);
    const codegen::RenderedEntry entry = kernels::render_entry(c);
    CHECK(entry.symbols.size() == roles.size());
    CHECK_THAT(entry.source, Catch::Contains("#include \"" + spec.header + "\""));

    const FmhaProblem p = test::sized_problem(2, 8, 2, 1000, 1300, c.hdim_q);
    for (int sms : {0, 132}) {
      const std::vector<kernels::StageLaunch> stages = family.plan_stages(c, p, sms);
      REQUIRE(stages.size() == roles.size());
      for (std::size_t i = 0; i < stages.size(); ++i) {
        CHECK(stages[i].role == roles[i]);
        CHECK(stages[i].dynamic_smem_bytes == family.dynamic_smem_bytes(c, roles[i]));
        CHECK(stages[i].grid.x * stages[i].grid.y * stages[i].grid.z > 0);
        CHECK(stages[i].block.x == static_cast<unsigned>(spec.threads));
        // A persistent grid never exceeds the SMs it is planned for.
        if (sms > 0 && c.impl == KernelImpl::wgmma_sm90a && c.family == Family::fwd) {
          CHECK(stages[i].grid.x <= static_cast<unsigned>(sms));
        }
      }
    }
    const kernels::BwdWorkspaceLayout w = family.bwd_workspace_layout(c, p);
    if (c.family == Family::fwd) {
      CHECK(w.total == 0);
    } else {
      CHECK(w.total >= static_cast<std::size_t>(p.lse_elements()) * sizeof(float));
      CHECK(w.total % 256 == 0);
    }
  }
}

TEST_CASE("kernel families: auto takes the first family of the registry that serves the config",
          "[kernels]") {
  FmhaKernelConfig c = test::small_config(Family::fwd);
  c.impl = KernelImpl::automatic;
  c.hdim_q = c.hdim_v = 128;
  c.arch = "sm_90";
  kernels::ResolvedConfig r = kernels::resolve(c);
  CHECK(r.canonical.impl == KernelImpl::wgmma_sm90a);
  CHECK(r.canonical.arch == "sm_90a");  // the family's compile arch
  CHECK(r.fallback_reason.empty());

  c.hdim_q = c.hdim_v = 96;  // not a Hopper head dim: passed over, with the reason
  r = kernels::resolve(c);
  CHECK(r.canonical.impl == KernelImpl::mma_sm80);
  CHECK(r.canonical.arch == "sm_90");
  CHECK_THAT(r.fallback_reason, Catch::StartsWith("wgmma_sm90a does not serve hdim 96") &&
                                    Catch::EndsWith("using mma_sm80 on sm_90"));

  c.arch = "sm_80";  // a family that does not target the arch is passed over silently
  r = kernels::resolve(c);
  CHECK(r.canonical.impl == KernelImpl::mma_sm80);
  CHECK(r.fallback_reason.empty());

  c.arch = "gfx90a";
  CHECK(kernels::resolve(c).canonical.impl == KernelImpl::reference);

  // Every family the registry lists resolves to itself when named.
  for (const kernels::KernelFamily* f : kernels::families()) {
    FmhaKernelConfig named = test::small_config(Family::bwd);
    named.hdim_q = named.hdim_v = 64;
    named.arch = "sm_90";
    named.impl = f->impl();
    CHECK(kernels::resolve(named).family == f);
  }
}

TEST_CASE("kernel families: a named family that cannot serve the config is refused with the others",
          "[kernels]") {
  FmhaKernelConfig c = test::small_config(Family::fwd);
  c.impl = KernelImpl::wgmma_sm90a;
  c.arch = "sm_80";
  FieldError e = test::field_error([&] { kernels::resolve(c); });
  CHECK(e.field() == "impl");
  CHECK(
      e.accepted() ==
      "auto, mma_sm80, reference (wgmma_sm90a serves sm_90 and sm_90a; this config is for sm_80)");

  c.arch = "sm_90";
  c.hdim_q = c.hdim_v = 32;
  e = test::field_error([&] { kernels::resolve(c); });
  CHECK_THAT(e.accepted(), Catch::StartsWith("auto, mma_sm80, reference (wgmma_sm90a does not "
                                             "serve hdim 32"));

  c = test::small_config(Family::bwd);
  c.impl = KernelImpl::mma_sm80;
  c.arch = "gfx90a";
  e = test::field_error([&] { kernels::resolve(c); });
  CHECK(e.accepted() ==
        "auto, reference (mma_sm80 serves NVIDIA archs; this config is for gfx90a)");
}

TEST_CASE("kernel families: only a config whose tiles are all the heuristic's has a tile variant",
          "[kernels]") {
  FmhaKernelConfig c = test::small_config(Family::fwd);
  c.impl = KernelImpl::automatic;
  c.hdim_q = c.hdim_v = 64;
  c.arch = "sm_90";
  c.mask = MaskKind::causal_top_left;
  const kernels::ResolvedConfig r = kernels::resolve(c);
  REQUIRE(r.tile_variant);
  CHECK(r.tile_variant->config.arch == "sm_90");  // as given, with the variant's tiles
  CHECK(r.tile_variant->config.block_m != r.canonical.block_m);
  c.num_stages = r.canonical.num_stages;  // one tile field chosen by the user
  CHECK_FALSE(kernels::resolve(c).tile_variant);
  c.num_stages = 0;
  c.mask = MaskKind::none;  // the variant is the short causal one
  CHECK_FALSE(kernels::resolve(c).tile_variant);
}
