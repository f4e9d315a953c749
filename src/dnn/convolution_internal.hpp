// Internal to libgalley: lets the tuner time solvers through dnn::convolution_forward itself (the
// path users pay for, host work included) without GALLEY_LOG_CMD printing a line per timed call.
#pragma once

namespace galley::dnn::detail {

/// While alive, convolution_forward calls made by this thread print no GALLEY_LOG_CMD line.
class SuppressCmdLog {
 public:
  SuppressCmdLog();
  ~SuppressCmdLog();
  SuppressCmdLog(const SuppressCmdLog&) = delete;
  SuppressCmdLog& operator=(const SuppressCmdLog&) = delete;

 private:
  bool previous_;
};

}  // namespace galley::dnn::detail
