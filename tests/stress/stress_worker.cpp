// fmha_jit_stress_worker: one process of the stress and fault tests. Calls the public
// setup_fmha_dispatcher() from N threads over a JSON list of configs against one cache folder and
// prints one JSON report on stdout: per call the key, where the binary came from and the XXH3 of
// the bytes this process holds; per compile its key and start / end time (steady clock, which is
// CLOCK_MONOTONIC and so comparable across processes); every warning the library logged.
//
// Fault options put the process in the situation a test wants before anything else runs: a size
// limit on files (disk full), the cache on a tiny tmpfs (a real ENOSPC), the cache as a read-only
// mount, flock(2) failing with ENOLCK (NFSv3 without lockd). The mount options need root (they use
// a private mount namespace, so nothing outside this process sees them); without it the worker
// exits 77 so that the test can say why it skipped.
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "cache/file_io.hpp"
#include "cache/hashing.hpp"
#include "dispatcher/pipeline.hpp"
#include "fmha_jit/dispatcher.hpp"
#include "stress/worker_state.hpp"

using namespace fmha_jit;
namespace fs = std::filesystem;

namespace {

constexpr int kSkipped = 77;

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

[[noreturn]] void unsupported(const std::string& why) {
  std::cout << nlohmann::json{{"unsupported", why}}.dump() << std::endl;
  std::exit(kSkipped);
}

// A mount namespace of our own whose mounts do not propagate back to the host.
void private_mount_namespace() {
  if (::unshare(CLONE_NEWNS) != 0) unsupported(std::string("unshare: ") + std::strerror(errno));
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    unsupported(std::string("mount --make-rprivate /: ") + std::strerror(errno));
  }
}

void mount_tmpfs(const fs::path& dir, std::uint64_t bytes) {
  private_mount_namespace();
  fs::create_directories(dir);
  const std::string options = "size=" + std::to_string(bytes);
  if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, options.c_str()) != 0) {
    unsupported(std::string("mount tmpfs: ") + std::strerror(errno));
  }
}

void remount_read_only(const fs::path& dir) {
  private_mount_namespace();
  if (::mount(dir.c_str(), dir.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0 ||
      ::mount(nullptr, dir.c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY, nullptr) != 0) {
    unsupported(std::string("read-only bind mount: ") + std::strerror(errno));
  }
}

// A seccomp filter that makes flock(2) fail with ENOLCK, as it does on an NFSv3 mount without a
// lock daemon; every other system call is allowed.
void deny_flock() {
#if defined(__x86_64__)
  constexpr std::uint32_t kArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
  constexpr std::uint32_t kArch = AUDIT_ARCH_AARCH64;
#else
  unsupported("--deny-flock knows x86_64 and aarch64 only");
#endif
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kArch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_flock, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOLCK & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog program{static_cast<unsigned short>(std::size(filter)), filter};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
    unsupported(std::string("seccomp: ") + std::strerror(errno));
  }
}

struct Call {
  int thread = 0;
  std::string key, source, xxh3, manifest_xxh3, error, error_code;
  std::int64_t start_ns = 0, end_ns = 0;
};

