#include "memory_budget.hpp"

#include <limits>

#include "galley/core/error.hpp"
#include "galley/core/units.hpp"
#include "memory/caching_allocator.hpp"

namespace galley::cli {
namespace {

struct Available {
  std::size_t bytes = 0;
  std::size_t total = 0;
};

// Free memory plus the bytes the process's caching allocator holds but does not use: it releases
// them and retries before it reports out of memory.
Available available_on(const runtime::Device& device) {
  const runtime::MemoryInfo info = device.memory_info();
  const auto stats = memory::allocator_for(device).stats();
  const std::int64_t cached = stats.reserved_bytes.all.current - stats.allocated_bytes.all.current;
  return {info.free + static_cast<std::size_t>(cached > 0 ? cached : 0), info.total};
}

std::size_t saturating_add(std::size_t a, std::size_t b) {
  std::size_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? std::numeric_limits<std::size_t>::max() : sum;
}

std::string bytes_text(std::size_t bytes) {
  return format_bytes(bytes) + " (" + std::to_string(bytes) + " bytes)";
}

template <typename Entries>
void check_entries(const Entries& entries, const runtime::Device& device, const std::string& what,
                   const char* kind) {
  if (entries.empty()) return;
  const Available available = available_on(device);
  if (available.total == 0) return;  // the device does not say
  std::size_t needed = 0;
  for (const auto& e : entries) needed = saturating_add(needed, e.bytes);
  if (needed <= available.bytes) return;
  std::string list;
  for (const auto& e : entries) list += (list.empty() ? "" : ", ") + e.name + " " + bytes_text(e.bytes);
  throw Error(Status::out_of_memory, what + " needs " + format_bytes(needed) + " of " + kind + " memory on " +
                                         device.name() + " (" + list + "), more than the " +
                                         format_bytes(available.bytes) + " available of " +
                                         format_bytes(available.total) + " total");
}

}  // namespace

MemoryBudget& MemoryBudget::device(std::string name, std::size_t bytes) {
  device_entries_.push_back({std::move(name), bytes});
  return *this;
}

MemoryBudget& MemoryBudget::host(std::string name, std::size_t bytes) {
  host_entries_.push_back({std::move(name), bytes});
  return *this;
}

MemoryBudget& MemoryBudget::conv_tensors(const dnn::ConvProblem& problem) {
  problem.validate();
  device("x (input)", problem.x_desc().bytes());
  device("w (weights)", problem.w_desc().bytes());
  device("y (output)", problem.y_desc().bytes());
  return *this;
}

void MemoryBudget::check(const std::string& what) const {
  if (device_.is_cpu()) {
    // Host and device buffers share the machine's memory.
    std::vector<Entry> all = device_entries_;
    all.insert(all.end(), host_entries_.begin(), host_entries_.end());
    check_entries(all, device_, what, "host");
    return;
  }
  check_entries(device_entries_, device_, what, "device");
  check_entries(host_entries_, runtime::device("cpu"), what, "host");
}

}  // namespace galley::cli
