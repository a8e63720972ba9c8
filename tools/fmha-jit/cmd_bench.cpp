// `fmha-jit bench`: kernel throughput of one problem or of a sweep (e.g. FlashAttention's benchmark
// grid). Device events bracket the launches only; setup and JIT compile are reported separately.
// Inputs rotate among enough copies that each launch reads data the previous ones evicted from L2,
// as a model's layers would.
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <random>

#include "codegen/kernel_name.hpp"
#include "fmha_jit/fmha_jit.hpp"
#include "kernels/resolve.hpp"
#include "tools/fmha-jit/attention_io.hpp"
#include "tools/fmha-jit/cli.hpp"
#include "tools/fmha-jit/flops.hpp"
#include "tools/fmha-jit/format.hpp"
#include "tools/fmha-jit/packed_batch.hpp"
#include "tools/fmha-jit/problem_options.hpp"
#include "tools/fmha-jit/progress.hpp"

namespace fmha_jit::cli {
namespace {

// At least the L2 of the GPUs this targets (50 MB on H100 / H200); the working set of the rotated
// copies is twice this, so a copy is evicted before it is read again.
constexpr std::size_t kL2Bytes = 60'000'000;
// Copies are 256-byte aligned: the tiled kernels need 16-byte aligned tensors, and whole cache
// lines keep copies from sharing one.
constexpr std::size_t kCopyAlign = 256;
// Random values are tiled from a pool: generating a fresh normal sample per element would cost
// seconds per point of a large sweep, and the timing does not depend on the values' variety.
constexpr std::size_t kRandomPool = (1 << 20) + 7;

struct BenchOptions {
  ProblemOptions problem;
  std::string sweep;
  int warmup = 5;
  int repeat = 20;
  bool json = false;
  bool dry_run = false;
};

struct Point {
  ProblemOptions options;
  nlohmann::json origin;  // the sweep point, or null for the command-line flags
  // The problem, with stand-ins for its device cu_seqlens (measure uploads them); `packed` owns
  // the host ones it points to.
  FmhaProblem problem;
  std::shared_ptr<const PackedBatch> packed;
  MaskSpec mask;
  bool time_fwd = false, time_bwd = false;
  FmhaKernelConfig fwd, bwd, producer;  // producer: the forward that makes O and LSE for bwd
  FmhaKernelConfig fwd_canonical, bwd_canonical;
};

struct Row {
  const Point* point = nullptr;
  Family family = Family::fwd;
  FmhaSetupResult setup;  // success = false: not run (--dry-run); config is still the canonical one

