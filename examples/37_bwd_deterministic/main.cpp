// Example 37: the backward's two dQ modes, measured on the GPU.
//
// CK's dispatcher example 37 introduced the deterministic backward and simulated it on the CPU.
// Here both modes run on the GPU through the JIT dispatcher:
//   non-deterministic (default): every key tile adds its dQ contribution into an fp32 buffer with
//     atomic reductions, in whatever order the SMs get there;
//   deterministic: the same additions, but each query tile's contributions land in key-tile
//     order (per-query-tile semaphores), so dQ, dK and dV are bit-identical from run to run.
// Sections follow the seed: problem, JIT compile, both backwards, per-tile dQ buffers, the mode
// comparison, a reproducibility test, the memory overhead, the API pattern and a summary. Every
// number printed is measured in this run. Without a GPU the kernels are still compiled (and
// cached) and the CPU reference (fp64) stands in for the GPU sections.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fmha_jit/fmha_jit.hpp"
#include "reference/cpu_reference.hpp"

namespace {
using namespace fmha_jit;
namespace ref = fmha_jit::reference;

struct Options {
  std::string arch;
  std::string dtype = "fp16";
  int batch = 2, nhead = 8, seqlen = 64, hdim = 128, num_tiles = 4;
  int runs = 5;      // reproducibility test
  int repeats = 20;  // timing: median of this many launches per mode
};

// Above this many multiply-adds the fp64 CPU reference is skipped (it would take minutes).
constexpr double kCpuReferenceMaxMacs = 2e9;

void rule(char c = '-') { std::printf("%s\n", std::string(70, c).c_str()); }
void section(const char* title) { std::printf("\n--- %s ---\n", title); }

struct Tensors {
  std::vector<float> q, k, v, d_o;  // values exactly representable in the dtype
};

// Gradients as the dtype's 16-bit patterns (compared bitwise) and as floats.
struct Gradients {
  std::vector<std::uint16_t> bits[3];  // dQ, dK, dV
  std::vector<float> values[3];
};
const char* kGradNames[3] = {"dQ", "dK", "dV"};

float widen(std::uint16_t h, bool bf16) {
  return bf16 ? ref::bf16_bits_to_float(h) : ref::half_bits_to_float(h);
}

std::vector<std::uint16_t> narrow(const std::vector<float>& x, bool bf16) {
  std::vector<std::uint16_t> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    out[i] = bf16 ? ref::float_to_bf16_bits(x[i]) : ref::float_to_half_bits(x[i]);
  }
  return out;
}

DeviceBuffer upload(const std::vector<std::uint16_t>& bits) {
  DeviceBuffer b(bits.size() * 2);
  b.upload(bits.data(), bits.size() * 2);
  return b;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - b[i]));
  return m;
}
double mean_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += std::fabs(double(a[i]) - b[i]);
  return a.empty() ? 0 : s / double(a.size());
}

// Elements that are NaN or infinite. Outputs are poisoned (0xFF bytes, NaN in both dtypes)
// before each run, so an element a kernel did not write stays NaN; comparisons and maxima over
// NaN drop it, and a NaN left in the same place every run is even bit-exact.
std::size_t non_finite(const std::vector<float>& x) {
  return static_cast<std::size_t>(
      std::count_if(x.begin(), x.end(), [](float e) { return !std::isfinite(e); }));
}

// Prints a failure line for each of `what`'s tensors with a non-finite element; true if none.
bool all_finite(const char* what, const std::vector<float>* tensors, const char* const* names,
                int count) {
  bool ok = true;
  for (int i = 0; i < count; ++i) {
    if (const std::size_t bad = non_finite(tensors[i]); bad > 0) {
      std::printf("  FAIL: %s: %zu of %zu %s elements are NaN or infinite\n", what, bad,
                  tensors[i].size(), names[i]);
      ok = false;
    }
  }
  return ok;
}

void print_ranges(const std::vector<float>* grads) {
  for (int t = 0; t < 3; ++t) {
    const auto [lo, hi] = std::minmax_element(grads[t].begin(), grads[t].end());
    std::printf("  %s range: [%.4e, %.4e]\n", kGradNames[t], *lo, *hi);
  }
}

