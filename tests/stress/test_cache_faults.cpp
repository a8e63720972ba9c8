// Faults of the on-disk cache, injected under real setup_fmha_dispatcher() calls in worker
// processes: each must give a warning and then a rebuild or an in-memory compile of the right
// kernel (the same bytes as a clean compile), never a crash, an error or a wrong kernel.
// tests/unit/test_disk_cache.cpp injects the same faults into the DiskCache class alone.
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <map>

#include "cache/disk_cache.hpp"
#include "cache/manifest.hpp"
#include "dispatcher/pipeline.hpp"
#include "stress/worker_client.hpp"
#include "support/test_support.hpp"

using namespace fmha_jit;
namespace fs = std::filesystem;

namespace {

constexpr int kKeys = 7;

// The configs of these tests, their keys and the bytes of a clean compile, in this process.
struct Baseline {
  std::vector<FmhaKernelConfig> configs = test::reference_configs(200, kKeys);
  std::vector<std::string> keys;
  std::map<std::string, std::string> checksum;  // key -> XXH3 of the clean binary
  fs::path cache;                               // holds a clean entry of every key

  explicit Baseline(const fs::path& dir) : cache(dir / "clean") {
    for (const auto& c : configs) {
      const auto got = dispatch::obtain_kernel(c, cache);
      keys.push_back(got.kernel->key);
      checksum[got.kernel->key] = got.kernel->manifest.binary_xxh3;
    }
  }
  fs::path copy_to(const fs::path& dir) const {
    fs::copy(cache, dir, fs::copy_options::recursive);
    return dir;
  }
  fs::path write_configs(const fs::path& dir) const {
    test::write_configs(dir / "configs.json", configs);
    return dir / "configs.json";
  }
};

// Every call succeeded, and every key's bytes are those of the clean compile.
void require_right_kernels(const test::WorkerResult& r, const Baseline& base) {
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  std::map<std::string, test::KeyTally> keys;
  test::tally(r.report, keys);
  REQUIRE(keys.size() == kKeys);
  for (const auto& [key, t] : keys) {
    INFO(key);
    CHECK(t.checksums == std::set<std::string>{base.checksum.at(key)});
    CHECK(t.manifest_mismatches == 0);
  }
}

std::map<std::string, std::string> sources(const test::WorkerResult& r) {
  // key -> where its binary came from into this process: the first call compiled it or loaded
  // it from disk, the others found it in memory.
  const std::map<std::string, int> rank = {{"compiled", 3}, {"disk", 2}, {"memory", 1}};
  std::map<std::string, std::string> out;
  for (const auto& c : r.report.at("calls")) {
    auto& s = out[c.at("key").get<std::string>()];
    const std::string source = c.at("source");
    if (s.empty() || (rank.count(source) && rank.at(source) > (rank.count(s) ? rank.at(s) : 0))) {
      s = source;
    }
  }
  return out;
}

void overwrite(const fs::path& file, const std::string& text) {
  std::ofstream(file, std::ios::binary | std::ios::trunc) << text;
}

cache::Manifest read_manifest(const fs::path& dir) {
  std::ifstream in(dir / "manifest.json");
  return cache::manifest_from_json(nlohmann::json::parse(in));
}

// A child process holding the flock of `lock` until killed.
pid_t hold_lock(const fs::path& lock) {
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const pid_t child = ::fork();
  if (child == 0) {
    const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT, 0644);
    ::flock(fd, LOCK_EX);
    (void)::write(ready[1], "x", 1);
    for (;;) ::pause();
  }
  char c;
  REQUIRE(::read(ready[0], &c, 1) == 1);
  ::close(ready[0]);
  ::close(ready[1]);
  return child;
}

void kill_and_reap(pid_t child) {
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
}

}  // namespace

