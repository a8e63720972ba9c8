// The test side of fmha_jit_stress_worker: config lists for it, spawning it, reading its report.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "fmha_jit/config.hpp"

namespace fmha_jit::test {

// `count` distinct configs of the reference kernel starting at `first` in one fixed enumeration
// (arch x mask x head dims x family x dtype: 560 in all). The reference kernel is the cheapest real
// NVRTC compile (0.2 - 0.4 s on one core against seconds for the sm_80 tensor-core kernels), so a
// suite of many processes stays within CI's minutes while every compile still goes through
// NVRTC, the disk cache and its lock like any other.
std::vector<FmhaKernelConfig> reference_configs(int first, int count);

void write_configs(const std::filesystem::path& file, const std::vector<FmhaKernelConfig>& configs);

struct Worker {
  pid_t pid = -1;
  std::filesystem::path stdout_path, stderr_path;
};

// Starts the worker with `args` (the executable is added) and NAME=VALUE `env` overrides; its
// stdout / stderr go to <out_prefix>.out / .err.
Worker spawn_worker(const std::vector<std::string>& args, const std::vector<std::string>& env,
                    const std::filesystem::path& out_prefix);

struct WorkerResult {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
  nlohmann::json report;  // null when the worker printed none (killed)
  std::string stderr_text;
  bool skipped() const { return exit_code == 77; }
  // Why the worker skipped (exit 77), or its stderr otherwise: for INFO().
  std::string describe() const;
};

WorkerResult wait_worker(const Worker& worker);
WorkerResult run_worker(const std::vector<std::string>& args, const std::vector<std::string>& env,
                        const std::filesystem::path& out_prefix);

// Standard worker arguments for one cache and config file.
std::vector<std::string> worker_args(const std::filesystem::path& cache_dir,
                                     const std::filesystem::path& configs, int threads,
                                     std::vector<std::string> extra = {});

// Per key, over the calls of any number of reports.
struct KeyTally {
  int compiled = 0;  // calls whose source was "compiled"
  int compiles = 0;  // RTC compiles the observer saw
  int calls = 0;
  std::set<std::string> checksums;  // XXH3 of the bytes each call got
  int manifest_mismatches = 0;      // bytes whose XXH3 differs from their manifest's
};
void tally(const nlohmann::json& report, std::map<std::string, KeyTally>& out);

// Warnings of a report that contain `text`.
int count_warnings(const nlohmann::json& report, const std::string& text);

}  // namespace fmha_jit::test
