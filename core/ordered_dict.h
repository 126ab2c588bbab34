// OrderedDict: a dictionary from string keys that remembers insertion order, as Python's
// dict (and the collections.OrderedDict that torch.nn.Module.state_dict() returns).
//
// Loom's state dicts are OrderedDict<Tensor>, so that model->state_dict() lists its keys
// in PyTorch's order (registration order), not sorted. The interface is the part of
// std::map's that the code base uses, and iteration yields std::pair<const std::string, V>
// in insertion order:
//
//   OrderedDict<Tensor> sd{{"weight", w}, {"bias", b}};
//   sd["scale"] = s;                      // a new key goes at the end
//   sd["weight"] = w2;                    // an existing key keeps its place: still first
//   for (const auto& [name, t] : sd) ...  // weight, bias, scale
//   sd.at("gamma");                       // IndexError: OrderedDict::at: no key 'gamma'
//
// The entries live in a std::list indexed by a hash map, so lookups are O(1) and, as with
// std::map, iterators and references stay valid until their own entry is erased.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <iterator>
#include <list>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/error.h"

namespace loom {

template <typename V>
class OrderedDict {
 public:
  using key_type = std::string;
  using mapped_type = V;
  using value_type = std::pair<const std::string, V>;
  using iterator = typename std::list<value_type>::iterator;
  using const_iterator = typename std::list<value_type>::const_iterator;

  OrderedDict() = default;
  // A repeated key keeps its first position and takes its last value (as Python's dict).
  OrderedDict(std::initializer_list<value_type> entries) : OrderedDict(entries.begin(), entries.end()) {}
  template <std::input_iterator It>
  OrderedDict(It first, It last) {
    for (; first != last; ++first) insert_or_assign((*first).first, (*first).second);
  }
  // A std::map (a safetensors TensorMap) converts implicitly, in its sorted order.
  OrderedDict(const std::map<std::string, V>& m) : OrderedDict(m.begin(), m.end()) {}  // NOLINT

  // The index points into entries_: a copy must build its own; a move carries it along.
  OrderedDict(const OrderedDict& other) : OrderedDict(other.begin(), other.end()) {}
  OrderedDict& operator=(const OrderedDict& other) {
    if (this != &other) *this = OrderedDict(other);
    return *this;
  }
  OrderedDict(OrderedDict&&) = default;
  OrderedDict& operator=(OrderedDict&&) = default;

  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  iterator begin() { return entries_.begin(); }
  iterator end() { return entries_.end(); }
  const_iterator begin() const { return entries_.begin(); }
  const_iterator end() const { return entries_.end(); }

  bool contains(const std::string& key) const { return index_.count(key) != 0; }
  size_t count(const std::string& key) const { return index_.count(key); }
  iterator find(const std::string& key) {
    auto it = index_.find(key);
    return it == index_.end() ? end() : it->second;
  }
  const_iterator find(const std::string& key) const {
    auto it = index_.find(key);
    return it == index_.end() ? end() : const_iterator(it->second);
  }
  V& at(const std::string& key) { return const_cast<V&>(std::as_const(*this).at(key)); }
  const V& at(const std::string& key) const {
    auto it = index_.find(key);
    LOOM_CHECK(it != index_.end(), IndexError, "OrderedDict::at: no key '", key, "'");
    return it->second->second;
  }
  // The value under key; a missing key is appended with a default-constructed value.
  V& operator[](const std::string& key) { return try_emplace(key).first->second; }

  // Appends (key, V(args...)) unless key is present; the bool says whether it did.
  template <typename... Args>
  std::pair<iterator, bool> try_emplace(const std::string& key, Args&&... args) {
    auto [slot, inserted] = index_.try_emplace(key, entries_.end());
    if (!inserted) return {slot->second, false};
    try {
      entries_.emplace_back(std::piecewise_construct, std::forward_as_tuple(key),
                            std::forward_as_tuple(std::forward<Args>(args)...));
    } catch (...) {
      index_.erase(slot);
      throw;
    }
    slot->second = std::prev(entries_.end());
    return {slot->second, true};
  }
  template <typename... Args>
  std::pair<iterator, bool> emplace(const std::string& key, Args&&... args) {
    return try_emplace(key, std::forward<Args>(args)...);
  }
  std::pair<iterator, bool> insert(const value_type& entry) { return try_emplace(entry.first, entry.second); }
  // Sets key to value: in place if present, else at the end.
  template <typename T>
  std::pair<iterator, bool> insert_or_assign(const std::string& key, T&& value) {
    auto result = try_emplace(key, std::forward<T>(value));
    if (!result.second) result.first->second = std::forward<T>(value);
    return result;
  }

  // Removes key if present; returns how many entries were removed (0 or 1).
  size_t erase(const std::string& key) {
    auto it = index_.find(key);
    if (it == index_.end()) return 0;
    entries_.erase(it->second);
    index_.erase(it);
    return 1;
  }
  void clear() {
    index_.clear();
    entries_.clear();
  }

  // The keys in order, as Python's list(d).
  std::vector<std::string> keys() const {
    std::vector<std::string> out;
    out.reserve(size());
    for (const auto& entry : entries_) out.push_back(entry.first);
    return out;
  }

 private:
  std::list<value_type> entries_;
  std::unordered_map<std::string, iterator> index_;
};

}  // namespace loom
