// A fake backend device for allocator tests: raw memory from malloc under an injected capacity
// limit, and streams whose work completes only when the test says so, so that stream-ordered
// reuse can be checked deterministically.
#pragma once

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "galley/core/error.hpp"
#include "runtime/backend.hpp"

namespace galley::memory::testing {

/// Work submitted to and completed by one fake stream (shared with its events).
struct Progress {
  std::uint64_t submitted = 0;
  std::uint64_t completed = 0;
};

class FakeEvent final : public runtime::EventImpl {
 public:
  bool query() override { return progress_ == nullptr || progress_->completed >= target_; }
  void synchronize() override {
    if (progress_ != nullptr && progress_->completed < target_) progress_->completed = target_;
  }
  float elapsed_ms_since(runtime::EventImpl&) override { return 0.0f; }
  void mark(std::shared_ptr<Progress> progress, std::uint64_t target) {
    progress_ = std::move(progress);
    target_ = target;
  }

 private:
  std::shared_ptr<Progress> progress_;
  std::uint64_t target_ = 0;
};

/// A stream whose work never runs by itself: enqueue() adds work, complete() finishes it.
class FakeStream final : public runtime::StreamImpl {
 public:
  explicit FakeStream(int* records) : progress_(std::make_shared<Progress>()), records_(records) {}
  /// Submits one unit of work (a "kernel" using some buffer) and returns its sequence number.
  std::uint64_t enqueue() { return ++progress_->submitted; }
  void complete() { progress_->completed = progress_->submitted; }
  void complete_up_to(std::uint64_t seq) {
    if (seq > progress_->completed) progress_->completed = std::min(seq, progress_->submitted);
  }
  bool done(std::uint64_t seq) const { return progress_->completed >= seq; }
  const std::shared_ptr<Progress>& progress() const { return progress_; }

  void copy_h2d(void*, const void*, std::size_t) override { enqueue(); }
  void copy_d2h(void*, const void*, std::size_t) override { enqueue(); }
  void copy_d2d(void*, const void*, std::size_t) override { enqueue(); }
  void copy_h2h(void*, const void*, std::size_t) override { enqueue(); }
  void memset(void*, int, std::size_t) override { enqueue(); }
  void host_task(std::function<void()> fn) override {
    enqueue();
    fn();
  }
  void record(runtime::EventImpl& event) override {
    ++*records_;
    dynamic_cast<FakeEvent&>(event).mark(progress_, enqueue());
  }
  void wait(runtime::EventImpl&) override {}
  void synchronize() override { complete(); }
  bool query() override { return progress_->completed >= progress_->submitted; }
  void begin_capture() override {}
  std::unique_ptr<runtime::GraphImpl> end_capture() override { return nullptr; }
  bool capturing() const override { return false; }
  void* native_handle() override { return nullptr; }

 private:
  std::shared_ptr<Progress> progress_;
  int* records_;
};

/// A device of `capacity` bytes over malloc. raw_alloc beyond the capacity throws
/// Error(out_of_memory) as a real backend does; `fail_next_with` injects another failure.
class FakeDevice final : public runtime::DeviceImpl {
 public:
  explicit FakeDevice(std::size_t capacity) : capacity_(capacity) {}
  ~FakeDevice() override {
    for (auto& [ptr, size] : live_) std::free(ptr);
  }

  runtime::DeviceProperties properties() override {
    runtime::DeviceProperties p;
    p.name = "fake";
    p.backend = "fake";
    p.memory_total = capacity_;
    p.memory_free = capacity_ - used_;
    return p;
  }
  runtime::MemoryInfo memory_info() override { return {capacity_ - used_, capacity_}; }
  void* raw_alloc(std::size_t bytes) override {
    std::lock_guard lock(mutex_);
    ++raw_alloc_calls;
    if (fail_next_with != Status::ok) {
      const auto status = fail_next_with;
      fail_next_with = Status::ok;
      throw Error(status, "fake raw_alloc: injected failure");
    }
    if (bytes > capacity_ - used_) {
      throw Error(Status::out_of_memory, "fake raw_alloc: " + std::to_string(bytes) + " bytes over capacity");
    }
    void* ptr = std::malloc(bytes == 0 ? 1 : bytes);
    if (ptr == nullptr) throw Error(Status::out_of_memory, "fake raw_alloc: host malloc failed");
    live_[ptr] = bytes;
    used_ += bytes;
    return ptr;
  }
  void raw_free(void* ptr) noexcept override {
    std::lock_guard lock(mutex_);
    ++raw_free_calls;
    const auto it = live_.find(ptr);
    if (it == live_.end()) {
      ++bad_frees;
      return;
    }
    used_ -= it->second;
    live_.erase(it);
    std::free(ptr);
  }
  void* pinned_alloc(std::size_t bytes) override { return std::malloc(bytes); }
  void pinned_free(void* ptr) noexcept override { std::free(ptr); }
  std::unique_ptr<runtime::StreamImpl> create_stream() override {
    auto stream = std::make_unique<FakeStream>(&records);
    streams_.push_back(stream->progress());
    return stream;
  }
  std::unique_ptr<runtime::EventImpl> create_event(bool) override {
    ++events_created;
    return std::make_unique<FakeEvent>();
  }
  /// Completes the work of every stream created here.
  void synchronize() override {
    ++synchronize_calls;
    for (auto& weak : streams_) {
      if (auto progress = weak.lock()) progress->completed = progress->submitted;
    }
  }
  std::vector<std::string> readiness() override { return {"fake: ok"}; }

  /// A stream created by this device, typed.
  std::unique_ptr<FakeStream> make_stream() {
    auto base = create_stream();
    return std::unique_ptr<FakeStream>(static_cast<FakeStream*>(base.release()));
  }
  std::size_t used() const { return used_; }
  std::size_t capacity() const { return capacity_; }

  int raw_alloc_calls = 0;
  int raw_free_calls = 0;
  int bad_frees = 0;
  int events_created = 0;
  int records = 0;
  int synchronize_calls = 0;
  Status fail_next_with = Status::ok;

 private:
  std::mutex mutex_;
  std::size_t capacity_;
  std::size_t used_ = 0;
  std::map<void*, std::size_t> live_;
  std::vector<std::weak_ptr<Progress>> streams_;
};

}  // namespace galley::memory::testing
