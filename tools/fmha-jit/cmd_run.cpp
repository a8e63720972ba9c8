// `fmha-jit run`: one attention problem on the GPU through the public API, a dense batch or a
// packed one of variable-length sequences, with sinks and a softcap when asked. Inputs are random
// or read from .npy files; outputs can be written as .npy, checked against a reference (--verify)
// and, for the backward, checked for run-to-run reproducibility (--repro). The kernel is timed once
// after a warm-up; setup (cache lookup or JIT compile) is reported separately.
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>

#include "codegen/kernel_name.hpp"
#include "fmha_jit/fmha_jit.hpp"
#include "kernels/registry.hpp"
#include "tools/fmha-jit/attention_io.hpp"
#include "tools/fmha-jit/cli.hpp"
#include "tools/fmha-jit/flops.hpp"
#include "tools/fmha-jit/format.hpp"
#include "tools/fmha-jit/packed_batch.hpp"
#include "tools/fmha-jit/problem_options.hpp"
#include "tools/fmha-jit/run_inputs.hpp"
#include "tools/fmha-jit/run_reference.hpp"

namespace fmha_jit::cli {
namespace {
namespace fs = std::filesystem;
namespace ref = fmha_jit::reference;

// Above this many multiply-adds the fp64 CPU reference takes longer than a user waits (seconds on
// a few cores); larger problems are checked against the GPU reference kernel, which the test suite
// itself verifies against the CPU reference - unless that kernel does not serve the config (packed
// batches, sinks, softcap), when the CPU reference is the only one.
constexpr double kCpuReferenceMaxMacs = 3e8;

struct RunOptions {
  ProblemOptions problem;
  std::string inputs;
  std::string outputs;
  bool verify = false;
  bool json = false;
  int repro = 0;
};

// What a launch reads on the GPU: the inputs (run_inputs.hpp) uploaded. sinks, cu_q and cu_k hold
// no memory (null) where the problem has none of them.
struct DeviceInputs {
  DeviceBuffer q, k, v, o, lse, d_o, sinks, cu_q, cu_k;
  const float* sinks_ptr() const { return static_cast<const float*>(sinks.data()); }
};

struct Setup {
  FmhaSetupResult result;
  std::string name;  // kernel base name of the canonical config
};

Setup setup_or_throw(const FmhaKernelConfig& config, const GlobalOptions& g) {
  Setup s{setup_fmha_dispatcher(config, SetupOptions{g.cache_root(), /*load=*/true}), ""};
  if (!s.result.success) throw CommandFailed("setup failed: " + s.result.error);
  s.name = codegen::kernel_base_name(s.result.config);
  spdlog::debug("{}: {} in {:.3f} s", s.name, to_string(s.result.source), s.result.build_time_s);
  return s;
}

nlohmann::json setup_json(const Setup& s) {
  return {{"config", to_json(s.result.config)},
          {"kernel", s.name},
          {"key", s.result.key},
          {"source", std::string(to_string(s.result.source))},
          {"build_time_s", s.result.build_time_s}};
}

std::string setup_text(const Setup& s) {
  return fmt::format("{} ({}, {})", s.name, to_string(s.result.source),
                     human_seconds(s.result.build_time_s));
}

DeviceInputs upload(const Inputs& in, const FmhaProblem& p) {
  DeviceInputs d;
  d.q = upload_bits(in.q.bits);
  d.k = upload_bits(in.k.bits);
  d.v = upload_bits(in.v.bits);
  if (!in.d_o.bits.empty()) d.d_o = upload_bits(in.d_o.bits);
  if (in.o) d.o = upload_bits(in.o->bits);
  if (in.lse) d.lse = upload_floats(*in.lse);
  if (!in.sinks.empty()) d.sinks = upload_floats(in.sinks);
  if (p.varlen()) {
    d.cu_q = upload_ints({p.cu_seqlens_q_host, static_cast<std::size_t>(p.batch + 1)});
    d.cu_k = upload_ints({p.cu_seqlens_k_host, static_cast<std::size_t>(p.batch + 1)});
  }
  return d;
}

struct FwdOut {
  DeviceBuffer o, lse;
};

void launch_fwd(FmhaRunner& runner, const FmhaProblem& p, const DeviceInputs& d, FwdOut& out) {
  FwdTensors t{d.q.data(), d.k.data(), d.v.data(), out.o.data(),
               runner.config().lse ? static_cast<float*>(out.lse.data()) : nullptr};
  t.sinks = d.sinks_ptr();
  runner.run_fwd(p, t);
}

FwdOut fwd_buffers(const FmhaProblem& p) {
  return {poisoned(p.o_elements() * 2), poisoned(p.lse_elements() * 4)};
}

FwdOut run_forward_once(FmhaRunner& runner, const FmhaProblem& p, const DeviceInputs& d) {
  FwdOut out = fwd_buffers(p);
  launch_fwd(runner, p, d, out);
  device_synchronize();
  return out;
}

struct BwdOut {
  DeviceBuffer dq, dk, dv, d_sinks, workspace;
};

BwdOut bwd_buffers(const FmhaRunner& runner, const FmhaProblem& p) {
  BwdOut out{poisoned(p.q_elements() * 2),
             poisoned(p.k_elements() * 2),
             poisoned(p.v_elements() * 2),
             {},
             {}};
  if (runner.config().sinks) out.d_sinks = poisoned(p.nhead_q * 4);
  // Owned here rather than by the runner, so that its allocation is never inside the timed launch.
  if (const std::size_t ws = runner.bwd_workspace_bytes(p); ws > 0)
    out.workspace = DeviceBuffer(ws);
  return out;
}

void launch_bwd(FmhaRunner& runner, const FmhaProblem& p, const DeviceInputs& d, BwdOut& out) {
  BwdTensors t{d.q.data(),
               d.k.data(),
               d.v.data(),
               d.o.data(),
               static_cast<const float*>(d.lse.data()),
               d.d_o.data(),
               out.dq.data(),
               out.dk.data(),
               out.dv.data(),
               out.workspace.data(),
               out.workspace.size()};
  t.sinks = d.sinks_ptr();
  t.d_sinks = static_cast<float*>(out.d_sinks.data());
  runner.run_bwd(p, t);
}

// A warm-up launch (module load, first-touch costs), then one timed launch into `out`, which is
// NaN-poisoned and written by that launch only. The timed launch is queued behind a second
// untimed one, so that the GPU is busy while the host prepares it and the start event does not
// measure the host's launch latency.
template <class Out, class Launch>
float time_once(Launch& launch, Out& scratch, Out& out) {
  launch(scratch);
  device_synchronize();
  launch(scratch);
  GpuTimer timer;
  timer.start();
  launch(out);
  timer.stop();
  const float ms = timer.elapsed_ms();
  device_synchronize();
  return ms;
}

// Host copies of outputs in the order they are written and checked.
struct Output {
  std::string name;  // "O", "LSE", "dQ", "dK", "dV"
  std::string file;  // "o.npy", ...
  TensorShape shape;
  std::vector<float> got, want;
  ref::Quantity quantity;
};

std::vector<Output> download_fwd(const FwdOut& out, const FmhaProblem& p, bool lse, bool bf16) {
  std::vector<Output> r;
  r.push_back({"O",
               "o.npy",
               o_shape(p),
               widen(download_bits(out.o, p.o_elements()), bf16),
               {},
               ref::Quantity::forward_output});
  if (lse) {
    r.push_back({"LSE",
                 "lse.npy",
                 lse_shape(p),
                 download_floats(out.lse, p.lse_elements()),
                 {},
                 ref::Quantity::lse});
  }
  return r;
}

std::vector<Output> download_bwd(const BwdOut& out, const FmhaProblem& p, bool bf16) {
  const auto g = ref::Quantity::gradient;
  std::vector<Output> r;
  r.push_back(
      {"dQ", "dq.npy", q_shape(p), widen(download_bits(out.dq, p.q_elements()), bf16), {}, g});
  r.push_back(
      {"dK", "dk.npy", k_shape(p), widen(download_bits(out.dk, p.k_elements()), bf16), {}, g});
  r.push_back(
      {"dV", "dv.npy", v_shape(p), widen(download_bits(out.dv, p.v_elements()), bf16), {}, g});
  if (out.d_sinks.data()) {
    r.push_back(
        {"dSinks", "d_sinks.npy", sinks_shape(p), download_floats(out.d_sinks, p.nhead_q), {}, g});
  }
  return r;
}

// The outputs, and beside them what else describes the run's inputs: the packed batch's
// cu_seqlens and the sinks, so that another tool can recompute the outputs from the folder.
void write_outputs(const fs::path& dir, const std::vector<Output>& outputs, const FmhaProblem& p,
                   const Inputs& in) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(ErrorCode::io_error, "cannot create " + dir.string() + ": " + ec.message());
  if (p.varlen()) {
    const auto n = static_cast<std::size_t>(p.batch + 1);
    write_int32_output(dir, "cu_seqlens_q.npy", cu_seqlens_shape(p), {p.cu_seqlens_q_host, n});
    write_int32_output(dir, "cu_seqlens_k.npy", cu_seqlens_shape(p), {p.cu_seqlens_k_host, n});
  }
  if (!in.sinks.empty()) write_output(dir, "sinks.npy", sinks_shape(p), in.sinks);
  for (const auto& out : outputs) {
    write_output(dir, out.file, out.shape, out.got);
    const auto nan =
        std::count_if(out.got.begin(), out.got.end(), [](float x) { return std::isnan(x); });
    if (nan > 0) spdlog::warn("{} holds {} NaN: elements the kernel did not write?", out.file, nan);
  }
}

// Fills `want` of every output from the fp64 CPU reference fed the dtype-rounded inputs (sequence
// by sequence for a packed batch: run_reference.hpp).
void cpu_reference(std::vector<Output>& outputs, const FmhaProblem& p, MaskKind mask,
                   const Inputs& in, Family family) {
  ReferenceInputs r{in.q.values, in.k.values, in.v.values, {}, {}, {}, in.sinks};
  if (family == Family::fwd) {
    ReferenceOutputs want = reference_forward(p, mask, r);
    outputs[0].want = std::move(want.o);
    if (outputs.size() > 1) outputs[1].want = std::move(want.lse);
    return;
  }
  r.o = in.o->values;
  r.d_o = in.d_o.values;
  r.lse = *in.lse;
  ReferenceOutputs want = reference_backward(p, mask, r);
  outputs[0].want = std::move(want.dq);
  outputs[1].want = std::move(want.dk);
  outputs[2].want = std::move(want.dv);
  if (outputs.size() > 3) outputs[3].want = std::move(want.d_sinks);
}

// Why the GPU reference kernel cannot check `config` (it serves no packed batches or score
// modifiers yet), or empty when it can.
std::string gpu_reference_gap(const FmhaKernelConfig& config) {
  FmhaKernelConfig rc = config;
  rc.impl = KernelImpl::reference;
  return kernels::family_of(KernelImpl::reference).gap(rc);
}

// Fills `want` from the GPU reference kernel (impl reference) run on the same device inputs.
void gpu_reference(std::vector<Output>& outputs, const FmhaProblem& p,
                   const FmhaKernelConfig& config, const DeviceInputs& d, const GlobalOptions& g) {
  FmhaKernelConfig rc = config;
  rc.impl = KernelImpl::reference;
  rc.lse = true;
  rc.block_m = rc.block_n = rc.num_warps = rc.num_stages = 0;
  if (config.impl == KernelImpl::reference) {
    spdlog::warn(
        "the problem is too large for the CPU reference: comparing impl reference with "
        "itself");
  }
  const Setup s = setup_or_throw(rc, g);
  const bool bf16 = config.dtype == DType::bf16;
  std::vector<Output> want;
  if (config.family == Family::fwd) {
    want = download_fwd(run_forward_once(*s.result.runner, p, d), p, config.lse, bf16);
  } else {
    BwdOut out = bwd_buffers(*s.result.runner, p);
    launch_bwd(*s.result.runner, p, d, out);
    device_synchronize();
    want = download_bwd(out, p, bf16);
  }
  for (std::size_t i = 0; i < outputs.size(); ++i) outputs[i].want = std::move(want[i].got);
}

struct Repro {
  int runs = 0;
  double max_diff[3] = {0, 0, 0};  // dQ, dK, dV
  bool bit_exact = true;
};

// Runs the backward `runs` times into NaN-poisoned outputs and compares every run with the first.
Repro check_repro(FmhaRunner& runner, const FmhaProblem& p, const DeviceInputs& d, int runs,
                  bool bf16) {
  Repro r;
  r.runs = runs;
  std::vector<std::uint16_t> first[3];
  BwdOut out = bwd_buffers(runner, p);
  for (int run = 0; run < runs; ++run) {
    for (DeviceBuffer* b : {&out.dq, &out.dk, &out.dv}) b->fill(0xFF);
    launch_bwd(runner, p, d, out);
    device_synchronize();
    const DeviceBuffer* buffers[3] = {&out.dq, &out.dk, &out.dv};
    const std::size_t sizes[3] = {static_cast<std::size_t>(p.q_elements()),
                                  static_cast<std::size_t>(p.k_elements()),
                                  static_cast<std::size_t>(p.v_elements())};
    for (int t = 0; t < 3; ++t) {
      auto bits = download_bits(*buffers[t], sizes[t]);
      if (run == 0) {
        first[t] = std::move(bits);
        continue;
      }
      if (bits == first[t]) continue;
      r.bit_exact = false;
      const auto a = widen(first[t], bf16), b = widen(bits, bf16);
      for (std::size_t i = 0; i < a.size(); ++i) {
        if (bits[i] == first[t][i]) continue;
        const double diff = std::fabs(double(a[i]) - double(b[i]));
        // NaN against a number, or different NaN payloads: no finite distance.
        r.max_diff[t] = std::max(r.max_diff[t],
                                 std::isnan(diff) ? std::numeric_limits<double>::infinity() : diff);
      }
    }
  }
  return r;
}

// What a run measured and found, for the JSON and the text report.
struct Report {
  std::optional<Setup> main, forward;  // forward: the run that computed O and LSE for bwd
  std::string gpu;
  float ms = 0;
  double flops = 0;
  std::string reference;  // "cpu_fp64" or "gpu_reference_kernel"; empty without --verify
  std::vector<Check> checks;
  std::optional<Repro> repro;

