// A map that keeps at most `capacity` entries, dropping the least recently used one when a
// new one would exceed that: the cache of built cuDNN attention plans (Note [cuDNN
// attention plans] in kernels/attention/cudnn_attention_plan.h). Header-only and free of CUDA, so the
// host tests hold it to its bound. Not thread-safe: each user keeps one per thread.
#pragma once

#include <cstddef>
#include <functional>
#include <list>
#include <unordered_map>
#include <utility>

#include "core/error.h"

namespace loom::kernels {

template <typename Key, typename Value, typename Hash = std::hash<Key>>
class LruCache {
 public:
  explicit LruCache(size_t capacity) : capacity_(capacity) {
    LOOM_CHECK(capacity > 0, ValueError, "LruCache: capacity must be at least 1");
  }

  // The value of `key`, now the most recently used, or null when absent.
  Value* find(const Key& key) {
    auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    return &it->second->second;
  }

  // Stores `value` under `key` as the most recently used entry (replacing one already
  // there), dropping the least recently used entry if the cache would exceed its capacity.
  Value& insert(const Key& key, Value value) {
    if (Value* existing = find(key)) return *existing = std::move(value);
    if (order_.size() == capacity_) {
      index_.erase(order_.back().first);
      order_.pop_back();
      ++evictions_;
    }
    order_.emplace_front(key, std::move(value));
    index_.emplace(key, order_.begin());
    return order_.front().second;
  }

  size_t size() const { return order_.size(); }
  size_t capacity() const { return capacity_; }
  size_t evictions() const { return evictions_; }  // entries dropped for the bound so far
  void clear() { order_.clear(), index_.clear(); }

 private:
  using Entries = std::list<std::pair<Key, Value>>;  // most recently used first
  size_t capacity_;
  size_t evictions_ = 0;
  Entries order_;
  std::unordered_map<Key, typename Entries::iterator, Hash> index_;
};

}  // namespace loom::kernels
