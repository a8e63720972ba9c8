// Many processes and threads call setup_fmha_dispatcher() on overlapping config sets against one
// cache, with and without a killer sending SIGKILL to processes in the middle of a compile; and
// threads of one process compiling each key once, different keys at the same time.
//
// FMHA_JIT_STRESS_PROCESSES and FMHA_JIT_STRESS_KILL_ROUNDS scale the multi-process tests up for
// the long runs of RELIABILITY.md; each test prints a "stress-figures:" JSON line with its counts.
#include <signal.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "cache/disk_cache.hpp"
#include "cache/file_io.hpp"
#include "dispatcher/dispatcher.hpp"
#include "dispatcher/pipeline.hpp"
#include "fmha_jit/dispatcher.hpp"
#include "stress/worker_client.hpp"
#include "stress/worker_state.hpp"
#include "support/test_support.hpp"

using namespace fmha_jit;
namespace fs = std::filesystem;

namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

// `count` configs of `universe` starting at `first`, wrapping around: neighbouring processes share
// most of their sets.
std::vector<FmhaKernelConfig> window(const std::vector<FmhaKernelConfig>& universe, int first,
                                     int count) {
  std::vector<FmhaKernelConfig> out;
  for (int i = 0; i < count; ++i) {
    out.push_back(universe[static_cast<std::size_t>(first + i) % universe.size()]);
  }
  return out;
}

// Folders left by installs that never finished (.staging-*) or removals cut short (.trash-*).
int count_leftovers(const cache::DiskCache& cache) {
  int n = 0;
  std::error_code ec;
  for (const auto& shard : fs::directory_iterator(cache.version_dir() / "entries", ec)) {
    std::error_code shard_ec;
    for (const auto& d : fs::directory_iterator(shard.path(), shard_ec)) {
      const auto name = d.path().filename().string();
      n += name.starts_with(".staging-") || name.starts_with(".trash-");
    }
  }
  return n;
}

// Lock files that another process still holds: none may remain once every worker is gone.
int held_locks(const cache::DiskCache& cache) {
  int n = 0;
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(cache.version_dir() / "locks", ec)) {
    n += !cache::FileLock(f.path(), std::chrono::milliseconds(0)).locked();
  }
  return n;
}

}  // namespace

TEST_CASE("stress: 16 processes x 4 threads set up overlapping configs in one empty cache",
          "[stress]") {
  const int processes = env_int("FMHA_JIT_STRESS_PROCESSES", 16);
  constexpr int kThreads = 4, kKeys = 24, kPerProcess = 12;
  test::TempDir tmp;
  const auto cache_dir = tmp.path() / "cache";
  const auto universe = test::reference_configs(0, kKeys);
  std::vector<test::Worker> workers;
  for (int p = 0; p < processes; ++p) {
    const auto file = tmp.path() / ("configs-" + std::to_string(p) + ".json");
    test::write_configs(file, window(universe, 3 * p, kPerProcess));
    workers.push_back(test::spawn_worker(
        test::worker_args(cache_dir, file, kThreads, {"--seed", std::to_string(p + 1)}), {},
        tmp.path() / ("worker-" + std::to_string(p))));
  }
  std::map<std::string, test::KeyTally> keys;
  int calls = 0;
  for (const auto& w : workers) {
    const auto r = test::wait_worker(w);
    INFO(r.describe());
    REQUIRE(r.exit_code == 0);
    CHECK(r.report.at("warnings").empty());
    calls += static_cast<int>(r.report.at("calls").size());
    test::tally(r.report, keys);
  }
  CHECK(calls == processes * kThreads * kPerProcess);
  REQUIRE(keys.size() == kKeys);
  for (const auto& [key, t] : keys) {
    INFO(key);
    CHECK(t.compiles == 1);  // NVRTC ran once for this key across all processes
    CHECK(t.compiled == 1);
    CHECK(t.checksums.size() == 1);  // every process holds identical bytes
    CHECK(t.manifest_mismatches == 0);
  }
  cache::DiskCache cache(cache_dir);
  const auto report = cache.verify(false);
  CHECK(report.ok == kKeys);
  CHECK(report.bad == 0);
  CHECK(count_leftovers(cache) == 0);
  std::printf(
      "stress-figures: {\"test\": \"concurrent setup\", \"processes\": %d, \"threads\": %d, "
      "\"keys\": %d, \"setup_calls\": %d}\n",
      processes, kThreads, kKeys, calls);
}

