// A few recently used values by key, most recent first: for per-call state of a vendor plan that
// depends on the call's pointers (cuDNN's variant packs), which layers of one shape share.
#pragma once

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

namespace galley::backends::gpu {

/// At most `capacity` (key, value) pairs; a hit moves its pair to the front, an insert drops the
/// least recently used pair when full. A linear search: meant for a handful of entries compared by
/// a few words (pointers), where it costs less than hashing. Not thread-safe.
template <class Key, class Value>
class RecentCache {
 public:
  explicit RecentCache(std::size_t capacity) : capacity_(std::max<std::size_t>(capacity, 1)) {}

  /// The value stored for `key`, moved to the front; nullptr when there is none.
  Value* find(const Key& key) {
    auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.first == key; });
    if (it == entries_.end()) return nullptr;
    std::rotate(entries_.begin(), it, it + 1);
    return &entries_.front().second;
  }

  /// Stores `value` for `key` at the front (the key must not be present); returns it.
  Value& insert(Key key, Value value) {
    if (entries_.size() >= capacity_) entries_.pop_back();
    entries_.insert(entries_.begin(), Entry(std::move(key), std::move(value)));
    return entries_.front().second;
  }

  std::size_t size() const { return entries_.size(); }

  /// Every value, most recent first (to release them without destroying, at process exit).
  template <class F>
  void for_each_value(F&& f) {
    for (Entry& e : entries_) f(e.second);
  }

 private:
  using Entry = std::pair<Key, Value>;
  std::size_t capacity_;
  std::vector<Entry> entries_;
};

}  // namespace galley::backends::gpu
