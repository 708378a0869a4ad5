#pragma once
// OrderedDict: what named_parameters() and friends return, as libtorch's torch::OrderedDict: items in
// insertion order, looked up by key (`model->named_parameters()["fc1.weight"]`) or position.
#include <cstddef>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/error.h"

namespace minidl {

/// Keys with values, in insertion order; an item binds as a pair (`auto& [name, p]`) and has
/// libtorch's key() and value().
///   for (auto& p : model->named_parameters()) std::cout << p.key() << ' ' << p.value().sizes() << '\n';
template <class Key, class Value>
class OrderedDict {
 public:
  struct Item : std::pair<Key, Value> {
    using std::pair<Key, Value>::pair;
    const Key& key() const noexcept { return this->first; }
    Value& value() noexcept { return this->second; }
    const Value& value() const noexcept { return this->second; }
    const std::pair<Key, Value>& pair() const noexcept { return *this; }
  };

  OrderedDict() = default;

  /// Adds an item; a key already present is an error, as in libtorch.
  Value& insert(Key key, Value value) {
    MINIDL_CHECK(index_.count(key) == 0, "OrderedDict: key '", key, "' already defined");
    index_.emplace(key, items_.size());
    items_.emplace_back(std::move(key), std::move(value));
    return items_.back().second;
  }

  /// The value under `key`; an error naming the key when there is none.
  Value& operator[](const Key& key) {
    auto it = index_.find(key);
    MINIDL_CHECK(it != index_.end(), "OrderedDict: key '", key, "' is not defined");
    return items_[it->second].second;
  }
  const Value& operator[](const Key& key) const { return const_cast<OrderedDict&>(*this)[key]; }
  /// The item at position `i` (insertion order).
  Item& operator[](size_t i) { return items_.at(i); }
  const Item& operator[](size_t i) const { return items_.at(i); }
  /// A pointer to the value under `key`, or null.
  Value* find(const Key& key) {
    auto it = index_.find(key);
    return it == index_.end() ? nullptr : &items_[it->second].second;
  }
  const Value* find(const Key& key) const { return const_cast<OrderedDict&>(*this).find(key); }
  bool contains(const Key& key) const { return index_.count(key) > 0; }

  size_t size() const noexcept { return items_.size(); }
  bool is_empty() const noexcept { return items_.empty(); }
  bool empty() const noexcept { return items_.empty(); }
  Item& front() { return items_.front(); }
  Item& back() { return items_.back(); }
  auto begin() { return items_.begin(); }
  auto end() { return items_.end(); }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }
  auto rbegin() { return items_.rbegin(); }
  auto rend() { return items_.rend(); }

  const std::vector<Item>& items() const noexcept { return items_; }
  std::vector<Key> keys() const {
    std::vector<Key> out;
    for (const Item& item : items_) out.push_back(item.first);
    return out;
  }
  std::vector<Value> values() const {
    std::vector<Value> out;
    for (const Item& item : items_) out.push_back(item.second);
    return out;
  }
  /// The items as plain pairs.
  operator std::vector<std::pair<Key, Value>>() const {  // NOLINT: implicit, for code written against a vector
    return {items_.begin(), items_.end()};
  }

 private:
  std::vector<Item> items_;
  std::unordered_map<Key, size_t> index_;
};

}  // namespace minidl
