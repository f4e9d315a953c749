// Device activity sources: what a backend plugin registers so that the kernels vendor libraries
// launch (cuDNN, cuBLAS) appear in the trace under their own names, beneath the Galley launch that
// called them. The cuda plugin's is CUPTI (backends/cuda/cupti_trace.cpp).
//
// The tracer starts every registered source when tracing turns on (at registration when it is on
// already), flushes them before records are collected, and stops them when tracing turns off, so
// nothing of a source runs while tracing is off. A source hands what it saw to record() as
// Kind::kernel records; it attributes the vendor API calls it observes to current_launch(), the
// traced launch whose enqueue the calling thread is running. A source that cannot trace (no
// library, no permission) or that throws becomes a one-line note of the trace (notes()), never a
// failure of the traced program.
#pragma once

#include <string>
#include <string_view>

namespace galley::profile {

class ActivitySource {
 public:
  virtual ~ActivitySource() = default;
  /// Names the source in notes and on the trace's tracks ("CUPTI").
  virtual const char* name() const noexcept = 0;
  /// Tracing turned on: begin observing. Returns "" when observing, or when there is nothing to
  /// observe (no device); otherwise why it cannot, which becomes the note "<name> unavailable: <why>"
  /// (as does an exception).
  virtual std::string start() = 0;
  /// Records every activity completed so far. Called only between a successful start() and stop().
  virtual void flush() = 0;
  /// Tracing turned off: records what completed, then stops observing.
  virtual void stop() = 0;
  /// Whether, while running, the source records the device span (Kind::device) of every traced
  /// launch on `device` itself, from the activities it attributed to the launch's flow: the first
  /// one's start to the last one's end. The runtime then records no event pair around those
  /// launches. Asked at each traced launch while the source runs (keep it cheap); false (the
  /// default): events time the launches.
  virtual bool times_launches(std::string_view device) const noexcept {
    (void)device;
    return false;
  }
};

/// Registers `source` for the life of the process (a plugin that registered one is never
/// unloaded) and starts it at once when tracing is on. Start, flush and stop of all sources are
/// serialised, so a source needs no lock of its own for them.
void register_activity_source(ActivitySource& source) noexcept;

/// Whether a running source times the traced launches on `device` (ActivitySource::times_launches),
/// so the runtime records no events around them. One relaxed load while no source does.
bool device_times_from_source(std::string_view device) noexcept;

/// Whether this trace keeps host spans only (GALLEY_PROFILE_DEVICE_TIMES=host, read when tracing
/// turns on): no device spans, no events around launches and no activity source started, for the
/// lowest cost when only the host's side is wanted.
bool host_spans_only() noexcept;

namespace detail {
/// Brings every source to the tracer's current state (set_enabled calls it).
void sync_activity_sources() noexcept;
/// Flushes every running source (flush() calls it).
void flush_activity_sources() noexcept;
}  // namespace detail

}  // namespace galley::profile