TEST_CASE("stress: SIGKILL of compiling processes never leaves a corrupt entry or a held lock",
          "[stress]") {
  const int processes = env_int("FMHA_JIT_STRESS_PROCESSES", 16);
  const int kill_rounds = env_int("FMHA_JIT_STRESS_KILL_ROUNDS", 3);
  constexpr int kThreads = 4, kRoundKeys = 16, kShift = 12, kPerProcess = 8;
  const int total_keys = kShift * kill_rounds + (kRoundKeys - kShift);
  REQUIRE(total_keys <= 560);
  test::TempDir tmp;
  const auto cache_dir = tmp.path() / "cache";
  const auto state_file = tmp.path() / "state";
  const auto all = test::reference_configs(0, total_keys);
  // Lock waits are bounded so that a lock left held would show as a warning, not as a hang.
  const std::vector<std::string> env{"FMHA_JIT_LOCK_TIMEOUT_MS=120000"};

  std::map<std::string, std::set<std::string>> checksums;  // over every round
  int kills = 0, kills_compiling = 0, kills_storing = 0, leftovers = 0;
  std::mt19937 rng(12345);

  // Rounds 0 .. kill_rounds-1 kill; the last round is clean and asks for every key of every round.
  for (int round = 0; round <= kill_rounds; ++round) {
    const bool clean = round == kill_rounds;
    INFO("round " << round << (clean ? " (clean)" : ""));
    const auto universe =
        clean ? all
              : std::vector<FmhaKernelConfig>(all.begin() + round * kShift,
                                              all.begin() + round * kShift + kRoundKeys);
    const int per_process = clean ? static_cast<int>(universe.size()) : kPerProcess;
    test::WorkerSlot* slots = test::map_worker_slots(state_file, processes, true);
    std::vector<test::Worker> workers;
    for (int p = 0; p < processes; ++p) {
      const auto file = tmp.path() / ("configs-" + std::to_string(p) + ".json");
      test::write_configs(
          file, window(universe, p * static_cast<int>(universe.size()) / processes, per_process));
      workers.push_back(test::spawn_worker(
          test::worker_args(cache_dir, file, kThreads,
                            {"--seed", std::to_string(round * 100 + p + 1), "--state",
                             state_file.string(), "--slot", std::to_string(p)}),
          env, tmp.path() / ("worker-" + std::to_string(p))));
    }

    // The killer: SIGKILL one random worker that is compiling or storing right now, at most half
    // of the workers per round. Even rounds wait 20-100 ms between kills and aim at compiles; odd
    // rounds poll every 0.2 ms and aim at the short window between the end of a compile and the
    // return of its setup call (staging, fsync, rename, eviction).
    std::atomic<bool> done{false};
    std::set<int> killed;
    const bool aim_at_store = round % 2 == 1;
    std::thread killer([&] {
      if (clean) return;
      while (!done && static_cast<int>(killed.size()) < processes / 2) {
        if (aim_at_store) {
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        } else {
          std::this_thread::sleep_for(std::chrono::milliseconds(20 + rng() % 80));
        }
        std::vector<int> busy;
        for (int p = 0; p < processes; ++p) {
          const int compiling = std::atomic_ref<int>(slots[p].compiling).load();
          const int storing = std::atomic_ref<int>(slots[p].storing).load();
          if (!killed.contains(p) && (aim_at_store ? storing > 0 : compiling > 0 || storing > 0)) {
            busy.push_back(p);
          }
        }
        if (busy.empty()) continue;
        const int p = busy[rng() % busy.size()];
        // A worker runs several threads: one may be storing while another compiles, so a kill
        // counts for every window it landed in (classifying it by one flag undercounted stores).
        const bool compiling = std::atomic_ref<int>(slots[p].compiling).load() > 0;
        const bool storing = std::atomic_ref<int>(slots[p].storing).load() > 0;
        if (::kill(workers[static_cast<std::size_t>(p)].pid, SIGKILL) == 0) {
          killed.insert(p);
          ++kills;
          kills_compiling += compiling ? 1 : 0;
          kills_storing += storing ? 1 : 0;
        }
      }
    });
    std::vector<test::WorkerResult> results;
    for (const auto& w : workers) results.push_back(test::wait_worker(w));
    done = true;
    killer.join();
    ::munmap(slots, sizeof(test::WorkerSlot) * static_cast<std::size_t>(processes));

    std::map<std::string, test::KeyTally> keys;
    for (int p = 0; p < processes; ++p) {
      const auto& r = results[static_cast<std::size_t>(p)];
      if (killed.contains(p) && r.signal == SIGKILL) continue;
      INFO("worker " << p << ": " << r.describe());
      REQUIRE(r.exit_code == 0);
      // Nothing torn or partial was ever seen, and no lock blocked anyone.
      CHECK(test::count_warnings(r.report, "rejected") == 0);
      CHECK(test::count_warnings(r.report, "lock") == 0);
      test::tally(r.report, keys);
    }
    for (const auto& [key, t] : keys) {
      INFO(key);
      CHECK(t.compiles <= 1);  // among the survivors: a killed compile is redone once
      CHECK(t.manifest_mismatches == 0);
      checksums[key].insert(t.checksums.begin(), t.checksums.end());
      CHECK(checksums[key].size() == 1);  // the same bytes in every process and every round
    }
    cache::DiskCache cache(cache_dir);
    const auto verify = cache.verify(false);
    CHECK(verify.bad == 0);
    CHECK(held_locks(cache) == 0);
    if (clean) {
      CHECK(keys.size() == static_cast<std::size_t>(total_keys));
      CHECK(verify.ok == total_keys);
    }
    leftovers += count_leftovers(cache);
  }
  // Every round after the first was itself a "later run" over keys whose compiles were killed; the
  // clean round completed every key. Kills must have hit compiles, or this test tested nothing.
  CHECK(kills_compiling >= 1);
  if (kill_rounds >= 2) CHECK(kills_storing >= 1);
  cache::DiskCache cache(cache_dir);
  const int before_fix = count_leftovers(cache);
  CHECK(cache.verify(false).leftovers == before_fix);
  const auto fixed = cache.verify(true);
  CHECK(fixed.leftovers_removed == before_fix);
  CHECK(count_leftovers(cache) == 0);  // verify --fix removes what killed installs left
  std::printf(
      "stress-figures: {\"test\": \"kill\", \"processes\": %d, \"kill_rounds\": %d, "
      "\"keys\": %d, \"kills\": %d, \"kills_during_compile\": %d, "
      "\"kills_after_compile_before_return\": %d, \"leftover_folders\": %d}\n",
      processes, kill_rounds, total_keys, kills, kills_compiling, kills_storing, before_fix);
  (void)leftovers;
}