// The device side of one problem: inputs, the forward's O and LSE, and a backward launcher.
class GpuBackward {
 public:
  GpuBackward(const FmhaProblem& p, const Tensors& t, bool bf16, FmhaRunner& fwd)
      : p_(p), bf16_(bf16) {
    q_ = upload(narrow(t.q, bf16));
    k_ = upload(narrow(t.k, bf16));
    v_ = upload(narrow(t.v, bf16));
    do_ = upload(narrow(t.d_o, bf16));
    o_ = DeviceBuffer(p.o_elements() * 2);
    lse_ = DeviceBuffer(p.lse_elements() * 4);
    o_.fill(0xFF);  // NaN: an element of O or LSE the forward does not write shows
    lse_.fill(0xFF);
    fwd.run_fwd(p, {q_.data(), k_.data(), v_.data(), o_.data(), static_cast<float*>(lse_.data())});
    for (int i = 0; i < 3; ++i) {
      const auto n = i == 0 ? p.q_elements() : i == 1 ? p.k_elements() : p.v_elements();
      grads_[i] = DeviceBuffer(n * 2);
    }
    device_synchronize();
  }

  // One backward of `runner`; with a key slice [k0, k0 + kn) it computes that slice's share of
  // dQ (P from the full problem's LSE, D from its O): the seed's per-tile dQ buffer.
  void launch(FmhaRunner& runner, std::int64_t k0 = 0, std::int64_t kn = 0) {
    FmhaProblem p = p_;
    const auto elem = [](const DeviceBuffer& b, std::int64_t off) {
      return static_cast<char*>(b.data()) + off * 2;
    };
    std::int64_t k_off = 0, v_off = 0;
    if (kn > 0) {
      p.k_strides = p_.k_stride();
      p.v_strides = p_.v_stride();
      p.seqlen_k = kn;
      k_off = k0 * p_.k_stride().row;
      v_off = k0 * p_.v_stride().row;
    }
    runner.run_bwd(p, {q_.data(), elem(k_, k_off), elem(v_, v_off), o_.data(),
                       static_cast<const float*>(lse_.data()), do_.data(), grads_[0].data(),
                       elem(grads_[1], k_off), elem(grads_[2], v_off)});
  }

  Gradients download() const {
    device_synchronize();
    Gradients g;
    for (int i = 0; i < 3; ++i) {
      g.bits[i].resize(grads_[i].size() / 2);
      grads_[i].download(g.bits[i].data(), grads_[i].size());
      g.values[i].resize(g.bits[i].size());
      for (std::size_t j = 0; j < g.bits[i].size(); ++j)
        g.values[i][j] = widen(g.bits[i][j], bf16_);
    }
    return g;
  }

  Gradients run(FmhaRunner& runner) {
    for (auto& g : grads_) g.fill(0xFF);  // NaN: a gradient the kernel does not write shows
    launch(runner);
    return download();
  }

