// The in-process cache: key -> value, built at most once per key per process. Threads asking for a
// key that is being built wait on that key alone; different keys build in parallel.
#pragma once

#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace fmha_jit::cache {

template <class Value>
class MemoryCache {
 public:
  using Ptr = std::shared_ptr<const Value>;

  // `built` is set when this call ran `build`. A failed build is not cached: every waiter sees its
  // exception and the next call tries again.
  Ptr get_or_build(const std::string& key, const std::function<Ptr()>& build,
                   bool* built = nullptr) {
    std::promise<Ptr> promise;
    std::shared_future<Ptr> future;
    bool owner = false;
    {
      std::lock_guard lock(mutex_);
      auto it = map_.find(key);
      if (it == map_.end()) {
        future = promise.get_future().share();
        map_.emplace(key, future);
        owner = true;
      } else {
        future = it->second;
      }
    }
    if (built) *built = owner;
    if (!owner) return future.get();
    try {
      promise.set_value(build());
    } catch (...) {
      promise.set_exception(std::current_exception());
      std::lock_guard lock(mutex_);
      map_.erase(key);
    }
    return future.get();
  }

  // nullptr when the key is absent, still building, or its build just failed.
  Ptr find(const std::string& key) const {
    std::lock_guard lock(mutex_);
    auto it = map_.find(key);
    if (it == map_.end()) return nullptr;
    if (it->second.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return nullptr;
    try {
      return it->second.get();
    } catch (...) {
      return nullptr;  // the failing builder erases the entry right after publishing its error
    }
  }

  void clear() {
    std::lock_guard lock(mutex_);
    map_.clear();
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::shared_future<Ptr>> map_;
};

}  // namespace fmha_jit::cache