  Stats ms;
  // Every timed launch in launch order (time_launches), for the JSON: a spread that follows the
  // rotated input set, or drifts over the launches, shows there and not in the median.
  std::vector<double> launch_ms;
  Stats host_us;  // host time of one run_* call
  // Median milliseconds of each kernel stage (run_*'s StageHook), in launch order.
  std::vector<std::pair<std::string, double>> stage_ms;
  double flops = 0;
  std::size_t sets = 0;
  std::size_t set_bytes = 0;
};

Row make_row(const Point& pt, Family family, FmhaSetupResult setup) {
  Row r;
  r.point = &pt;
  r.family = family;
  r.setup = std::move(setup);
  r.flops = attention_flops(pt.problem, pt.mask.kind, family);
  return r;
}

std::string point_text(const Point& p) {
  return p.origin.is_null() ? describe_problem(p.options, p.problem) : p.origin.dump();
}

Point plan_point(ProblemOptions options, nlohmann::json origin) {
  Point p;
  p.options = std::move(options);
  p.origin = std::move(origin);
  CliProblem problem = make_problem(p.options);
  p.problem = problem.problem;
  p.packed = std::move(problem.packed);
  p.mask = parse_mask(p.options.mask);
  p.time_fwd = p.options.family != "bwd";
  p.time_bwd = p.options.family != "fwd";
  p.fwd = make_config(p.options, Family::fwd);
  p.bwd = make_config(p.options, Family::bwd);
  // The backward reads the LSE whatever --lse says about the timed forward.
  p.producer = producer_config(p.bwd);
  const bool both = p.time_fwd && p.time_bwd;
  if (p.time_fwd) p.fwd_canonical = validate_config_and_problem(p.fwd, p.problem);
  if (p.time_bwd) {
    try {
      p.bwd_canonical = validate_config_and_problem(p.bwd, p.problem);
      validate_config_and_problem(p.producer, p.problem);
    } catch (const Error& e) {
      // fwdbwd with a config only the forward supports (impl mma_sm80): keep the forward row.
      if (!both || e.code() != ErrorCode::invalid_config) throw;
      spdlog::warn("{}: bwd skipped: {}", point_text(p), e.what());
      p.time_bwd = false;
    }
  }
  return p;
}

std::vector<Point> plan(const BenchOptions& o, const std::vector<std::string>& families) {
  std::vector<Point> points;
  if (o.sweep.empty()) {
    points.push_back(plan_point(o.problem, nullptr));  // errors are the command's errors
    return points;
  }
  std::size_t skipped = 0;
  for (auto& sp : expand_sweep_file(o.sweep, o.problem, families)) {
    try {
      points.push_back(plan_point(std::move(sp.options), sp.point));
    } catch (const Error& e) {
      // Like prebuild: one unsupported combination (say mma_sm80 x bwd) should not void a grid.
      if (e.code() != ErrorCode::invalid_config && e.code() != ErrorCode::invalid_problem) throw;
      spdlog::warn("skipped {}: {}", sp.point.dump(), e.what());
      ++skipped;
    }
  }
  if (points.empty()) throw CommandFailed("no valid point in " + o.sweep);
  if (skipped > 0) spdlog::info("{} of {} points skipped", skipped, skipped + points.size());
  return points;
}

FmhaSetupResult setup_or_throw(const FmhaKernelConfig& config, const GlobalOptions& g) {
  FmhaSetupResult r = setup_fmha_dispatcher(config, SetupOptions{g.cache_root(), /*load=*/true});
  if (!r.success) throw CommandFailed("setup failed: " + r.error);
  return r;
}

std::size_t align_up(std::size_t n) { return (n + kCopyAlign - 1) / kCopyAlign * kCopyAlign; }

// `sets` copies of one tensor in one allocation, each copy at a kCopyAlign boundary.
class Rotated {
 public:
  Rotated() = default;
  // An empty tensor (a packed batch without tokens) still gets an address: the launch checks
  // refuse null tensor pointers.
  Rotated(std::size_t bytes, std::size_t sets)
      : stride_(std::max(align_up(bytes), kCopyAlign)), buffer_(stride_ * sets) {}
  void* at(std::size_t set) const { return static_cast<char*>(buffer_.data()) + set * stride_; }
  std::size_t stride() const { return stride_; }
  // Writes the same `bytes` into every copy with one upload.
  void fill(const void* data, std::size_t bytes, std::size_t sets) {
    std::vector<unsigned char> host(stride_ * sets);
    for (std::size_t s = 0; s < sets; ++s) std::memcpy(host.data() + s * stride_, data, bytes);
    buffer_.upload(host.data(), host.size());
  }