  // Median milliseconds of `repeats` launches.
  double time_ms(FmhaRunner& runner, int repeats) {
    GpuTimer timer;
    std::vector<float> ms;
    launch(runner);  // warm-up (module load, workspace allocation)
    for (int i = 0; i < repeats; ++i) {
      timer.start();
      launch(runner);
      timer.stop();
      ms.push_back(timer.elapsed_ms());
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }

  std::vector<float> host_o_and_lse(std::vector<float>& lse) const {
    std::vector<std::uint16_t> bits(p_.o_elements());
    o_.download(bits.data(), bits.size() * 2);
    lse.resize(p_.lse_elements());
    lse_.download(lse.data(), lse.size() * 4);
    std::vector<float> o(bits.size());
    for (std::size_t i = 0; i < bits.size(); ++i) o[i] = widen(bits[i], bf16_);
    return o;
  }

 private:
  FmhaProblem p_;
  bool bf16_;
  DeviceBuffer q_, k_, v_, do_, o_, lse_, grads_[3];
};

ref::AttentionShape shape_of(const FmhaProblem& p) {
  ref::AttentionShape s;
  s.batch = int(p.batch);
  s.nhead_q = int(p.nhead_q);
  s.nhead_k = int(p.nhead_k);
  s.seqlen_q = int(p.seqlen_q);
  s.seqlen_k = int(p.seqlen_k);
  s.hdim_q = int(p.hdim_q);
  s.hdim_v = int(p.hdim_v);
  s.scale = p.softmax_scale();
  return s;
}
ref::Strides strides_of(const TensorStrides& s) { return {s.batch, s.head, s.row}; }

// fp64 CPU backward of the key slice [k0, k0 + kn) given the full problem's O and LSE (kn = 0:
// all keys). dK and dV of the slice land at their rows of the full-size outputs.
void cpu_backward(const FmhaProblem& p, const Tensors& t, const std::vector<float>& o,
                  const std::vector<float>& lse, std::vector<float>* grads, std::int64_t k0 = 0,
                  std::int64_t kn = 0) {
  ref::AttentionShape s = shape_of(p);
  if (kn > 0) s.seqlen_k = int(kn);
  const auto ks = p.k_stride(), vs = p.v_stride();
  ref::attention_backward(
      s, {t.q.data(), strides_of(p.q_stride())}, {t.k.data() + k0 * ks.row, strides_of(ks)},
      {t.v.data() + k0 * vs.row, strides_of(vs)}, {o.data(), strides_of(p.o_stride())},
      {t.d_o.data(), strides_of(p.o_stride())}, lse.data(),
      {grads[0].data(), strides_of(p.q_stride())}, {grads[1].data() + k0 * ks.row, strides_of(ks)},
      {grads[2].data() + k0 * vs.row, strides_of(vs)});
}

void print_api_pattern() {
  section("GPU Deterministic API Pattern");
  std::printf(
      "  FmhaKernelConfig c;  c.family = Family::bwd;  c.deterministic = true;\n"
      "  auto setup = setup_fmha_dispatcher(c);\n"
      "  std::size_t bytes = bwd_workspace_bytes(problem, c);   // or let the runner "
      "allocate\n"
      "  setup.runner->run_bwd(problem, {q, k, v, o, lse, d_o, d_q, d_k, d_v, ws, bytes}, "
      "stream);\n");
}

std::shared_ptr<FmhaRunner> setup(const FmhaKernelConfig& c, const char* what) {
  const FmhaSetupResult r = setup_fmha_dispatcher(c);
  if (!r.success) throw Error(r.error_code.value_or(ErrorCode::invalid_config), r.error);
  std::printf("  %-26s %-7s %7.3f s  (%s)\n", what, std::string(to_string(r.source)).c_str(),
              r.build_time_s, r.runner->kernel_symbols().back().c_str());
  return r.runner;
}

int run(const Options& opt) {
  const bool bf16 = opt.dtype == "bf16";
  FmhaProblem p;
  p.batch = opt.batch;
  p.nhead_q = p.nhead_k = opt.nhead;
  p.seqlen_q = p.seqlen_k = opt.seqlen;
  p.hdim_q = p.hdim_v = opt.hdim;
  p.validate();
  const std::int64_t tile_sk = std::max<std::int64_t>(1, p.seqlen_k / opt.num_tiles);
  const std::int64_t tiles = (p.seqlen_k + tile_sk - 1) / tile_sk;

  rule('=');
  std::printf("Example 37: Backward Pass Deterministic Mode (on the GPU)\n");
  rule('=');
  std::printf("\n  Problem: B=%lld H=%lld S=%lld D=%lld %s\n", (long long)p.batch,
              (long long)p.nhead_q, (long long)p.seqlen_q, (long long)p.hdim_q, opt.dtype.c_str());
  std::printf("  Tiles: %lld (seqlen_k split for the per-tile dQ analysis)\n", (long long)tiles);
  std::printf("  Tile size: %lld\n", (long long)tile_sk);

  section("JIT Compilation");
  FmhaKernelConfig fwd_config;
  fwd_config.family = Family::fwd;
  fwd_config.dtype = bf16 ? DType::bf16 : DType::fp16;
  fwd_config.hdim_q = fwd_config.hdim_v = opt.hdim;
  fwd_config.arch = opt.arch;
  FmhaKernelConfig bwd_config = fwd_config;
  bwd_config.family = Family::bwd;
  FmhaKernelConfig det_config = bwd_config;
  det_config.deterministic = true;
  auto fwd = setup(fwd_config, "forward (O, LSE)");
  auto nondet = setup(bwd_config, "backward, atomic dQ");
  auto det = setup(det_config, "backward, deterministic");
  const int block_n = det->config().block_n;
  std::printf(
      "  kernel key tile: %d keys; a query tile receives ceil(S / %d) = %lld ordered "
      "dQ contributions\n",
      block_n, block_n, (long long)((p.seqlen_k + block_n - 1) / block_n));

  std::mt19937 rng(42);
  std::normal_distribution<float> dist;
  Tensors t;
  auto make = [&](std::int64_t n) {
    std::vector<float> x(n);
    for (auto& e : x) e = ref::round_to_dtype(dist(rng), bf16);
    return x;
  };
  t.q = make(p.q_elements());
  t.k = make(p.k_elements());
  t.v = make(p.v_elements());
  t.d_o = make(p.o_elements());
  const double macs = 4.0 * p.batch * p.nhead_q * p.seqlen_q * p.seqlen_k * p.hdim_q;
  const bool cpu_ok = macs <= kCpuReferenceMaxMacs;

  const BwdWorkspaceSize ws_nondet = bwd_workspace_size(p, bwd_config);
  const BwdWorkspaceSize ws_det = bwd_workspace_size(p, det_config);
  const double dq_bytes = double(p.q_elements()) * 4;  // one fp32 dQ buffer
  const double multi_buffer = double(tiles) * dq_bytes;

  if (!gpu_available()) {
    std::printf(
        "\n  No GPU on this machine: the kernels above are compiled and cached; the GPU\n"
        "  sections are replaced by the CPU reference (fp64, no atomics), as the seed "
        "did.\n");
    if (!cpu_ok) {
      std::printf(
          "  The problem is too large for the CPU reference (%.1e MACs); use a smaller "
          "--seqlen.\n",
          macs);
      return 0;
    }
    std::vector<float> o(p.o_elements()), lse(p.lse_elements());
    ref::attention_forward(
        shape_of(p), {t.q.data(), strides_of(p.q_stride())}, {t.k.data(), strides_of(p.k_stride())},
        {t.v.data(), strides_of(p.v_stride())}, {o.data(), strides_of(p.o_stride())}, lse.data());
    std::vector<float> g[3] = {std::vector<float>(p.q_elements()),
                               std::vector<float>(p.k_elements()),
                               std::vector<float>(p.v_elements())};
    section("CPU Reference Backward");
    cpu_backward(p, t, o, lse, g);
    print_ranges(g);
    section("Per-Tile dQ Buffer Analysis (CPU)");
    std::vector<float> sum(p.q_elements(), 0.f);
    double total = 0;
    for (float x : g[0]) total += std::fabs(x);
    std::printf("\n  %6s %12s %12s %12s\n", "Tile", "|buf| mean", "|buf| max", "% of total");
    for (std::int64_t i = 0; i < tiles; ++i) {
      std::vector<float> gt[3] = {std::vector<float>(p.q_elements()), g[1], g[2]};
      const std::int64_t k0 = i * tile_sk;
      cpu_backward(p, t, o, lse, gt, k0, std::min(tile_sk, p.seqlen_k - k0));
      double l1 = 0, mx = 0;
      for (std::size_t j = 0; j < gt[0].size(); ++j) {
        l1 += std::fabs(gt[0][j]);
        mx = std::max(mx, double(std::fabs(gt[0][j])));
        sum[j] += gt[0][j];
      }
      std::printf("  %6lld %12.4e %12.4e %11.1f%%\n", (long long)i, l1 / gt[0].size(), mx,
                  100 * l1 / (total + 1e-15));
    }
    section("Deterministic vs Non-Deterministic Comparison (CPU)");
    std::printf(
        "  multi-buffer sum vs one-pass dQ: max |diff| %.2e. The CPU has no atomics:\n"
        "  both orders are fixed here, so this is only the reassociation error.\n",
        max_abs_diff(sum, g[0]));
    section("Reproducibility Test (CPU)");
    std::printf("  skipped: a sequential CPU loop is reproducible by construction.\n");
    section("Deterministic Mode Memory Overhead");
    std::printf("  workspace, atomic mode:        %12zu bytes\n", ws_nondet.total);
    std::printf("  workspace, deterministic mode: %12zu bytes (+%zu: semaphores)\n", ws_det.total,
                ws_det.semaphores);
    std::printf("  the seed's multi-buffer dQ:    %12.0f bytes (%lld tiles x fp32 dQ)\n",
                multi_buffer, (long long)tiles);
    print_api_pattern();
    std::printf("\n");
    rule('=');
    std::printf("  GPU: none - compile-only run; bit-exactness and slowdown need a GPU\n");
    rule('=');
    return 0;
  }

  GpuBackward gpu(p, t, bf16, *fwd);
  std::printf("  GPU: %s\n", gpu_name().c_str());
  bool finite = true;  // every output element of every run below; the exit status requires it

  section("Non-Deterministic Backward (GPU, atomic dQ)");
  const Gradients g_nd = gpu.run(*nondet);
  finite &= all_finite("atomic backward", g_nd.values, kGradNames, 3);
  print_ranges(g_nd.values);
  const double ms_nd = gpu.time_ms(*nondet, opt.repeats);
  const double flops = 2.5 * 4.0 * p.batch * p.nhead_q * p.seqlen_q * p.seqlen_k * p.hdim_q;
  std::printf("  time: %.4f ms (median of %d), %.1f TFLOP/s\n", ms_nd, opt.repeats,
              flops / ms_nd * 1e-9);

  section("Deterministic Backward (GPU, ordered dQ)");
  const Gradients g_det = gpu.run(*det);
  finite &= all_finite("deterministic backward", g_det.values, kGradNames, 3);
  print_ranges(g_det.values);
  const double ms_det = gpu.time_ms(*det, opt.repeats);
  std::printf("  time: %.4f ms (median of %d), %.1f TFLOP/s\n", ms_det, opt.repeats,
              flops / ms_det * 1e-9);

  std::vector<float> o, lse;
  o = gpu.host_o_and_lse(lse);
  const std::vector<float> fwd_outputs[2] = {o, lse};
  const char* const kFwdNames[2] = {"O", "LSE"};
  finite &= all_finite("forward", fwd_outputs, kFwdNames, 2);
  if (cpu_ok) {
    std::vector<float> g[3] = {std::vector<float>(p.q_elements()),
                               std::vector<float>(p.k_elements()),
                               std::vector<float>(p.v_elements())};
    cpu_backward(p, t, o, lse, g);
    std::printf("\n  against the CPU reference (fp64):\n");
    for (int i = 0; i < 3; ++i) {
      const auto a = ref::compare(g_nd.values[i].data(), g[i].data(), g[i].size());
      const auto b = ref::compare(g_det.values[i].data(), g[i].data(), g[i].size());
      std::printf("  %s max rel error: atomic %.2e, deterministic %.2e\n", kGradNames[i], a.max_rel,
                  b.max_rel);
    }
  } else {
    std::printf("\n  CPU reference skipped (%.1e MACs)\n", macs);
  }

  section("Per-Tile dQ Buffer Analysis (GPU)");
  // Each buffer is the deterministic kernel run on one key slice with the full problem's LSE and
  // O: exactly that slice's dQ contribution, rounded to the dtype as a separate buffer would be.
  std::vector<float> sum(p.q_elements(), 0.f);
  double total = 0;
  for (float x : g_det.values[0]) total += std::fabs(x);
  std::printf("\n  %6s %12s %12s %12s\n", "Tile", "|buf| mean", "|buf| max", "% of total");
  rule();
  for (std::int64_t i = 0; i < tiles; ++i) {
    const std::int64_t k0 = i * tile_sk;
    gpu.launch(*det, k0, std::min(tile_sk, p.seqlen_k - k0));
    const Gradients gt = gpu.download();
    // dQ covers every query row; dK and dV only the slice's rows, the others keep the last run's.
    finite &= all_finite("per-tile deterministic backward", gt.values, kGradNames, 1);
    double l1 = 0, mx = 0;
    for (std::size_t j = 0; j < gt.values[0].size(); ++j) {
      const float x = gt.values[0][j];
      l1 += std::fabs(x);
      mx = std::max(mx, double(std::fabs(x)));
      sum[j] += x;
    }
    std::printf("  %6lld %12.4e %12.4e %11.1f%%\n", (long long)i, l1 / gt.values[0].size(), mx,
                100 * l1 / (total + 1e-15));
  }
  std::printf(
      "  sum of the %lld buffers vs the one-pass dQ: max |diff| %.2e (each buffer rounded "
      "to %s)\n",
      (long long)tiles, max_abs_diff(sum, g_det.values[0]), opt.dtype.c_str());

  section("Deterministic vs Non-Deterministic Comparison");
  std::printf("\n  %-6s %14s %14s %10s\n", "Grad", "Max abs diff", "Mean abs diff", "Bitwise");
  rule();
  for (int i = 0; i < 3; ++i) {
    const bool same = g_det.bits[i] == g_nd.bits[i];
    std::printf("  %-6s %14.2e %14.2e %10s\n", kGradNames[i],
                max_abs_diff(g_det.values[i], g_nd.values[i]),
                mean_abs_diff(g_det.values[i], g_nd.values[i]), same ? "YES" : "NO");
  }
  std::printf(
      "  dK and dV never differ: one CTA owns each key tile. dQ may: the atomic mode adds\n"
      "  the key tiles' fp32 contributions in arrival order.\n");

  section("Reproducibility Test");
  bool exact[2] = {true, true};
  double variation[2] = {0, 0};
  for (int mode = 0; mode < 2; ++mode) {
    FmhaRunner& runner = mode == 0 ? *nondet : *det;
    const Gradients& first = mode == 0 ? g_nd : g_det;
    for (int r = 1; r < opt.runs; ++r) {
      const Gradients g = gpu.run(runner);
      finite &=
          all_finite(mode == 0 ? "atomic backward, repeated" : "deterministic backward, repeated",
                     g.values, kGradNames, 3);
      for (int i = 0; i < 3; ++i) {
        variation[mode] = std::max(variation[mode], max_abs_diff(g.values[i], first.values[i]));
        exact[mode] = exact[mode] && g.bits[i] == first.bits[i];
      }
    }
  }
  std::printf("  Runs: %d per mode\n", opt.runs);
  std::printf("  atomic:        max gradient variation %.2e, bit-exact: %s\n", variation[0],
              exact[0] ? "YES" : "NO");
  std::printf("  deterministic: max gradient variation %.2e, bit-exact: %s\n", variation[1],
              exact[1] ? "YES" : "NO");
  if (p.seqlen_k <= block_n) {
    std::printf(
        "  (S <= %d: one key tile per query tile, nothing for the atomic mode to "
        "reorder; try --seqlen 4096)\n",
        block_n);
  }

  section("Deterministic Mode Memory Overhead");
  std::printf("  workspace, atomic mode:        %12zu bytes (D %zu + fp32 dQ %zu)\n",
              ws_nondet.total, ws_nondet.d_rowsum, ws_nondet.dq_accum);
  std::printf("  workspace, deterministic mode: %12zu bytes (+%zu bytes of semaphores, %.3f%%)\n",
              ws_det.total, ws_det.semaphores,
              100.0 * double(ws_det.semaphores) / double(ws_nondet.total));
  std::printf("  the seed's multi-buffer dQ:    %12.0f bytes (%lld tiles x fp32 dQ = %.1fx dQ)\n",
              multi_buffer, (long long)tiles, multi_buffer / dq_bytes);

  print_api_pattern();

  const double slowdown = ms_det / ms_nd;
  std::printf("\n");
  rule('=');
  std::printf("  Reproducible:    deterministic bit-exact over %d runs: %s; atomic: %s\n", opt.runs,
              exact[1] ? "YES" : "NO", exact[0] ? "YES" : "NO");
  std::printf("  Performance:     deterministic %.4f ms vs atomic %.4f ms: %.2fx (%+.1f%%)\n",
              ms_det, ms_nd, slowdown, (slowdown - 1) * 100);
  std::printf("  Memory overhead: %zu bytes of semaphores (the seed's scheme: %.1fx dQ)\n",
              ws_det.semaphores, multi_buffer / dq_bytes);
  std::printf("  GPU:             %s, kernels %s\n", gpu_name().c_str(),
              std::string(to_string(det->config().impl)).c_str());
  std::printf("  Outputs:         %s\n",
              finite ? "every element finite"
                     : "FAIL: NaN or infinite elements (unwritten or overflowed), listed above");
  rule('=');
  return exact[1] && finite ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  try {
    opt.arch = fmha_jit::detect_gpu_arch();
  } catch (const std::exception& e) {  // FMHA_JIT_ARCH or FMHA_JIT_DEVICE set to a bad value
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  CLI::App app{"Example 37: deterministic vs non-deterministic FMHA backward on the GPU"};
  app.add_option("--arch", opt.arch, "target arch (default: the GPU's, or FMHA_JIT_ARCH)");
  app.add_option("--batch", opt.batch, "batch size")->check(CLI::PositiveNumber);
  app.add_option("--nhead", opt.nhead, "heads")->check(CLI::PositiveNumber);
  app.add_option("--seqlen", opt.seqlen, "sequence length (queries and keys)")
      ->check(CLI::PositiveNumber);
  app.add_option("--hdim", opt.hdim, "head dim: 32, 64, 96, 128, 192, 256");
  app.add_option("--num-tiles", opt.num_tiles, "seqlen_k tiles of the per-tile dQ analysis")
      ->check(CLI::PositiveNumber);
  app.add_option("--dtype", opt.dtype, "fp16 or bf16")->check(CLI::IsMember({"fp16", "bf16"}));
  app.add_option("--runs", opt.runs, "runs of the reproducibility test")
      ->check(CLI::Range(2, 1000));
  app.add_option("--repeats", opt.repeats, "timed launches per mode (median)")
      ->check(CLI::Range(1, 10000));
  CLI11_PARSE(app, argc, argv);
  try {
    return run(opt);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
