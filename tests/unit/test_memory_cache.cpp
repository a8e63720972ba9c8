#include <catch2/catch.hpp>

#include <atomic>
#include <condition_variable>
#include <thread>

#include "cache/memory_cache.hpp"

using fmha_jit::cache::MemoryCache;

TEST_CASE("memory cache: one build per key, every caller gets the same value", "[cache]") {
  MemoryCache<int> cache;
  std::atomic<int> builds{0};
  std::vector<std::thread> threads;
  std::vector<std::shared_ptr<const int>> got(16);
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      got[t] = cache.get_or_build("k", [&] {
        ++builds;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        return std::make_shared<const int>(42);
      });
    });
  }
  for (auto& t : threads) t.join();
  CHECK(builds == 1);
  for (const auto& p : got) CHECK(p == got[0]);
  CHECK(cache.find("k") == got[0]);
  CHECK(cache.find("other") == nullptr);
}

TEST_CASE("memory cache: different keys build in parallel, not behind one lock", "[cache]") {
  MemoryCache<int> cache;
  std::mutex m;
  std::condition_variable cv;
  bool b_started = false;
  // A's build waits until B's build has started; with a global build lock this would time out.
  std::thread a([&] {
    cache.get_or_build("a", [&] {
      std::unique_lock lock(m);
      const bool ok = cv.wait_for(lock, std::chrono::seconds(10), [&] { return b_started; });
      return std::make_shared<const int>(ok ? 1 : -1);
    });
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::thread b([&] {
    cache.get_or_build("b", [&] {
      {
        std::lock_guard lock(m);
        b_started = true;
      }
      cv.notify_all();
      return std::make_shared<const int>(2);
    });
  });
  a.join();
  b.join();
  CHECK(*cache.find("a") == 1);
}

TEST_CASE("memory cache: a failed build is not cached", "[cache]") {
  MemoryCache<int> cache;
  CHECK_THROWS_AS(
      cache.get_or_build(
          "k", []() -> std::shared_ptr<const int> { throw std::runtime_error("compile failed"); }),
      std::runtime_error);
  bool built = false;
  CHECK(*cache.get_or_build(
            "k", [] { return std::make_shared<const int>(7); }, &built) == 7);
  CHECK(built);
}
