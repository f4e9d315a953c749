#include "galley/dnn/prepared_weights.hpp"

namespace galley::dnn {

std::shared_ptr<const void> PreparedWeights::get(std::string_view tag,
                                                 const std::function<std::shared_ptr<const void>()>& make) {
  const std::lock_guard lock(mutex_);
  if (data_ != nullptr && tag_ == tag) return data_;
  std::shared_ptr<const void> fresh = make();
  // Assigned only after make() returned: a throwing make() leaves the slot as it was.
  tag_.assign(tag);
  data_ = std::move(fresh);
  ++preparations_;
  return data_;
}

std::string PreparedWeights::tag() const {
  const std::lock_guard lock(mutex_);
  return tag_;
}

std::uint64_t PreparedWeights::preparations() const {
  const std::lock_guard lock(mutex_);
  return preparations_;
}

}  // namespace galley::dnn
