// Launch tracing for the profile layer: each traced launch records a host span and, around the
// launched work, a pair of events that become its device span once they complete.
//
// Device times come from the backend's events: GPU events on cuda and hip, the worker's clock on
// cpu (a cpu event is stamped by the stream's worker when it reaches it). Where a device activity
// source times the device's launches itself (CUPTI on cuda, unless
// GALLEY_PROFILE_DEVICE_TIMES=events), no events are recorded: the launch keeps its flow id and the
// source records the device span from the kernels it attributed to that flow. Events
// give times relative to each other, so each stream has an anchor event whose host time is known
// (recorded and waited for once, at the stream's first traced launch); a span's start is the
// anchor's host time plus its start event's distance from the anchor. The anchor moves forward
// every second of device time, as event timing is single precision milliseconds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "galley/runtime/stream.hpp"
#include "profile/tracer.hpp"

namespace galley::runtime::detail {

/// Around one launch while profiling is on: the constructor records the start event, finish()
/// the end event and the host span (a launch that threw records nothing).
class LaunchTrace {
 public:
  LaunchTrace(Stream& stream, std::string_view op, std::size_t bytes);
  ~LaunchTrace();
  LaunchTrace(const LaunchTrace&) = delete;
  LaunchTrace& operator=(const LaunchTrace&) = delete;
  void finish();
  /// The host span being built, with its flow id already chosen: the current launch
  /// (profile::LaunchScope) while the enqueue runs, so activity sources can attribute to it.
  const profile::Record& record() const { return host_; }

 private:
  Stream& stream_;
  profile::Record host_;
  std::uint64_t slot_ = 0;  // the pending device span; 0 while capturing (no device timing)
  bool source_timed_ = false;  // an activity source records the device span (no events)
};

/// Turns completed device spans of `stream_id` into records; with `wait`, waits for them all first
/// (a stream being synchronised or destroyed).
void resolve_launch_traces(std::uint64_t stream_id, bool wait) noexcept;
/// Resolves and forgets a destroyed stream's traces. Cheap when no launch was ever traced.
void end_launch_traces(std::uint64_t stream_id) noexcept;
/// Before the first stream: starts a GALLEY_PROFILE session and installs the tracer's flush hook.
void start_tracing_once();

}  // namespace galley::runtime::detail
