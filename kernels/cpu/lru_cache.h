// A bounded, thread-safe map from a key to an immutable value that is costly to make (oneDNN
// primitives, onednn_matmul.cpp): the least recently used entry goes when it is full.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace loom::kernels::cpu {

struct LruCacheStats {
  int64_t created = 0;  // values made (misses)
  int64_t hits = 0;
  int64_t entries = 0;  // held now
};

// One mutex around lookup and insertion, not a cache per thread: matmul.cpp calls from
// every pool thread at once with the same shapes, and a cache per thread would make each
// value once per thread (a oneDNN primitive costs 10-100x a small GEMM). The lock is held
// for a hash lookup only; a miss makes its value outside it (two threads missing together
// may both make one; the first inserted is kept). Values are shared_ptr<const V>: a user
// keeps its value alive while an eviction or clear() drops it from the map.
template <typename Key, typename Value, typename Hash>
class LruCache {
 public:
  explicit LruCache(size_t capacity) : capacity_(capacity) {}

  template <typename Make>
  std::shared_ptr<const Value> get(const Key& key, Make&& make) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = map_.find(key);
      if (it != map_.end()) {
        ++stats_.hits;
        order_.splice(order_.begin(), order_, it->second.second);  // most recent first
        return it->second.first;
      }
    }
    std::shared_ptr<const Value> made = std::make_shared<const Value>(make());
    std::lock_guard<std::mutex> lock(mutex_);
    ++stats_.created;
    auto it = map_.find(key);
    if (it != map_.end()) return it->second.first;  // another thread's, made meanwhile
    if (map_.size() >= capacity_) {
      map_.erase(order_.back());
      order_.pop_back();
    }
    order_.push_front(key);
    map_.emplace(key, std::make_pair(made, order_.begin()));
    return made;
  }

  LruCacheStats stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    LruCacheStats s = stats_;
    s.entries = int64_t(map_.size());
    return s;
  }

  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    map_.clear();
    order_.clear();
  }

 private:
  const size_t capacity_;
  mutable std::mutex mutex_;
  std::list<Key> order_;  // most recently used first
  std::unordered_map<Key, std::pair<std::shared_ptr<const Value>, typename std::list<Key>::iterator>, Hash> map_;
  LruCacheStats stats_;
};

}  // namespace loom::kernels::cpu
