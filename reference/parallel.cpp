#include "parallel.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace fmha_jit::reference {
namespace {
std::atomic<int> thread_limit{0};
}  // namespace

void set_thread_limit(int threads) { thread_limit.store(std::max(threads, 0)); }

void parallel_for(int tasks, double work, const std::function<void(int)>& fn) {
  const int limit = thread_limit.load();
  const unsigned hw =
      limit > 0 ? static_cast<unsigned>(limit) : std::thread::hardware_concurrency();
  const double by_work = work / 4e6;  // below ~4 MFLOP a thread costs more than it saves
  const int nthreads = static_cast<int>(
      std::min<double>({hw == 0 ? 1.0 : double(hw), by_work, double(tasks), 64.0}));
  if (nthreads <= 1) {
    for (int i = 0; i < tasks; ++i) fn(i);
    return;
  }
  std::atomic<int> next{0};
  std::mutex error_mutex;
  std::exception_ptr error;
  auto worker = [&] {
    for (int i = next.fetch_add(1); i < tasks; i = next.fetch_add(1)) {
      try {
        fn(i);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        next.store(tasks);
        return;
      }
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(nthreads - 1));
  try {
    for (int t = 1; t < nthreads; ++t) threads.emplace_back(worker);
  } catch (const std::system_error&) {
    // Could not start a thread: the ones started and this one share the work.
  }
  worker();
  for (std::thread& t : threads) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace fmha_jit::reference