 private:
  std::size_t stride_ = 0;
  DeviceBuffer buffer_;
};

std::vector<std::uint16_t> random_bits(std::size_t n, const std::vector<std::uint16_t>& pool,
                                       std::size_t offset) {
  std::vector<std::uint16_t> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = pool[(offset + i) % pool.size()];
  return out;
}

// The packed batch's cu_seqlens, the sinks and their gradient are not rotated: a model's layers
// share one copy of the first, and the others are a few hundred bytes.
struct Buffers {
  std::size_t sets = 0, set_bytes = 0;
  Rotated q, k, v, o, lse, d_o, dq, dk, dv;
  DeviceBuffer workspace, cu_q, cu_k, sinks, d_sinks;
  const float* sinks_ptr() const { return static_cast<const float*>(sinks.data()); }
};

DeviceBuffer upload_array(const void* data, std::size_t bytes) {
  DeviceBuffer b(bytes);
  b.upload(data, bytes);
  return b;
}

Buffers allocate(const Point& pt, std::size_t workspace_bytes) {
  const FmhaProblem& p = pt.problem;
  const std::size_t q = p.q_elements() * 2, k = p.k_elements() * 2, v = p.v_elements() * 2,
                    o = p.o_elements() * 2, lse = p.lse_elements() * 4;
  Buffers b;
  b.set_bytes = align_up(q) + align_up(k) + align_up(v) + align_up(o) + align_up(lse);
  if (pt.time_bwd) b.set_bytes += align_up(o) + align_up(q) + align_up(k) + align_up(v);
  b.sets = std::max<std::size_t>(2, (2 * kL2Bytes + b.set_bytes - 1) / b.set_bytes + 1);
  b.q = Rotated(q, b.sets);
  b.k = Rotated(k, b.sets);
  b.v = Rotated(v, b.sets);
  b.o = Rotated(o, b.sets);
  b.lse = Rotated(lse, b.sets);
  if (pt.time_bwd) {
    b.d_o = Rotated(o, b.sets);
    b.dq = Rotated(q, b.sets);
    b.dk = Rotated(k, b.sets);
    b.dv = Rotated(v, b.sets);
    if (workspace_bytes > 0) b.workspace = DeviceBuffer(workspace_bytes);
  }
  // Random normal inputs, never zeros: all-zero inputs make uniform softmax rows and can hit
  // fast paths (or denormal-free arithmetic) that real activations do not.
  const bool bf16 = pt.options.dtype == "bf16";
  const std::vector<std::uint16_t> pool = random_tensor(kRandomPool, bf16, pt.options.seed).bits;
  auto fill = [&](Rotated& r, std::size_t elements, std::size_t offset) {
    const auto bits = random_bits(elements, pool, offset);
    r.fill(bits.data(), bits.size() * 2, b.sets);
  };
  fill(b.q, p.q_elements(), 0);
  fill(b.k, p.k_elements(), 1 << 18);
  fill(b.v, p.v_elements(), 2 << 18);
  if (pt.time_bwd) fill(b.d_o, p.o_elements(), 3 << 18);
  if (p.varlen()) {
    const std::size_t bytes = static_cast<std::size_t>(p.batch + 1) * sizeof(std::int32_t);
    b.cu_q = upload_array(p.cu_seqlens_q_host, bytes);
    b.cu_k = upload_array(p.cu_seqlens_k_host, bytes);
  }
  if (pt.options.sinks) {
    const auto sinks = random_floats(p.nhead_q, pt.options.seed + 4);
    b.sinks = upload_array(sinks.data(), sinks.size() * sizeof(float));
    if (pt.time_bwd) b.d_sinks = DeviceBuffer(sinks.size() * sizeof(float));
  }
  return b;
}

struct LaunchTimes {
  std::vector<double> ms;       // on the GPU, between each launch's events
  std::vector<double> host_us;  // on the host, from the call of run_* to its return
};

// Warm-up launches, then `repeat` launches each between its own pair of events, all queued before
// the first is read so that the GPU never waits for the host between launches (and the host never
// waits for a full launch queue: its time per call is the API's own cost, the figure the Python
// package's per-call overhead is compared with; BENCHMARKS.md). Returns each timed launch's times
// in launch order; launch i reads input set (warmup + i) % sets.
LaunchTimes time_launches(const std::function<void(std::size_t)>& launch, const BenchOptions& o,
                          std::size_t sets) {
  std::size_t next = 0;
  for (int i = 0; i < o.warmup; ++i) launch(next++ % sets);
  device_synchronize();
  std::vector<std::unique_ptr<GpuTimer>> timers;
  for (int i = 0; i < o.repeat; ++i) timers.push_back(std::make_unique<GpuTimer>());
  LaunchTimes times;
  for (auto& t : timers) {
    t->start();
    const auto called = std::chrono::steady_clock::now();
    launch(next++ % sets);
    const std::chrono::duration<double, std::micro> host =
        std::chrono::steady_clock::now() - called;
    times.host_us.push_back(host.count());
    t->stop();
  }
  for (auto& t : timers) times.ms.push_back(t->elapsed_ms());
  return times;
}

// The split per kernel stage: a second pass with an event pair around every stage. It is kept
// apart from the headline timing so that the extra event records cannot perturb that number.
std::vector<std::pair<std::string, double>> time_stages(
    const std::function<void(std::size_t set, const StageHook& hook)>& launch,
    const BenchOptions& o, std::size_t sets) {
  std::vector<std::string> names;
  std::vector<std::vector<std::unique_ptr<GpuTimer>>> timers(o.repeat);  // [repeat][stage]
  std::size_t next = 0;
  for (int r = 0; r < o.repeat; ++r) {
    auto& t = timers[r];
    const StageHook hook = [&](std::size_t stage, std::string_view name, void* stream) {
      if (stage > 0) t[stage - 1]->stop(stream);
      if (name.empty()) return;
      if (names.size() <= stage) names.emplace_back(name);
      t.push_back(std::make_unique<GpuTimer>());
      t.back()->start(stream);
    };
    launch(next++ % sets, hook);
  }
  std::vector<std::pair<std::string, double>> out;
  for (std::size_t s = 0; s < names.size(); ++s) {
    std::vector<double> samples;
    for (auto& t : timers) samples.push_back(t.at(s)->elapsed_ms());
    out.emplace_back(names[s], summarize(std::move(samples)).median);
  }
  return out;
}

std::vector<Row> measure(const Point& pt, const BenchOptions& o, const GlobalOptions& g) {
  std::vector<Row> rows;
  std::optional<FmhaSetupResult> fwd, bwd;
  if (pt.time_fwd) fwd = setup_or_throw(pt.fwd, g);
  if (pt.time_bwd) bwd = setup_or_throw(pt.bwd, g);
  // The workspace's size depends on the sizes only, not on where cu_seqlens live.
  Buffers b = allocate(pt, bwd ? bwd->runner->bwd_workspace_bytes(pt.problem) : 0);
  const FmhaProblem p = pt.problem.varlen()
                            ? with_device_seqlens(pt.problem, b.cu_q.data(), b.cu_k.data())
                            : pt.problem;
  auto fwd_tensors = [&](FmhaRunner& runner, std::size_t s, void* o_out, void* lse_out) {
    FwdTensors t{b.q.at(s), b.k.at(s), b.v.at(s), o_out,
                 runner.config().lse ? static_cast<float*>(lse_out) : nullptr};
    t.sinks = b.sinks_ptr();
    return t;
  };
  auto fwd_launch = [&](FmhaRunner& runner, std::size_t s) {
    runner.run_fwd(p, fwd_tensors(runner, s, b.o.at(s), b.lse.at(s)));
  };
  if (fwd) {
    // The kernel that runs this problem (a tile variant for short causal problems: runner_for),
    // obtained before the timing; the row names it.
    FmhaRunner& runner = fwd->runner->runner_for(p);
    Row r = make_row(pt, Family::fwd, *fwd);
    r.setup.config = runner.config();
    r.setup.key = runner.key();
    r.sets = b.sets;
    r.set_bytes = b.set_bytes;
    LaunchTimes times = time_launches([&](std::size_t s) { fwd_launch(runner, s); }, o, b.sets);
    r.launch_ms = std::move(times.ms);
    r.ms = summarize(r.launch_ms);
    r.host_us = summarize(std::move(times.host_us));
    rows.push_back(std::move(r));
  }
  if (bwd) {
    // O and LSE of the inputs (every copy holds the same inputs), from one forward run.
    const FmhaSetupResult producer = setup_or_throw(pt.producer, g);
    std::vector<std::uint16_t> o_bits(p.o_elements());
    std::vector<float> lse(p.lse_elements());
    DeviceBuffer o_copy(b.o.stride()), lse_copy(b.lse.stride());
    producer.runner->run_fwd(p, fwd_tensors(*producer.runner, 0, o_copy.data(), lse_copy.data()));
    device_synchronize();
    o_copy.download(o_bits.data(), o_bits.size() * 2);
    lse_copy.download(lse.data(), lse.size() * 4);
    b.o.fill(o_bits.data(), o_bits.size() * 2, b.sets);
    b.lse.fill(lse.data(), lse.size() * 4, b.sets);
    FmhaRunner& runner = *bwd->runner;
    Row r = make_row(pt, Family::bwd, *bwd);
    r.sets = b.sets;
    r.set_bytes = b.set_bytes;
    auto bwd_launch = [&](std::size_t s, const StageHook* hook) {
      BwdTensors t{b.q.at(s),
                   b.k.at(s),
                   b.v.at(s),
                   b.o.at(s),
                   static_cast<const float*>(b.lse.at(s)),
                   b.d_o.at(s),
                   b.dq.at(s),
                   b.dk.at(s),
                   b.dv.at(s),
                   b.workspace.data(),
                   b.workspace.size()};
      t.sinks = b.sinks_ptr();
      t.d_sinks = static_cast<float*>(b.d_sinks.data());
      runner.run_bwd(p, t, nullptr, hook);
    };
    LaunchTimes times = time_launches([&](std::size_t s) { bwd_launch(s, nullptr); }, o, b.sets);
    r.launch_ms = std::move(times.ms);
    r.ms = summarize(r.launch_ms);
    r.host_us = summarize(std::move(times.host_us));
    r.stage_ms =
        time_stages([&](std::size_t s, const StageHook& h) { bwd_launch(s, &h); }, o, b.sets);
    rows.push_back(std::move(r));
  }
  return rows;
}

double tflops(const Row& r) { return r.ms.median > 0 ? r.flops / (r.ms.median * 1e-3) / 1e12 : 0; }

std::string hdim_text(const FmhaProblem& p) {
  return p.hdim_q == p.hdim_v ? std::to_string(p.hdim_q) : fmt::format("{}x{}", p.hdim_q, p.hdim_v);
}

nlohmann::json row_json(const Row& r, const BenchOptions& o, const std::string& gpu) {
  const FmhaProblem& p = r.point->problem;
  nlohmann::json j = problem_json(p, r.point->mask);
  j["dtype"] = r.point->options.dtype;
  j["family"] = std::string(to_string(r.family));
  j["impl"] = std::string(to_string(r.setup.config.impl));
  j["deterministic"] = r.setup.config.deterministic;
  j["lse"] = r.setup.config.lse;
  j["sinks"] = r.setup.config.sinks;
  j["arch"] = r.setup.config.arch;
  if (!gpu.empty()) j["gpu"] = gpu;
  j["flops"] = r.flops;
  j["kernel"] = codegen::kernel_base_name(r.setup.config);
  if (r.setup.success) {
    j["ms"] = r.ms.median;
    j["ms_min"] = r.ms.min;
    j["ms_max"] = r.ms.max;
    j["launch_ms"] = r.launch_ms;
    j["host_us"] = r.host_us.median;
    j["tflops"] = tflops(r);
    j["warmup"] = o.warmup;
    j["repeat"] = o.repeat;
    j["rotated_sets"] = r.sets;
    j["set_bytes"] = r.set_bytes;
    j["key"] = r.setup.key;
    j["source"] = std::string(to_string(r.setup.source));
    j["build_time_s"] = r.setup.build_time_s;
    if (!r.stage_ms.empty()) {
      nlohmann::json stages = nlohmann::json::array();
      for (const auto& [name, ms] : r.stage_ms) stages.push_back({{"stage", name}, {"ms", ms}});
      j["stage_ms"] = std::move(stages);
    }
  }
  if (!r.point->origin.is_null()) j["sweep_point"] = r.point->origin;
  return j;
}

// The rows a --dry-run shows: what would be measured, with the canonical configs and FLOPs.
std::vector<Row> plan_rows(const Point& pt) {
  std::vector<Row> rows;
  for (Family f : {Family::fwd, Family::bwd}) {
    if (f == Family::fwd ? !pt.time_fwd : !pt.time_bwd) continue;
    FmhaSetupResult not_run;
    not_run.config = f == Family::fwd ? pt.fwd_canonical : pt.bwd_canonical;
    // What runner_for would pick: a short causal forward runs on its tile variant.
    const auto variant = kernels::problem_tile_variant(pt.fwd);
    if (f == Family::fwd && variant && variant->applies(pt.problem)) {
      not_run.config = canonicalize(variant->config);
    }
    rows.push_back(make_row(pt, f, std::move(not_run)));
  }
  return rows;
}

// "dot_do_o 0.05 + dq_dk_dv 11.81 + convert_dq 0.07" (bwd), "-" where no split was measured.
std::string stages_text(const Row& r) {
  if (r.stage_ms.size() < 2) return "-";
  std::string out;
  for (const auto& [name, ms] : r.stage_ms) {
    out += fmt::format("{}{} {:.3f}", out.empty() ? "" : " + ", name, ms);
  }
  return out;
}

// A packed batch's SQ and SK columns hold its longest sequences.
std::string seqlen_text(const FmhaProblem& p, std::int64_t seqlen) {
  return p.varlen() ? "<=" + std::to_string(seqlen) : std::to_string(seqlen);
}

// The mask and the score modifiers, "causal+sinks+softcap30".
std::string mask_column(const Point& pt) {
  std::string text = mask_text(pt.mask);
  if (pt.options.sinks) text += "+sinks";
  if (pt.problem.softcap > 0) text += fmt::format("+softcap{:g}", pt.problem.softcap);
  return text;
}

void print_table(const std::vector<Row>& rows) {
  Table table({"DTYPE", "HDIM", "B", "HQ", "HK", "SQ", "SK", "MASK", "FAMILY", "IMPL", "MS",
               "TFLOP/S", "SETUP", "STAGES (MS)"});
  for (const auto& r : rows) {
    const FmhaProblem& p = r.point->problem;
    const bool ran = r.setup.success;
    table.add(
        {r.point->options.dtype, hdim_text(p), std::to_string(p.batch), std::to_string(p.nhead_q),
         std::to_string(p.nhead_k), seqlen_text(p, p.seqlen_q), seqlen_text(p, p.seqlen_k),
         mask_column(*r.point),
         std::string(to_string(r.family)) +
             (r.family == Family::bwd && r.point->options.deterministic ? " det" : ""),
         std::string(to_string(r.setup.config.impl)),
         ran ? fmt::format("{:.4f}", r.ms.median) : "-",
         ran ? fmt::format("{:.1f}", tflops(r)) : "-",
         ran ? fmt::format("{} {}", to_string(r.setup.source), human_seconds(r.setup.build_time_s))
             : "-",
         stages_text(r)});
  }
  table.print();
}

void run_bench(const BenchOptions& o, const GlobalOptions& g,
               const std::vector<std::string>& families) {
  const std::vector<Point> points = plan(o, families);
  std::vector<Row> rows;
  std::string gpu;
  if (o.dry_run) {
    for (const auto& pt : points) {
      for (auto& r : plan_rows(pt)) rows.push_back(std::move(r));
    }
  } else {
    require_gpu("fmha-jit bench");
    gpu = gpu_name();
    Progress progress(points.size(), Progress::pick(o.json || g.quiet || points.size() == 1),
                      g.verbose);
    for (const auto& pt : points) {
      for (auto& r : measure(pt, o, g)) rows.push_back(std::move(r));
      const Row& last = rows.back();
      progress.step(
          fmt::format("{} {}: {:.3f} ms", point_text(pt), to_string(last.family), last.ms.median),
          false);
    }
  }
  if (o.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& r : rows) out.push_back(row_json(r, o, gpu));
    fmt::print("{}\n", out.dump(2));
    return;
  }
  if (o.dry_run) {
    fmt::print("{} points, {} rows (--dry-run: nothing compiled or run)\n", points.size(),
               rows.size());
  } else {
    fmt::print("{} ({}): median of {} launches after {} warm-up, inputs rotated over L2\n", gpu,
               rows.front().setup.config.arch, o.repeat, o.warmup);
  }
  print_table(rows);
}

}  // namespace

