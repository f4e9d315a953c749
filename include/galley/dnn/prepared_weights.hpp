// A call site's weights in the form a solver computes with, kept across calls: ONNX Runtime's
// PrePack and oneDNN's weight reorders. At batch 1 a solver that packs or transforms its weights
// on every call (GEMM panels, Winograd filters) reads and writes them again for each image; with a
// slot it does that once per call site.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

namespace galley::dnn {

/// One call site's prepared weights, passed to an op entry point beside its tensors. A solver that
/// can use it builds its form of the weights on the first call and reads it on later ones; a call
/// with another tag (another solver, problem or weights address) prepares again and replaces it.
/// The weights' contents must not change while calls share a slot: give a slot only for constant
/// weights (an inference graph's convolutions). Calls without one behave as before. Thread-safe;
/// share it by shared_ptr, so a call still running on a stream keeps it alive.
class PreparedWeights {
 public:
  PreparedWeights() = default;
  PreparedWeights(const PreparedWeights&) = delete;
  PreparedWeights& operator=(const PreparedWeights&) = delete;

  /// The data stored under `tag`. When the slot holds another tag or nothing, make() builds it
  /// first (under the slot's lock, so concurrent calls build it once) and it replaces the old data,
  /// which stays alive for callers still holding it. If make() throws, the slot is unchanged.
  std::shared_ptr<const void> get(std::string_view tag,
                                  const std::function<std::shared_ptr<const void>()>& make);

  /// The tag of what the slot holds; empty when it holds nothing.
  std::string tag() const;
  /// How many times get() has built data: for tests and diagnostics.
  std::uint64_t preparations() const;

 private:
  mutable std::mutex mutex_;
  std::string tag_;
  std::shared_ptr<const void> data_;
  std::uint64_t preparations_ = 0;
};

}  // namespace galley::dnn