  double tflops() const { return ms > 0 ? flops / (double(ms) * 1e-3) / 1e12 : 0; }
};

void print_json(const Report& r, const RunOptions& o, const FmhaProblem& p, const MaskSpec& mask) {
  nlohmann::json j = setup_json(*r.main);
  j["gpu"] = r.gpu;
  j["family"] = o.problem.family;
  j["problem"] = problem_json(p, mask);
  j["problem"]["dtype"] = o.problem.dtype;
  j["problem"]["sinks"] = o.problem.sinks;
  j["problem"]["inputs"] = o.inputs.empty() ? nlohmann::json(nullptr) : nlohmann::json(o.inputs);
  j["problem"]["seed"] = o.problem.seed;
  if (r.forward) j["forward"] = setup_json(*r.forward);
  j["timings"] = {{"kernel_ms", r.ms}, {"tflops", r.tflops()}, {"flops", r.flops}};
  if (!r.reference.empty()) {
    const bool pass = std::all_of(r.checks.begin(), r.checks.end(), [](auto& c) { return c.pass; });
    j["verify"] = {{"reference", r.reference}, {"pass", pass}};
    j["errors"] = nlohmann::json::object();
    for (const auto& c : r.checks) {
      std::string key = c.name;  // "dQ" -> "dq"
      std::transform(key.begin(), key.end(), key.begin(),
                     [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
      j["errors"][key] = check_json(c);
    }
  }
  if (r.repro) {
    const auto& d = r.repro->max_diff;
    j["repro"] = {{"runs", r.repro->runs},
                  {"max_abs_diff", {{"dq", d[0]}, {"dk", d[1]}, {"dv", d[2]}}},
                  {"bit_exact", r.repro->bit_exact}};
  }
  fmt::print("{}\n", j.dump(2));
}

void print_text(const Report& r, const RunOptions& o, const FmhaProblem& p) {
  fmt::print("kernel:   {}\n", setup_text(*r.main));
  fmt::print("key:      {}\n", r.main->result.key);
  if (r.forward) fmt::print("forward:  {} (computed O and LSE)\n", setup_text(*r.forward));
  fmt::print("problem:  {}, scale {:.6g}, {}\n", describe_problem(o.problem, p), p.softmax_scale(),
             o.inputs.empty() ? fmt::format("random inputs (seed {})", o.problem.seed)
                              : "inputs from " + o.inputs);
  fmt::print("gpu:      {} ({})\n", r.gpu, r.main->result.config.arch);
  fmt::print("time:     {:.4f} ms, {:.1f} TFLOP/s\n", r.ms, r.tflops());
  if (!o.outputs.empty()) fmt::print("outputs:  written to {}\n", o.outputs);
  if (!r.reference.empty()) {
    fmt::print("verify against the {}:\n",
               r.reference == "cpu_fp64" ? "fp64 CPU reference" : "GPU reference kernel");
    for (const auto& c : r.checks) fmt::print("  {}\n", check_line(c));
  }
  if (r.repro) {
    const auto& d = r.repro->max_diff;
    fmt::print("repro:    {} runs, max |ΔdQ| {:.3e}, |ΔdK| {:.3e}, |ΔdV| {:.3e}; bit-exact: {}\n",
               r.repro->runs, d[0], d[1], d[2], r.repro->bit_exact ? "YES" : "NO");
  }
}

void run_run(const RunOptions& o, const GlobalOptions& g) {
  const Family family = o.problem.family == "bwd" ? Family::bwd : Family::fwd;
  if (o.repro > 0 && family != Family::bwd) {
    throw Error(ErrorCode::invalid_argument, "--repro applies to --family bwd only");
  }
  const bool bf16 = o.problem.dtype == "bf16";
  const CliProblem problem = make_problem(o.problem);  // owns the host cu_seqlens p points to
  FmhaProblem p = problem.problem;
  const MaskSpec mask = parse_mask(o.problem.mask);
  const FmhaKernelConfig config = make_config(o.problem, family);
  // Flags and input files are checked before the GPU is asked for: a typo should be reported as
  // such on any machine.
  validate_config_and_problem(config, p);
  Inputs in = load_inputs(o.problem, o.inputs, p, family, bf16);
  require_gpu("fmha-jit run");
  const std::string gpu = gpu_name();

  Report r;
  r.gpu = gpu;
  r.main = setup_or_throw(config, g);
  FmhaRunner& runner = *r.main->result.runner;
  DeviceInputs d = upload(in, p);
  if (p.varlen()) p = with_device_seqlens(p, d.cu_q.data(), d.cu_k.data());
  if (family == Family::bwd && !in.o) {
    r.forward = setup_or_throw(producer_config(config), g);
    FwdOut f = run_forward_once(*r.forward->result.runner, p, d);
    auto o_bits = download_bits(f.o, p.o_elements());
    in.o = HostTensor{widen(o_bits, bf16), std::move(o_bits)};
    in.lse = download_floats(f.lse, p.lse_elements());
    d.o = std::move(f.o);
    d.lse = std::move(f.lse);
  }

  std::vector<Output> outputs;
  if (family == Family::fwd) {
    auto launch = [&](FwdOut& out) { launch_fwd(runner, p, d, out); };
    FwdOut scratch = fwd_buffers(p), out = fwd_buffers(p);
    r.ms = time_once(launch, scratch, out);
    outputs = download_fwd(out, p, runner.config().lse, bf16);
  } else {
    auto launch = [&](BwdOut& out) { launch_bwd(runner, p, d, out); };
    BwdOut scratch = bwd_buffers(runner, p), out = bwd_buffers(runner, p);
    r.ms = time_once(launch, scratch, out);
    outputs = download_bwd(out, p, bf16);
  }
  r.flops = attention_flops(p, mask.kind, family);
  if (!o.outputs.empty()) write_outputs(o.outputs, outputs, p, in);

  if (o.verify) {
    const bool affordable = attention_macs(p) <= kCpuReferenceMaxMacs;
    const std::string gap = gpu_reference_gap(r.main->result.config);
    if (!affordable && !gap.empty()) {
      spdlog::warn(
          "the GPU reference kernel does not serve {}: verifying with the fp64 CPU "
          "reference, which takes a while at this size",
          gap);
    }
    if (affordable || !gap.empty()) {
      r.reference = "cpu_fp64";
      cpu_reference(outputs, p, mask.kind, in, family);
    } else {
      r.reference = "gpu_reference_kernel";
      gpu_reference(outputs, p, r.main->result.config, d, g);
    }
    for (const auto& out : outputs) {
      r.checks.push_back(
          check_output(out.name, out.got, out.want, ref::dtype_tolerance(bf16, out.quantity)));
    }
  }
  if (o.repro > 0) r.repro = check_repro(runner, p, d, o.repro, bf16);

  if (o.json) {
    print_json(r, o, p, mask);
  } else {
    print_text(r, o, p);
  }
  std::vector<std::string> failed;
  for (const auto& c : r.checks) {
    if (!c.pass) failed.push_back(c.name);
  }
  if (!failed.empty()) {
    throw CommandFailed(fmt::format("verification failed: {}", fmt::join(failed, ", ")));
  }
}

}  // namespace

Command add_run_command(CLI::App& app, const GlobalOptions& g) {
  auto o = std::make_shared<RunOptions>();
  auto* sub = app.add_subcommand("run", "Run one attention problem on the GPU");
  sub->footer(
      "Inputs: random normal (--seed), or q.npy, k.npy, v.npy (+ do.npy for bwd, and optionally "
      "o.npy + lse.npy) from --inputs, float32 in the layout's shape, rounded to the dtype; with "
      "--sinks also sinks.npy (float32, (Hq,)). Outputs: o.npy and lse.npy (fwd) or dq.npy, "
      "dk.npy, dv.npy (+ d_sinks.npy with --sinks) (bwd) in --outputs, with sinks.npy when "
      "--sinks. A packed batch (--seqlens-q) has 3-d tensors: q (total_q, Hq, D), k and v "
      "(total_k, Hk, D), o (total_q, Hq, Dv) in bshd ((H, total, D) in bhsd), lse (Hq, total_q); "
      "--outputs also gets cu_seqlens_q.npy and cu_seqlens_k.npy (int32, (B + 1,)), which "
      "--inputs may hold too if they match the flags. --verify compares with the fp64 CPU "
      "reference (a packed batch sequence by sequence), or the GPU reference kernel when "
      "sum(Hq*Sq*Sk*(D+Dv)) > 3e8 and it serves the config, and exits 1 on a failure.");
  add_problem_options(*sub, o->problem, {"fwd", "bwd"});
  sub->add_option("--inputs", o->inputs, "Folder of input .npy files")
      ->check(CLI::ExistingDirectory)
      ->type_name("DIR");
  sub->add_option("--outputs", o->outputs, "Folder for the output .npy files (created)")
      ->type_name("DIR");
  sub->add_flag("--verify", o->verify, "Compare the outputs with a reference");
  sub->add_option("--repro", o->repro, "bwd: run N times and compare the gradients bitwise")
      ->check(CLI::Range(2, 100000))
      ->type_name("N");
  sub->add_flag("--json", o->json, "Print one JSON object");
  return {sub, [o, &g] { run_run(*o, g); }};
}

}  // namespace fmha_jit::cli