TEST_CASE("faults: damaged or foreign entries are rejected with a warning and rebuilt",
          "[stress]") {
  test::TempDir tmp;
  const Baseline base(tmp.path());
  const auto dir = base.copy_to(tmp.path() / "cache");
  cache::DiskCache cache(dir);
  auto entry = [&](int i) { return cache.entry_dir(base.keys[static_cast<std::size_t>(i)]); };
  // One fault per key, and the reason each rejection must give.
  auto m = read_manifest(entry(5));
  const std::string other_arch = m.arch == "sm_80" ? "sm_90" : "sm_80";
  const std::vector<std::string> reasons = {"bytes, manifest says",  "checksum mismatch",
                                            "manifest.json missing", "manifest.json unparsable",
                                            "manifest names key",    "built for arch " + other_arch,
                                            "built by nvrtc 0.0"};
  fs::resize_file(entry(0) / "kernel.cubin", fs::file_size(entry(0) / "kernel.cubin") / 2);
  {
    std::fstream f(entry(1) / "kernel.cubin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(1000);
    const char byte = static_cast<char>(f.get());
    f.seekp(1000);
    f.put(static_cast<char>(byte ^ 0x01));
  }
  fs::remove(entry(2) / "manifest.json");
  overwrite(entry(3) / "manifest.json", "{\"format_version\": 1, \"key\": ");
  fs::copy_file(entry(5) / "manifest.json", entry(4) / "manifest.json",
                fs::copy_options::overwrite_existing);
  m.arch = other_arch;  // the entry of another arch under this key
  overwrite(entry(5) / "manifest.json", cache::to_json(m).dump());
  m = read_manifest(entry(6));
  m.compiler_version = "0.0 (an older NVRTC)";  // a stale entry after an upgrade
  overwrite(entry(6) / "manifest.json", cache::to_json(m).dump());

  const auto r = test::run_worker(test::worker_args(dir, base.write_configs(tmp.path()), 2), {},
                                  tmp.path() / "worker");
  require_right_kernels(r, base);
  const auto src = sources(r);
  for (int i = 0; i < kKeys; ++i) {
    const std::string& key = base.keys[static_cast<std::size_t>(i)];
    INFO(key << ": " << reasons[static_cast<std::size_t>(i)] << "; warnings "
             << r.report.at("warnings").dump());
    CHECK(src.at(key) == "compiled");
    CHECK(test::count_warnings(r.report, "cache entry " + key + " rejected (") == 1);
    CHECK(test::count_warnings(r.report, reasons[static_cast<std::size_t>(i)]) == 1);
  }
  const auto report = cache.verify(false);
  CHECK(report.ok == kKeys);
  CHECK(report.bad == 0);
  // The rebuilt entries are served from disk now, silently.
  const auto again = test::run_worker(test::worker_args(dir, base.write_configs(tmp.path()), 2), {},
                                      tmp.path() / "again");
  require_right_kernels(again, base);
  for (const auto& [key, s] : sources(again)) CHECK(s == "disk");
  CHECK(again.report.at("warnings").empty());
}

TEST_CASE("faults: a read-only cache serves its entries and compiles the rest in memory",
          "[stress]") {
  test::TempDir tmp;
  const Baseline base(tmp.path());
  const auto dir = base.copy_to(tmp.path() / "cache");
  cache::DiskCache writer(dir);
  const std::string missing = base.keys[0], damaged = base.keys[1];
  fs::remove_all(writer.entry_dir(missing));
  fs::resize_file(writer.entry_dir(damaged) / "kernel.cubin", 100);
  std::vector<std::string> extra;
  if (::geteuid() == 0) {
    // Root ignores permission bits: a read-only bind mount in the worker's own mount namespace.
    extra.push_back("--read-only-mount");
  } else {
    for (auto it = fs::recursive_directory_iterator(dir); it != fs::end(it); ++it) {
      if (it->is_directory())
        fs::permissions(it->path(), fs::perms::owner_write, fs::perm_options::remove);
    }
    fs::permissions(dir, fs::perms::owner_write, fs::perm_options::remove);
  }
  const auto r = test::run_worker(test::worker_args(dir, base.write_configs(tmp.path()), 2, extra),
                                  {}, tmp.path() / "worker");
  if (r.skipped()) {
    WARN("read-only mount not possible here, test skipped: " << r.describe());
    return;
  }
  require_right_kernels(r, base);
  const auto src = sources(r);
  const std::string warnings = r.report.at("warnings").dump();
  INFO(warnings);
  CHECK(src.at(missing) == "compiled");
  CHECK(src.at(damaged) == "compiled");
  for (std::size_t i = 2; i < base.keys.size(); ++i) CHECK(src.at(base.keys[i]) == "disk");
  CHECK(test::count_warnings(r.report, "is not writable") == 1);
  CHECK(test::count_warnings(r.report, "cache entry " + damaged + " rejected") == 1);
  // Nothing was written: the missing entry is still missing, the damaged one still damaged.
  CHECK_FALSE(fs::exists(writer.entry_dir(missing)));
  CHECK(fs::file_size(writer.entry_dir(damaged) / "kernel.cubin") == 100);
}

TEST_CASE("faults: a full disk leaves no partial entry and the kernels come from memory",
          "[stress]") {
  test::TempDir tmp;
  const Baseline base(tmp.path());
  const auto configs = base.write_configs(tmp.path());
  SECTION("RLIMIT_FSIZE below the size of a binary: every write of one fails with EFBIG") {
    const auto dir = tmp.path() / "cache";
    const auto r = test::run_worker(test::worker_args(dir, configs, 2, {"--fsize-limit", "16384"}),
                                    {}, tmp.path() / "worker");
    require_right_kernels(r, base);
    INFO(r.report.at("warnings").dump());
    for (const auto& [key, s] : sources(r)) CHECK(s == "compiled");
    CHECK(test::count_warnings(r.report, "not stored") == kKeys);
    CHECK(test::count_warnings(r.report, "File too large") == kKeys);
    cache::DiskCache cache(dir);
    const auto report = cache.verify(false);
    CHECK(report.ok + report.bad == 0);  // no entry, not even a partial one
    CHECK(report.leftovers == 0);        // and no staging folder
    // With room again, the next run stores everything.
    const auto later =
        test::run_worker(test::worker_args(dir, configs, 2), {}, tmp.path() / "later");
    require_right_kernels(later, base);
    CHECK(cache.verify(false).ok == kKeys);
  }
  SECTION("a 96 KiB tmpfs: some entries fit, then ENOSPC") {
    const auto dir = tmp.path() / "small";
    const auto r = test::run_worker(test::worker_args(dir, configs, 2, {"--tmpfs-bytes", "98304"}),
                                    {}, tmp.path() / "worker");
    if (r.skipped()) {
      WARN("tmpfs mount not possible here, section skipped: " << r.describe());
      return;
    }
    require_right_kernels(r, base);
    INFO(r.report.at("warnings").dump());
    const int full = test::count_warnings(r.report, "No space left on device");
    CHECK(full >= 1);
    CHECK(full < kKeys);  // the first entries did fit
    CHECK(test::count_warnings(r.report, "not stored") == full);
  }
}

TEST_CASE("faults: a cache path that is a file compiles in memory with one warning", "[stress]") {
  test::TempDir tmp;
  const Baseline base(tmp.path());
  const auto file = tmp.path() / "not-a-folder";
  overwrite(file, "x");
  const auto r = test::run_worker(test::worker_args(file, base.write_configs(tmp.path()), 2), {},
                                  tmp.path() / "worker");
  require_right_kernels(r, base);
  for (const auto& [key, s] : sources(r)) CHECK(s == "compiled");
  INFO(r.report.at("warnings").dump());
  CHECK(test::count_warnings(r.report, "is not writable") == 1);
  CHECK(fs::is_regular_file(file));
  CHECK(fs::file_size(file) == 1);
}

TEST_CASE("faults: lock files of dead processes block nobody", "[stress]") {
  test::TempDir tmp;
  const Baseline base(tmp.path());
  const auto dir = tmp.path() / "cache";
  cache::DiskCache cache(dir);
  // Lock files of every key, as a crashed run leaves them, one of them locked by a process that
  // was then killed while holding it.
  for (const auto& key : base.keys)
    overwrite(cache.version_dir() / "locks" / (key + ".lock"), "1234");
  kill_and_reap(hold_lock(cache.version_dir() / "locks" / (base.keys[0] + ".lock")));
  const auto start = std::chrono::steady_clock::now();
  const auto r = test::run_worker(test::worker_args(dir, base.write_configs(tmp.path()), 2),
                                  {"FMHA_JIT_LOCK_TIMEOUT_MS=60000"}, tmp.path() / "worker");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  require_right_kernels(r, base);
  CHECK(r.report.at("warnings").empty());
  CHECK(seconds < 30);  // no lock wait: the kernel dropped the dead holder's flock
  CHECK(cache.verify(false).ok == kKeys);
}

TEST_CASE("faults: a hung lock holder costs one bounded wait and an in-memory compile",
          "[stress]") {
  test::TempDir tmp;
  const Baseline base(tmp.path());
  const auto dir = tmp.path() / "cache";
  cache::DiskCache cache(dir);
  const std::string hung = base.keys[0];
  const pid_t holder = hold_lock(cache.version_dir() / "locks" / (hung + ".lock"));
  const auto configs = base.write_configs(tmp.path());
  const auto r = test::run_worker(test::worker_args(dir, configs, 2),
                                  {"FMHA_JIT_LOCK_TIMEOUT_MS=1000"}, tmp.path() / "worker");
  kill_and_reap(holder);
  require_right_kernels(r, base);
  INFO(r.report.at("warnings").dump());
  CHECK(test::count_warnings(r.report, "cache lock for " + hung + " not taken (timed out") == 1);
  CHECK(r.report.at("warnings").size() == 1);
  CHECK_FALSE(fs::exists(cache.entry_dir(hung)));  // compiled in memory, not stored
  CHECK(cache.verify(false).ok == kKeys - 1);
  // The holder is gone: the next run stores the key.
  const auto later = test::run_worker(test::worker_args(dir, configs, 2),
                                      {"FMHA_JIT_LOCK_TIMEOUT_MS=1000"}, tmp.path() / "later");
  require_right_kernels(later, base);
  CHECK(sources(later).at(hung) == "compiled");
  CHECK(cache.verify(false).ok == kKeys);
}

TEST_CASE("faults: a filesystem without flock (NFSv3 without lockd) still stores atomically",
          "[stress]") {
  test::TempDir tmp;
  const Baseline base(tmp.path());
  const auto dir = tmp.path() / "cache";
  const auto configs = base.write_configs(tmp.path());
  // Two processes at once, each with flock failing with ENOLCK.
  std::vector<test::Worker> workers;
  for (int p = 0; p < 2; ++p) {
    workers.push_back(test::spawn_worker(test::worker_args(dir, configs, 2, {"--deny-flock"}), {},
                                         tmp.path() / ("worker-" + std::to_string(p))));
  }
  for (const auto& w : workers) {
    const auto r = test::wait_worker(w);
    if (r.skipped()) {
      WARN("seccomp not possible here, test skipped: " << r.describe());
      return;
    }
    require_right_kernels(r, base);
    INFO(r.report.at("warnings").dump());
    CHECK(test::count_warnings(r.report, "has no file locks (flock") == 1);
    CHECK(test::count_warnings(r.report, "No locks available") == 1);
  }
  cache::DiskCache cache(dir);
  const auto report = cache.verify(false);
  CHECK(report.ok == kKeys);
  CHECK(report.bad == 0);
  CHECK(report.leftovers == 0);
}