TEST_CASE("stress: threads of one process compile each key once and different keys in parallel",
          "[stress]") {
  test::TempDir tmp;
  dispatch::clear_memory_cache();
  constexpr int kThreads = 8, kKeys = 6;
  const auto configs = test::reference_configs(100, kKeys);
  using Clock = std::chrono::steady_clock;

  // The first compile waits (at most 60 s) until a second one is in flight: with per-key waiting
  // that happens at once; behind a global lock it never would, and the test fails.
  std::mutex m;
  std::condition_variable cv;
  int in_flight = 0, max_in_flight = 0;
  bool paired = false;
  std::map<std::string, int> compiles;
  std::map<std::string, Clock::time_point> compile_end;
  dispatch::set_compile_observer([&](const dispatch::CompileEvent& event) {
    const std::string& key = event.key;
    std::unique_lock lock(m);
    if (event.finished) {
      --in_flight;
      compile_end[key] = Clock::now();
      return;
    }
    ++compiles[key];
    max_in_flight = std::max(max_in_flight, ++in_flight);
    if (in_flight >= 2) paired = true;
    cv.notify_all();
    cv.wait_for(lock, std::chrono::seconds(60), [&] { return paired; });
  });

  struct Result {
    std::string key;
    BinarySource source;
    const FmhaRunner* runner;
    Clock::time_point start, end;
    std::string error;
  };
  std::vector<std::vector<Result>> results(kThreads);
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kKeys; ++i) {
          // Threads start on different keys: thread t and t + kKeys share their first key.
          const auto& c = configs[static_cast<std::size_t>((i + t) % kKeys)];
          const auto start = Clock::now();
          const auto r = setup_fmha_dispatcher(c, {.cache_dir = tmp.path(), .load = false});
          results[static_cast<std::size_t>(t)].push_back(
              {r.key, r.source, r.runner.get(), start, Clock::now(), r.error});
        }
      });
    }
  }
  dispatch::set_compile_observer({});

  CHECK(max_in_flight >= 2);
  std::map<std::string, const FmhaRunner*> runner_of;
  std::map<std::string, int> compiled;
  int waited = 0;
  for (const auto& per_thread : results) {
    for (const auto& r : per_thread) {
      INFO(r.error);
      REQUIRE(r.error.empty());
      compiled[r.key] += r.source == BinarySource::compiled;
      // Nobody got a kernel before its one compile had finished.
      CHECK(r.end >= compile_end.at(r.key));
      // Calls that arrived while their key was compiling waited for that compile.
      if (r.source == BinarySource::memory && r.start < compile_end.at(r.key)) ++waited;
      if (!runner_of.count(r.key)) runner_of[r.key] = r.runner;
      CHECK(runner_of[r.key] == r.runner);  // one runner per config, shared by every thread
    }
  }
  REQUIRE(compiles.size() == kKeys);
  for (const auto& [key, n] : compiles) {
    INFO(key);
    CHECK(n == 1);
    CHECK(compiled[key] == 1);
  }
  CHECK(waited >= 1);  // threads 0 and 6 start on the same key
  std::printf(
      "stress-figures: {\"test\": \"threads\", \"threads\": %d, \"keys\": %d, "
      "\"max_compiles_in_flight\": %d, \"calls_that_waited_for_a_compile\": %d}\n",
      kThreads, kKeys, max_in_flight, waited);
}