Command add_bench_command(CLI::App& app, const GlobalOptions& g) {
  auto o = std::make_shared<BenchOptions>();
  static const std::vector<std::string> kFamilies = {"fwd", "bwd", "fwdbwd"};
  auto* sub = app.add_subcommand("bench", "Measure attention kernel throughput on the GPU");
  sub->footer(
      "FLOPs follow FlashAttention: fwd = 2*B*Hq*Sq*Sk*(D+Dv), halved for causal with Sq == Sk "
      "(visible pairs counted otherwise); bwd = 2.5 x fwd. A packed batch (--seqlens-q) is counted "
      "sequence by sequence, each with its own lengths and mask, so padding to the longest is not "
      "credited; its SQ and SK columns show the longest (<=). --sweep FILE.json: an object (or a "
      "list of objects) whose list values expand to their cartesian product; keys are the flags "
      "above with '_' for '-' (seqlens_q as a string \"100,2000\"), plus hdim, seqlen, causal "
      "(bool), tokens and model_dim (batch = tokens/seqlen, nhead_q = model_dim/hdim). Example: "
      "{\"dtype\": \"bf16\", \"hdim\": [64, "
      "128, 256], \"seqlen\": [512, 2048, 8192, 16384], \"causal\": [false, true], \"tokens\": "
      "16384, \"model_dim\": 2048}");
  add_problem_options(*sub, o->problem, kFamilies);
  sub->add_option("--warmup", o->warmup, "Untimed launches first")
      ->capture_default_str()
      ->check(CLI::Range(0, 10000))
      ->type_name("N");
  sub->add_option("--repeat", o->repeat, "Timed launches (the median is reported)")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000))
      ->type_name("N");
  sub->add_option("--sweep", o->sweep, "Sweep file (values override the flags)")
      ->check(CLI::ExistingFile)
      ->type_name("FILE.json");
  sub->add_flag("--json", o->json, "Print one JSON array of rows");
  sub->add_flag("--dry-run", o->dry_run,
                "Check the flags / sweep and list the rows, without compiling or running");
  return {sub, [o, &g] { run_bench(*o, g, kFamilies); }};
}

}  // namespace fmha_jit::cli
