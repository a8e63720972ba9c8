// Example 01: the C++ API end to end.
//   config -> setup_fmha_dispatcher (memory / disk cache / JIT compile) -> run on the GPU ->
//   validate against a plain fp64 computation on the host.
// Without a GPU it still builds (and caches) the kernel and says why it cannot run it.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "fmha_jit/fmha_jit.hpp"

namespace {

std::uint16_t to_bf16(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  u += 0x7fff + ((u >> 16) & 1);  // round to nearest even (inputs here are finite)
  return static_cast<std::uint16_t>(u >> 16);
}
float from_bf16(std::uint16_t h) {
  const std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

}  // namespace

int main() {
  using namespace fmha_jit;
  FmhaKernelConfig config;
  config.family = Family::fwd;
  config.dtype = DType::bf16;
  config.hdim_q = config.hdim_v = 128;
  config.mask = MaskKind::causal_top_left;
  try {
    config.arch = detect_gpu_arch();
  } catch (const Error& e) {  // FMHA_JIT_ARCH or FMHA_JIT_DEVICE set to a value not accepted
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }

  const FmhaSetupResult setup = setup_fmha_dispatcher(config);
  if (!setup.success) {
    std::fprintf(stderr, "setup failed: %s\n", setup.error.c_str());
    return 1;
  }
  std::printf("kernel %s\n  key %s, from %s in %.3f s\n", setup.runner->kernel_symbols()[0].c_str(),
              setup.key.c_str(), std::string(to_string(setup.source)).c_str(), setup.build_time_s);
  if (!gpu_available()) {
    std::printf("no GPU on this machine: the kernel is compiled and cached, not run\n");
    return 0;
  }

  FmhaProblem p;
  p.batch = 2;
  p.nhead_q = 4;
  p.nhead_k = 4;
  p.seqlen_q = p.seqlen_k = 200;
  p.hdim_q = p.hdim_v = 128;
  std::mt19937 rng(0);
  std::normal_distribution<float> dist;
  auto make = [&](std::int64_t n) {
    std::vector<std::uint16_t> v(n);
    for (auto& x : v) x = to_bf16(dist(rng));
    return v;
  };
  const auto q = make(p.q_elements()), k = make(p.k_elements()), v = make(p.v_elements());
  DeviceBuffer dq(q.size() * 2), dk(k.size() * 2), dv(v.size() * 2), dout(p.o_elements() * 2);
  dq.upload(q.data(), q.size() * 2);
  dk.upload(k.data(), k.size() * 2);
  dv.upload(v.data(), v.size() * 2);
  dout.fill(0xFF);
  setup.runner->run_fwd(p, {dq.data(), dk.data(), dv.data(), dout.data(), nullptr});
  device_synchronize();
  std::vector<std::uint16_t> out(p.o_elements());
  dout.download(out.data(), out.size() * 2);

  // Host check (bhsd, causal): O[i] = sum_j softmax(scale * q_i . k_j)_j v_j over j <= i.
  // O was filled with 0xFF bytes (NaN in bf16) before the run: an element the kernel did not write
  // stays NaN, which std::max below would drop, so non-finite elements are counted on their own.
  double max_err = 0;
  std::int64_t non_finite = 0;
  const double scale = p.softmax_scale();
  const auto D = p.hdim_q, S = p.seqlen_q;
  for (std::int64_t bh = 0; bh < p.batch * p.nhead_q; ++bh) {
    for (std::int64_t i = 0; i < S; ++i) {
      std::vector<double> s(i + 1);
      double m = -INFINITY, sum = 0;
      for (std::int64_t j = 0; j <= i; ++j) {
        double dot = 0;
        for (std::int64_t d = 0; d < D; ++d) {
          dot += from_bf16(q[(bh * S + i) * D + d]) * from_bf16(k[(bh * S + j) * D + d]);
        }
        s[j] = dot * scale;
        m = std::max(m, s[j]);
      }
      for (auto& x : s) sum += (x = std::exp(x - m));
      for (std::int64_t d = 0; d < D; ++d) {
        double o = 0;
        for (std::int64_t j = 0; j <= i; ++j) o += s[j] / sum * from_bf16(v[(bh * S + j) * D + d]);
        const float got = from_bf16(out[(bh * S + i) * D + d]);
        if (!std::isfinite(got)) {
          ++non_finite;
          continue;
        }
        max_err = std::max(max_err, std::abs(o - got));
      }
    }
  }
  const bool ok = non_finite == 0 && max_err < 2e-2;
  if (non_finite > 0) {
    std::printf("%lld of %lld output elements are NaN or infinite (unwritten or overflowed)\n",
                static_cast<long long>(non_finite), static_cast<long long>(out.size()));
  }
  std::printf("ran on %s: max |O - O_ref| = %.3e over the finite elements -> %s\n",
              gpu_name().c_str(), max_err, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
