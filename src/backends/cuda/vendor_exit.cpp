#include "backends/cuda/vendor_exit.hpp"

#include <cstdlib>
#include <mutex>
#include <vector>

namespace galley::backends::cuda {
namespace {

struct Releases {
  std::mutex mutex;
  std::vector<std::function<void()>> pending;
  bool registered = false;
};

// Never destroyed: the exit handler may run after this file's static destructors would.
Releases& releases() {
  static Releases* r = new Releases();
  return *r;
}

void run_releases() {
  Releases& r = releases();
  std::vector<std::function<void()>> pending;
  {
    std::lock_guard lock(r.mutex);
    pending.swap(r.pending);
  }
  for (auto it = pending.rbegin(); it != pending.rend(); ++it) (*it)();
}

}  // namespace

void release_at_exit(std::function<void()> release) {
  Releases& r = releases();
  std::lock_guard lock(r.mutex);
  r.pending.push_back(std::move(release));
  if (!r.registered) {
    r.registered = true;
    std::atexit(run_releases);
  }
}

}  // namespace galley::backends::cuda
