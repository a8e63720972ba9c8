// Uses the installed fmha_jit on the paths that need no GPU and no NVRTC: a config is validated,
// canonicalised and round-tripped through JSON, and setup_fmha_dispatcher() reports an invalid one.
// Calling setup links the dispatcher, the cache and the compiler front end, so the link checks that
// the package brings every dependency of the static archive (spdlog, xxHash, pthreads, libdl).
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "fmha_jit/fmha_jit.hpp"

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  std::printf("%s: %s\n", ok ? "ok" : "FAILED", what.c_str());
  if (!ok) ++failures;
}

}  // namespace

int main() {
  using namespace fmha_jit;
  FmhaKernelConfig config;
  config.family = Family::fwd;
  config.dtype = DType::bf16;
  config.hdim_q = config.hdim_v = 128;
  config.mask = MaskKind::causal_top_left;
  config.arch = "sm_90";

  validate(config);
  const FmhaKernelConfig canonical = canonicalize(config);
  expect(canonical.impl != KernelImpl::automatic && canonical.block_m > 0,
         "canonicalize resolves the kernel family and the tile: " + canonical_string(config));
  const nlohmann::json j = to_json(canonical);
  expect(config_from_json(j) == canonical, "the canonical config round-trips through JSON");

  FmhaKernelConfig unsupported = config;
  unsupported.hdim_q = unsupported.hdim_v = 80;
  try {
    validate(unsupported);
    expect(false, "validate rejects hdim_q = 80");
  } catch (const FieldError& e) {
    expect(e.field() == "hdim_q", std::string("validate rejects hdim_q = 80: ") + e.what());
  }
  const FmhaSetupResult setup = setup_fmha_dispatcher(unsupported);
  expect(!setup.success && setup.error_code == ErrorCode::invalid_config && !setup.runner,
         "setup_fmha_dispatcher reports it: " + setup.error);
  return failures == 0 ? 0 : 1;
}
