// A small least-recently-used map, for what can always be computed again: forgetting the oldest
// entry bounds memory without changing any result. Not thread-safe; its owner locks.
#pragma once

#include <cstddef>
#include <list>
#include <map>
#include <utility>

namespace fmha_jit::support {

template <class Key, class Value>
class LruMap {
 public:
  explicit LruMap(std::size_t capacity) : capacity_(capacity) {}
  template <class Make>
  const Value& get_or_make(const Key& key, Make&& make) {
    if (auto it = index_.find(key); it != index_.end()) {
      entries_.splice(entries_.begin(), entries_, it->second);
      return it->second->second;
    }
    entries_.emplace_front(key, make());
    index_.emplace(key, entries_.begin());
    if (entries_.size() > capacity_) {
      index_.erase(entries_.back().first);
      entries_.pop_back();
    }
    return entries_.front().second;
  }

 private:
  std::size_t capacity_;
  std::list<std::pair<Key, Value>> entries_;
  std::map<Key, typename std::list<std::pair<Key, Value>>::iterator> index_;
};

}  // namespace fmha_jit::support
