// `fmha-jit prebuild FILE.json...`: expands sweep files and fills the disk cache with their
// kernels, compiling in parallel. Several processes may prebuild into one cache at once: the disk
// cache's per-key lock makes each key compile exactly once, which --json lets a caller verify.
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "codegen/kernel_name.hpp"
#include "dispatcher/pipeline.hpp"
#include "fmha_jit/error.hpp"
#include "tools/fmha-jit/cli.hpp"
#include "tools/fmha-jit/format.hpp"
#include "tools/fmha-jit/progress.hpp"
#include "tools/fmha-jit/sweep_files.hpp"

namespace fmha_jit::cli {
namespace {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// Enough of a compiler log to see the first errors; compile.log next to the source has the rest.
constexpr int kLogExcerptLines = 12;

struct PrebuildOptions {
  std::vector<std::string> files;
  int jobs = 1;
  bool json = false;
  bool dry_run = false;
};

struct KernelResult {
  std::string key;          // empty when even the key could not be computed (no compiler)
  std::string binary_xxh3;  // checksum of the binary this process obtained
  std::string name;
  std::optional<BinarySource> source;  // nullopt: failed
  double seconds = 0;
  std::string error;
  std::string log_excerpt;
};

std::string excerpt(const std::string& log) {
  std::istringstream in(log);
  std::string line, out;
  int lines = 0, more = 0;
  while (std::getline(in, line)) {
    if (lines < kLogExcerptLines) {
      out += "    " + line + "\n";
      ++lines;
    } else {
      ++more;
    }
  }
  if (more > 0)
    out += fmt::format("    ... {} more lines in compile.log next to the source\n", more);
  if (!out.empty()) out.pop_back();
  return out;
}

KernelResult build_one(const FmhaKernelConfig& config, const fs::path& root) {
  KernelResult r;
  r.name = codegen::kernel_base_name(config);
  const auto start = Clock::now();
  try {
    auto obtained = dispatch::obtain_kernel(config, root);
    r.key = obtained.kernel->key;
    r.binary_xxh3 = obtained.kernel->manifest.binary_xxh3;
    r.source = obtained.source;
  } catch (const CompileError& e) {
    r.error = e.what();
    r.log_excerpt = excerpt(e.log());
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (!r.source) {
    try {
      r.key = dispatch::key_config(config).key;
    } catch (const std::exception&) {
      // Same cause as the failure already recorded (typically: no RTC compiler).
    }
  }
  return r;
}

std::string step_text(const KernelResult& r) {
  if (!r.source) return fmt::format("FAILED {} ({:.2f} s)", r.name, r.seconds);
  const char* verb = *r.source == BinarySource::compiled ? "compiled"
                     : *r.source == BinarySource::disk   ? "disk hit"
                                                         : "memory hit";
  return fmt::format("{} {} ({:.2f} s)", verb, r.name, r.seconds);
}

std::string failure_detail(const KernelResult& r) {
  std::string detail = "    " + r.error;
  if (!r.log_excerpt.empty()) detail += "\n" + r.log_excerpt;
  return detail;
}

// Runs build_one() over the configs on `jobs` threads; results are in config order.
std::vector<KernelResult> build_all(const std::vector<FmhaKernelConfig>& configs,
                                    const fs::path& root, int jobs, Progress& progress) {
  std::vector<KernelResult> results(configs.size());
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i; (i = next.fetch_add(1)) < configs.size();) {
      results[i] = build_one(configs[i], root);
      const auto& r = results[i];
      progress.step(step_text(r), !r.source, r.source ? "" : failure_detail(r));
    }
  };
  const std::size_t threads = std::min<std::size_t>(static_cast<std::size_t>(jobs), configs.size());
  {
    std::vector<std::jthread> pool;
    for (std::size_t t = 0; t < threads; ++t) pool.emplace_back(worker);
  }
  progress.finish();
  return results;
}

nlohmann::json skips_json(const SweepPlan& plan) {
  nlohmann::json skips = nlohmann::json::array();
  for (const auto& s : plan.skipped) {
    skips.push_back({{"file", s.file}, {"point", s.point}, {"reason", s.reason}});
  }
  return skips;
}

void print_skips(const SweepPlan& plan) {
  for (const auto& s : plan.skipped) fmt::print("skipped {}\n", describe(s));
}

// The error of a run in which `failed` kernels did not build or a file gave nothing to build
// (a typo in a head dim or arch skips every point of a file: a cache warmed from it would miss
// every key it was meant to hold). Empty when neither happened.
std::string failure_summary(const SweepPlan& plan, int failed, std::size_t kernels,
                            const char* verb) {
  std::vector<std::string> parts;
  if (failed > 0) parts.push_back(fmt::format("{} of {} kernels {}", failed, kernels, verb));
  if (!plan.files_without_configs.empty()) {
    parts.push_back(
        fmt::format("nothing to build in {} (no valid config: every point skipped, or none given)",
                    fmt::join(plan.files_without_configs, ", ")));
  }
  return fmt::format("{}", fmt::join(parts, "; "));
}

void dry_run(const PrebuildOptions& o, const GlobalOptions& g, const SweepPlan& plan) {
  nlohmann::json kernels = nlohmann::json::array();
  Table table({"NAME", "KEY"});
  int errors = 0;
  for (const auto& config : plan.configs) {
    const std::string name = codegen::kernel_base_name(config);
    try {
      const auto k = dispatch::key_config(config);
      kernels.push_back({{"key", k.key}, {"name", name}, {"config", to_json(config)}});
      table.add({name, k.key});
    } catch (const std::exception& e) {
      ++errors;
      kernels.push_back(
          {{"key", ""}, {"name", name}, {"config", to_json(config)}, {"error", e.what()}});
      table.add({name, std::string("error: ") + e.what()});
    }
  }
  if (o.json) {
    fmt::print("{}\n", nlohmann::json{{"dry_run", true},
                                      {"kernels", kernels},
                                      {"skipped", plan.skipped.size()},
                                      {"skips", skips_json(plan)},
                                      {"files_without_configs", plan.files_without_configs}}
                           .dump(2));
  } else {
    if (!g.quiet) print_skips(plan);
    if (!table.empty()) table.print();
    if (!g.quiet) {
      fmt::print("{} kernels would be built or found in {}, {} skipped\n", plan.configs.size(),
                 g.cache_root().string(), plan.skipped.size());
    }
  }
  if (const auto why = failure_summary(plan, errors, plan.configs.size(), "have no key");
      !why.empty()) {
    throw CommandFailed(why);
  }
}

void run_prebuild(const PrebuildOptions& o, const GlobalOptions& g) {
  const auto start = Clock::now();
  const SweepPlan plan = plan_files(o.files);
  if (o.dry_run) return dry_run(o, g, plan);

  if (!o.json && !g.quiet) print_skips(plan);
  spdlog::debug("building {} kernels on {} threads into {}", plan.configs.size(), o.jobs,
                g.cache_root().string());

  Progress progress(plan.configs.size(), Progress::pick(o.json || g.quiet), g.verbose);
  const auto results = build_all(plan.configs, g.cache_root(), o.jobs, progress);
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();

  int compiled = 0, hit = 0, failed = 0;
  std::vector<double> compile_seconds;
  nlohmann::json kernels = nlohmann::json::array();
  for (const auto& r : results) {
    nlohmann::json k = {{"key", r.key},
                        {"name", r.name},
                        {"source", r.source ? std::string(to_string(*r.source)) : "failed"},
                        {"seconds", r.seconds},
                        {"binary_xxh3", r.binary_xxh3}};
    if (!r.source) {
      ++failed;
      k["error"] = r.error;
    } else if (*r.source == BinarySource::compiled) {
      ++compiled;
      compile_seconds.push_back(r.seconds);
    } else {
      ++hit;
    }
    kernels.push_back(std::move(k));
  }
  const double median_compile = summarize(compile_seconds).median;

  if (o.json) {
    fmt::print("{}\n", nlohmann::json{{"compiled", compiled},
                                      {"hit", hit},
                                      {"skipped", plan.skipped.size()},
                                      {"failed", failed},
                                      {"wall_s", wall},
                                      {"median_compile_s", median_compile},
                                      {"kernels", kernels},
                                      {"skips", skips_json(plan)},
                                      {"files_without_configs", plan.files_without_configs}}
                           .dump(2));
  } else {
    // Quiet mode drew no progress, so failures have not been shown yet.
    if (g.quiet) {
      for (const auto& r : results) {
        if (!r.source) fmt::print(stderr, "FAILED {}\n{}\n", r.name, failure_detail(r));
      }
    } else {
      fmt::print("{} compiled, {} hit (disk or memory), {} skipped, {} failed in {}", compiled, hit,
                 plan.skipped.size(), failed, human_seconds(wall));
      if (compiled > 0) fmt::print("; median compile {:.2f} s", median_compile);
      fmt::print("\n");
    }
  }
  if (const auto why = failure_summary(plan, failed, results.size(), "failed to build");
      !why.empty()) {
    throw CommandFailed(why);
  }
}

}  // namespace

Command add_prebuild_command(CLI::App& app, const GlobalOptions& g) {
  auto o = std::make_shared<PrebuildOptions>();
  o->jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  auto* sub =
      app.add_subcommand("prebuild", "Compile the kernels of config / sweep files into the cache");
  sub->footer(
      "A sweep is a JSON object whose list-valued fields expand to their cartesian product, or an "
      "array of such objects. Unsupported points are skipped with the reason. Exits 1 if a kernel "
      "fails to build or a file has no valid point (nothing to build); the others are still "
      "built.");
  sub->add_option("files", o->files, "Config or sweep files")->required()->type_name("FILE.json");
  sub->add_option("-j,--jobs", o->jobs, "Parallel compiles")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024))
      ->type_name("N");
  sub->add_flag("--json", o->json,
                "Print one JSON object with counts and per-kernel key, source and time");
  sub->add_flag("--dry-run", o->dry_run, "List the kernels (name, key) without compiling");
  return {sub, [o, &g] { run_prebuild(*o, g); }};
}

}  // namespace fmha_jit::cli