struct CompileSpan {
  std::string key;
  std::int64_t begin_ns = 0, end_ns = -1;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"One process of the fmha-jit stress tests", "fmha_jit_stress_worker"};
  std::string cache_dir, configs_file, state_file;
  int threads = 4, slot = -1;
  std::uint64_t fsize_limit = 0, tmpfs_bytes = 0;
  bool read_only = false, no_flock = false;
  unsigned seed = 0;
  app.add_option("--cache-dir", cache_dir, "Cache root")->required();
  app.add_option("--configs", configs_file, "JSON array of configs")->required();
  app.add_option("--threads", threads, "Threads, each setting up every config")
      ->check(CLI::Range(1, 256));
  app.add_option("--seed", seed, "Shuffles each thread's order of the configs (0: rotate only)");
  app.add_option("--state", state_file, "Shared state file the killer reads (worker_state.hpp)");
  app.add_option("--slot", slot, "This worker's slot in --state");
  app.add_option("--fsize-limit", fsize_limit, "RLIMIT_FSIZE in bytes; SIGXFSZ is ignored");
  app.add_option("--tmpfs-bytes", tmpfs_bytes, "Mount a tmpfs of this size on the cache root");
  app.add_flag("--read-only-mount", read_only, "Bind-mount the cache root read-only");
  app.add_flag("--deny-flock", no_flock, "flock(2) fails with ENOLCK");
  CLI11_PARSE(app, argc, argv);

  if (tmpfs_bytes > 0) mount_tmpfs(cache_dir, tmpfs_bytes);
  if (read_only) remount_read_only(cache_dir);
  if (no_flock) deny_flock();
  if (fsize_limit > 0) {
    // Writes past the limit then fail with EFBIG, as on a full disk, instead of killing us.
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{fsize_limit, fsize_limit};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) {
      unsupported(std::string("setrlimit: ") + std::strerror(errno));
    }
  }
  test::WorkerSlot* shared = nullptr;
  if (!state_file.empty()) shared = test::map_worker_slot(state_file, slot);

  // Every warning goes to stderr and into the report.
  std::ostringstream log;
  auto logger = std::make_shared<spdlog::logger>(
      "fmha-jit", spdlog::sinks_init_list{std::make_shared<spdlog::sinks::ostream_sink_mt>(log),
                                          std::make_shared<spdlog::sinks::stderr_sink_mt>()});
  logger->set_pattern("%l: %v");
  logger->set_level(spdlog::level::warn);
  spdlog::set_default_logger(logger);

  std::vector<FmhaKernelConfig> configs;
  for (const auto& j : nlohmann::json::parse(std::ifstream(configs_file))) {
    configs.push_back(config_from_json(j));
  }

  std::mutex mutex;
  std::vector<CompileSpan> spans;
  thread_local bool storing = false;  // between this thread's compile and its setup returning
  dispatch::set_compile_observer([&](const dispatch::CompileEvent& event) {
    const std::string& key = event.key;
    const bool finished = event.finished;
    const std::int64_t t = now_ns();
    if (shared) {
      std::atomic_ref<int>(shared->compiling).fetch_add(finished ? -1 : 1);
      if (finished) std::atomic_ref<int>(shared->storing).fetch_add(1);
    }
    storing = finished;
    std::lock_guard lock(mutex);
    if (!finished) {
      spans.push_back({key, t, -1});
      return;
    }
    for (auto& s : spans) {
      if (s.key == key && s.end_ns < 0) s.end_ns = t;
    }
  });

  std::vector<std::vector<Call>> calls(static_cast<std::size_t>(threads));
  const SetupOptions options{.cache_dir = fs::path(cache_dir), .load = false};
  auto run = [&](int t) {
    std::vector<std::size_t> order(configs.size());
    for (std::size_t i = 0; i < order.size(); ++i) {
      order[i] = (i + static_cast<std::size_t>(t) * configs.size() / threads) % configs.size();
    }
    if (seed != 0) {
      std::shuffle(order.begin(), order.end(),
                   std::mt19937(seed * 1000 + static_cast<unsigned>(t)));
    }
    for (std::size_t i : order) {
      Call c;
      c.thread = t;
      c.start_ns = now_ns();
      const FmhaSetupResult r = setup_fmha_dispatcher(configs[i], options);
      c.end_ns = now_ns();
      if (shared && storing) std::atomic_ref<int>(shared->storing).fetch_sub(1);
      storing = false;
      c.key = r.key;
      if (r.success) {
        c.source = std::string(to_string(r.source));
        // The bytes this process holds for the runner: a memory hit of the same pipeline.
        const auto kernel = dispatch::obtain_kernel(configs[i], cache_dir).kernel;
        c.xxh3 = cache::xxh3_128_hex(kernel->binary);
        c.manifest_xxh3 = kernel->manifest.binary_xxh3;
      } else {
        c.source = "failed";
        c.error = r.error;
        c.error_code = r.error_code ? to_string(*r.error_code) : "";
      }
      calls[static_cast<std::size_t>(t)].push_back(std::move(c));
      if (shared) std::atomic_ref<int>(shared->calls).fetch_add(1);
    }
  };
  {
    std::vector<std::jthread> pool;
    for (int t = 0; t < threads; ++t) pool.emplace_back(run, t);
  }
  dispatch::set_compile_observer({});

  bool ok = true;
  nlohmann::json report_calls = nlohmann::json::array();
  for (const auto& per_thread : calls) {
    for (const auto& c : per_thread) {
      ok = ok && c.source != "failed";
      report_calls.push_back({{"thread", c.thread},
                              {"key", c.key},
                              {"source", c.source},
                              {"xxh3", c.xxh3},
                              {"manifest_xxh3", c.manifest_xxh3},
                              {"error", c.error},
                              {"error_code", c.error_code},
                              {"start_ns", c.start_ns},
                              {"end_ns", c.end_ns}});
    }
  }
  nlohmann::json report_compiles = nlohmann::json::array();
  for (const auto& s : spans) {
    report_compiles.push_back({{"key", s.key}, {"begin_ns", s.begin_ns}, {"end_ns", s.end_ns}});
  }
  spdlog::default_logger()->flush();
  nlohmann::json warnings = nlohmann::json::array();
  std::istringstream lines(log.str());
  for (std::string line; std::getline(lines, line);) warnings.push_back(line);
  std::cout << nlohmann::json{{"pid", ::getpid()},
                              {"ok", ok},
                              {"calls", report_calls},
                              {"compiles", report_compiles},
                              {"warnings", warnings}}
                   .dump()
            << std::endl;
  return ok ? 0 : 1;
}
