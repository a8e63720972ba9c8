#include "stress/worker_client.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace fmha_jit::test {
namespace fs = std::filesystem;

std::vector<FmhaKernelConfig> reference_configs(int first, int count) {
  std::vector<FmhaKernelConfig> all;
  const std::pair<int, int> hdims[] = {{32, 32},   {64, 64},   {96, 96},  {128, 128},
                                       {192, 192}, {256, 256}, {192, 128}};
  for (const char* arch : {"sm_90", "sm_80", "sm_86", "sm_89", "sm_90a"}) {
    for (MaskKind mask : {MaskKind::none, MaskKind::causal_top_left, MaskKind::causal_bottom_right,
                          MaskKind::sliding_window}) {
      for (auto [hq, hv] : hdims) {
        for (Family family : {Family::fwd, Family::bwd}) {
          for (DType dtype : {DType::bf16, DType::fp16}) {
            FmhaKernelConfig c;
            c.family = family;
            c.dtype = dtype;
            c.hdim_q = hq;
            c.hdim_v = hv;
            c.mask = mask;
            c.arch = arch;
            c.impl = KernelImpl::reference;
            all.push_back(c);
          }
        }
      }
    }
  }
  if (first < 0 || count < 0 || static_cast<std::size_t>(first + count) > all.size()) {
    throw std::out_of_range("reference_configs: only " + std::to_string(all.size()) + " exist");
  }
  return {all.begin() + first, all.begin() + first + count};
}

void write_configs(const fs::path& file, const std::vector<FmhaKernelConfig>& configs) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& c : configs) j.push_back(to_json(c));
  std::ofstream(file) << j.dump(1);
}

Worker spawn_worker(const std::vector<std::string>& args, const std::vector<std::string>& env,
                    const fs::path& out_prefix) {
  Worker w;
  w.stdout_path = out_prefix.string() + ".out";
  w.stderr_path = out_prefix.string() + ".err";
  // FMHA_JIT_STRESS_WORKER in the environment names another build of the worker (long runs from a
  // copy of the binaries while the build folder changes).
  const char* exe = std::getenv("FMHA_JIT_STRESS_WORKER");
  std::vector<std::string> argv_strings{exe && *exe ? exe : FMHA_JIT_STRESS_WORKER};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The parent's environment with the overrides replacing variables of the same name.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    const std::string var = *e;
    const auto name = var.substr(0, var.find('=') + 1);
    bool overridden = false;
    for (const auto& o : env) overridden |= o.starts_with(name);
    if (!overridden) env_strings.push_back(var);
  }
  env_strings.insert(env_strings.end(), env.begin(), env.end());
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, w.stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addopen(&actions, 2, w.stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  const int rc = ::posix_spawn(&w.pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error(std::string("posix_spawn: ") + std::strerror(rc));
  return w;
}

namespace {
std::string slurp(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}
}  // namespace

WorkerResult wait_worker(const Worker& worker) {
  WorkerResult r;
  int status = 0;
  while (::waitpid(worker.pid, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error(std::string("waitpid: ") + std::strerror(errno));
  }
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  r.stderr_text = slurp(worker.stderr_path);
  const std::string out = slurp(worker.stdout_path);
  if (!out.empty()) r.report = nlohmann::json::parse(out, nullptr, false);
  if (r.report.is_discarded()) r.report = nullptr;
  return r;
}

WorkerResult run_worker(const std::vector<std::string>& args, const std::vector<std::string>& env,
                        const fs::path& out_prefix) {
  return wait_worker(spawn_worker(args, env, out_prefix));
}

std::string WorkerResult::describe() const {
  if (skipped() && report.is_object() && report.contains("unsupported")) {
    return report["unsupported"].get<std::string>();
  }
  std::string s = "exit " + std::to_string(exit_code) + ", signal " + std::to_string(signal);
  return s + "; stderr: " + stderr_text.substr(0, 4000);
}

std::vector<std::string> worker_args(const fs::path& cache_dir, const fs::path& configs,
                                     int threads, std::vector<std::string> extra) {
  std::vector<std::string> args{"--cache-dir",    cache_dir.string(), "--configs",
                                configs.string(), "--threads",        std::to_string(threads)};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

void tally(const nlohmann::json& report, std::map<std::string, KeyTally>& out) {
  for (const auto& c : report.at("calls")) {
    auto& t = out[c.at("key").get<std::string>()];
    ++t.calls;
    if (c.at("source") == "compiled") ++t.compiled;
    if (c.at("source") != "failed") {
      t.checksums.insert(c.at("xxh3").get<std::string>());
      if (c.at("xxh3") != c.at("manifest_xxh3")) ++t.manifest_mismatches;
    }
  }
  for (const auto& s : report.at("compiles")) ++out[s.at("key").get<std::string>()].compiles;
}

int count_warnings(const nlohmann::json& report, const std::string& text) {
  int n = 0;
  for (const auto& w : report.at("warnings")) {
    if (w.get<std::string>().find(text) != std::string::npos) ++n;
  }
  return n;
}

}  // namespace fmha_jit::test
