// Every GPU pooling solver (gpu.pool.*, cuda.pool.cudnn) against the cpu reference over odd shapes,
// every window kind, mode, dtype, layout and direction; kept indices against recomputed ones;
// NaN and -inf through max; refusals with reasons. Skips without a device of the backend.
#include "galley/dnn/pool.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "dnn/op_verify.hpp"
#include "dnn/tensor_data.hpp"
#include "gpu_test_util.hpp"

namespace galley::dnn {
namespace {

struct PoolSize {
  std::int64_t n, c, h, w;
};

// Every window with every mode (kept indices with max only), dtype, layout and direction, the sizes
// taken in turn.
std::vector<PoolProblem> every_combination(const std::vector<PoolProblem>& windows,
                                           const std::vector<PoolSize>& sizes) {
  std::vector<PoolProblem> out;
  std::size_t pick = 0;
  for (const PoolProblem& win : windows) {
    for (PoolMode mode : {PoolMode::max, PoolMode::avg_include_pad, PoolMode::avg_exclude_pad}) {
      for (bool keep : {false, true}) {
        if (keep && mode != PoolMode::max) continue;
        for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
          for (Layout layout : {Layout::nchw, Layout::nhwc}) {
            for (PoolDirection dir : {PoolDirection::forward, PoolDirection::backward}) {
              PoolProblem p = win;
              p.mode = mode, p.keep_indices = keep, p.dtype = dtype, p.layout = layout, p.direction = dir;
              const PoolSize& size = sizes[pick++ % sizes.size()];
              p.n = size.n, p.c = size.c, p.h = size.h, p.w = size.w;
              out.push_back(p);
            }
          }
        }
      }
    }
  }
  return out;
}

std::vector<PoolProblem> grid() {
  const std::vector<PoolProblem> windows = {
      {.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1},
      {.kernel_h = 2, .kernel_w = 2},
      {.kernel_h = 2, .kernel_w = 2, .ceil_mode = true},
      {.kernel_h = 3, .kernel_w = 2, .pad_h = 1, .stride_h = 1, .stride_w = 3, .ceil_mode = true},
      {.window = PoolWindow::global},
      {.window = PoolWindow::adaptive, .adaptive_h = 7, .adaptive_w = 5},
      {.window = PoolWindow::adaptive, .adaptive_h = 31, .adaptive_w = 1},
      {.window = PoolWindow::adaptive, .adaptive_h = 40, .adaptive_w = 33},
  };
  // Channels 32 and 64 take the nhwc kernels' 8-channel path; 3, 17, 23 the scalar one.
  const std::vector<PoolSize> sizes = {
      {1, 3, 31, 29}, {2, 17, 31, 29}, {1, 23, 31, 29}, {2, 32, 31, 29}, {1, 64, 62, 62}};
  return every_combination(windows, sizes);
}

class PoolGpu : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why;
    device_ = galley::testing::first_device(GetParam(), why);
    if (!device_) GTEST_SKIP() << why;
  }
  std::optional<runtime::Device> device_;
};

TEST_P(PoolGpu, EverySolverMatchesTheReference) {
  std::map<std::string, int> ran;
  const std::vector<PoolProblem> problems = grid();
  for (const PoolProblem& p : problems) {
    for (const PoolSolver* s : solvers_for<PoolProblem>(GetParam())) {
      if (!s->check(p, *device_)) continue;
      const OpVerification v = check_against_reference(*device_, ProblemRef::of(p), *s);
      EXPECT_TRUE(v.passed) << s->name() << " " << p.key() << ": " << v.summary;
      ++ran[std::string(s->name())];
    }
  }
  EXPECT_EQ(ran["gpu.pool.direct"], static_cast<int>(problems.size()));      // it claims everything
  EXPECT_EQ(ran["gpu.pool.global"], static_cast<int>(problems.size() / 8));  // the global window's share
  if (GetParam() == "cuda") EXPECT_GT(ran["cuda.pool.cudnn"], 50);
}

TEST_P(PoolGpu, KeptIndicesGiveTheSameGradientAsRecomputing) {
  runtime::Stream stream(*device_);
  for (Layout layout : {Layout::nchw, Layout::nhwc}) {
    for (PoolWindow window : {PoolWindow::kernel, PoolWindow::global}) {
      PoolProblem p{.window = window,
                    .n = 2,
                    .c = 32,
                    .h = 31,
                    .w = 29,
                    .keep_indices = true,
                    .dtype = DType::bf16,
                    .layout = layout};
      if (window == PoolWindow::kernel) p.kernel_h = 3, p.kernel_w = 3, p.pad_h = 1, p.pad_w = 1;
      const auto x_host = random_tensor(p.dtype, p.src_desc().elements(), 11);
      const auto dy_host = random_tensor(p.dtype, p.dst_desc().elements(), 12);
      PoolProblem recompute = p;
      recompute.keep_indices = false;
      for (const PoolSolver* s : solvers_for<PoolProblem>(GetParam())) {
        if (!s->check(p, *device_) || !s->check(recompute, *device_)) continue;
        Tensor x = Tensor::empty(stream, p.src_desc()), y = Tensor::empty(stream, p.dst_desc());
        Tensor idx = Tensor::empty(stream, p.indices_desc()), dy = Tensor::empty(stream, p.dst_desc());
        Tensor dx_kept = Tensor::empty(stream, p.src_desc()), dx_found = Tensor::empty(stream, p.src_desc());
        x.copy_from_host(stream, x_host.data(), x_host.size());
        dy.copy_from_host(stream, dy_host.data(), dy_host.size());
        pooling_forward(stream, p, x, y, &idx, s);
        pooling_backward(stream, p, dy, dx_kept, nullptr, &idx, s);
        pooling_backward(stream, recompute, dy, dx_found, &x, nullptr, s);
        const auto kept = dx_kept.to_host<std::uint16_t>(stream);
        const auto found = dx_found.to_host<std::uint16_t>(stream);
        EXPECT_EQ(kept, found) << s->name() << " " << p.key();
      }
    }
  }
}

TEST_P(PoolGpu, NanPropagatesAndMinusInfinityKeepsTheFirstElement) {
  runtime::Stream stream(*device_);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (PoolWindow window : {PoolWindow::kernel, PoolWindow::global}) {
    PoolProblem p{.window = window, .n = 1, .c = 1, .h = 4, .w = 4, .keep_indices = true};
    std::vector<float> x(16, -inf);
    x[4] = nan;
    x[5] = nan;  // two NaNs in one window: the later one is the maximum, as PyTorch scans
    for (const PoolSolver* s : solvers_for<PoolProblem>(GetParam())) {
      if (!s->check(p, *device_)) continue;
      Tensor xt = Tensor::empty(stream, p.src_desc()), yt = Tensor::empty(stream, p.dst_desc());
      Tensor it = Tensor::empty(stream, p.indices_desc());
      xt.copy_from_host(stream, x.data(), x.size() * 4);
      pooling_forward(stream, p, xt, yt, &it, s);
      const auto y = yt.to_host<float>(stream);
      const auto idx = it.to_host<std::int32_t>(stream);
      EXPECT_TRUE(std::isnan(y[0])) << s->name();
      EXPECT_EQ(idx[0], 5) << s->name();
      if (window == PoolWindow::kernel) {
        EXPECT_EQ(y[1], -inf) << s->name();
        EXPECT_EQ(idx[1], 2) << s->name();  // (0, 2), the window's first element
        EXPECT_EQ(idx[2], 8) << s->name();
      }
    }
  }
}

// The unrolled paths against the reference: square 2x2 and 3x3 windows (unrolled forward) at
// strides and paddings that put taps off every edge, with ceil mode's partial last window; windows
// at most twice the stride (unrolled backward, one or two covering outputs per axis) and one over
// it (the generic backward); and the global backward broadcast with planes that are and are not a
// multiple of 8 (nchw 8 pixels per store) and channels that are and are not (nhwc 8 channels).
TEST_P(PoolGpu, UnrolledWindowsAndBroadcastsMatchTheReference) {
  const std::vector<PoolProblem> windows = {
      {.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1},
      {.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1, .ceil_mode = true},
      {.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1, .stride_h = 1, .stride_w = 1},
      {.kernel_h = 3, .kernel_w = 3, .stride_h = 3, .stride_w = 3, .ceil_mode = true},
      {.kernel_h = 2, .kernel_w = 2, .stride_h = 1, .stride_w = 1},
      {.kernel_h = 2, .kernel_w = 2, .pad_h = 1, .pad_w = 1, .ceil_mode = true},
      {.kernel_h = 3, .kernel_w = 2, .pad_h = 1, .stride_h = 2, .stride_w = 1},
      {.window = PoolWindow::global},
  };
  const std::vector<PoolSize> sizes = {
      {1, 8, 28, 28}, {3, 17, 31, 29}, {1, 24, 7, 9}, {2, 40, 8, 8}, {1, 3, 5, 6}};
  const std::vector<PoolProblem> problems = every_combination(windows, sizes);
  int ran = 0;
  for (const PoolProblem& p : problems) {
    for (const PoolSolver* s : solvers_for<PoolProblem>(GetParam())) {
      if (!s->check(p, *device_)) continue;
      const OpVerification v = check_against_reference(*device_, ProblemRef::of(p), *s);
      EXPECT_TRUE(v.passed) << s->name() << " " << p.key() << ": " << v.summary;
      ++ran;
    }
  }
  EXPECT_GE(ran, static_cast<int>(problems.size()));
}

// Every nhwc problem of `windows` x `sizes` in each mode (max alone also keeping indices), dtype and
// direction.
std::vector<PoolProblem> nhwc_cases(const std::vector<PoolProblem>& windows,
                                    const std::vector<PoolSize>& sizes) {
  std::vector<PoolProblem> out;
  for (const PoolProblem& win : windows)
    for (PoolMode mode : {PoolMode::max, PoolMode::avg_include_pad, PoolMode::avg_exclude_pad})
      for (bool keep : {false, true}) {
        if (keep && mode != PoolMode::max) continue;
        for (DType dtype : {DType::f32, DType::f16, DType::bf16})
          for (PoolDirection dir : {PoolDirection::forward, PoolDirection::backward})
            for (const PoolSize& size : sizes) {
              PoolProblem p = win;
              p.mode = mode, p.keep_indices = keep, p.dtype = dtype, p.layout = Layout::nhwc,
              p.direction = dir;
              p.n = size.n, p.c = size.c, p.h = size.h, p.w = size.w;
              out.push_back(p);
            }
      }
  return out;
}

// The nhwc 8-channel block paths against the reference: square 2x2 and 3x3 windows at strides 1
// and 2 (a 2 x 2 block of outputs per thread forward, also when finding the maxima as window tap
// numbers), stride-2 windows of at most 3 (a 2 x 2 block of inputs per thread backward, kept or
// found indices and both averages), and the global backward's runs of pixels. Odd planes leave
// partial blocks and runs at the bottom and right edges; 24 channels put three pixels' channel
// vectors in one warp.
TEST_P(PoolGpu, NhwcBlockPathsMatchTheReference) {
  const std::vector<PoolProblem> windows = {
      {.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1},
      {.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1, .ceil_mode = true},
      {.kernel_h = 3, .kernel_w = 3},
      {.kernel_h = 2, .kernel_w = 2},
      {.kernel_h = 2, .kernel_w = 2, .pad_h = 1, .pad_w = 1, .ceil_mode = true},
      {.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1, .stride_h = 1, .stride_w = 1},
      {.kernel_h = 2, .kernel_w = 2, .stride_h = 1, .stride_w = 1},
      {.kernel_h = 3, .kernel_w = 2, .pad_h = 1},
      {.window = PoolWindow::global},
  };
  const std::vector<PoolSize> sizes = {{2, 24, 31, 29}, {1, 40, 17, 33}, {3, 8, 5, 4}};
  int ran = 0;
  for (const PoolProblem& p : nhwc_cases(windows, sizes)) {
    for (const PoolSolver* s : solvers_for<PoolProblem>(GetParam())) {
      if (s->name().substr(0, 4) != "gpu." || !s->check(p, *device_)) continue;
      const OpVerification v = check_against_reference(*device_, ProblemRef::of(p), *s);
      EXPECT_TRUE(v.passed) << s->name() << " " << p.key() << ": " << v.summary;
      ++ran;
    }
  }
  EXPECT_GE(ran, static_cast<int>(windows.size()) * 4 * 3 * 2 * 3);
}

// gpu.pool.strips against the reference: every window it takes (2x2 and 3x3, stride 1 and 2 forward,
// stride 2 max backward from x or kept indices), with padding, ceil mode's partial last window and
// planes of prime sizes, so strips end in partial walks and edge rows and columns no window covers;
// 8 channels (one vector), 24 (a channel group of three vectors) and 64; a plane 130 wide (backward
// splits its output columns over three tiles). The outputs start as NaN (verify_op's poison), so an
// element a walker skips fails. Max forward must match bit for bit.
TEST_P(PoolGpu, StripWalkersMatchTheReference) {
  const PoolSolver* strips = find_solver_for<PoolProblem>(GetParam(), "gpu.pool.strips");
  ASSERT_NE(strips, nullptr);
  const std::vector<PoolProblem> windows = {
      {.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1},
      {.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1, .ceil_mode = true},
      {.kernel_h = 3, .kernel_w = 3},
      {.kernel_h = 3, .kernel_w = 3, .ceil_mode = true},
      {.kernel_h = 2, .kernel_w = 2},
      {.kernel_h = 2, .kernel_w = 2, .pad_h = 1, .pad_w = 1, .ceil_mode = true},
      {.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1, .stride_h = 1, .stride_w = 1},
      {.kernel_h = 2, .kernel_w = 2, .stride_h = 1, .stride_w = 1},
  };
  const std::vector<PoolSize> sizes = {
      {2, 24, 31, 29}, {1, 8, 13, 17}, {3, 64, 5, 7}, {1, 16, 9, 130}, {1, 8, 2, 3}};
  int ran = 0;
  for (const PoolProblem& p : nhwc_cases(windows, sizes)) {
    const bool backward = p.direction == PoolDirection::backward;
    const bool claims = (!backward || (p.mode == PoolMode::max && p.stride_h == 2));
    if (p.h + 2 * p.pad_h < p.kernel_h || p.w + 2 * p.pad_w < p.kernel_w) continue;
    EXPECT_EQ(static_cast<bool>(strips->check(p, *device_)), claims) << p.key();
    if (!claims) continue;
    const OpVerification v = check_against_reference(*device_, ProblemRef::of(p), *strips);
    EXPECT_TRUE(v.passed) << p.key() << ": " << v.summary;
    if (p.mode == PoolMode::max && !backward) EXPECT_EQ(v.max_rel_err, 0.0) << p.key() << ": " << v.summary;
    ++ran;
  }
  EXPECT_GE(ran, 8 * 4 * 3 * 5);
}

// Problems large enough that the walkers take strips of several rows (the strip length grows
// until the blocks fit on the device at once), in both walking directions, at the figures' shape
// family: 3x3 at stride 2, f16 and bf16, 256 channels.
TEST_P(PoolGpu, StripWalkersTakeLongStrips) {
  const PoolSolver* strips = find_solver_for<PoolProblem>(GetParam(), "gpu.pool.strips");
  ASSERT_NE(strips, nullptr);
  for (DType dtype : {DType::f16, DType::bf16}) {
    for (PoolMode mode : {PoolMode::max, PoolMode::avg_include_pad}) {
      for (PoolDirection dir : {PoolDirection::forward, PoolDirection::backward}) {
        for (bool keep : {false, true}) {
          if ((keep && mode != PoolMode::max) || (dir == PoolDirection::backward && mode != PoolMode::max))
            continue;
          PoolProblem p{.mode = mode,
                        .n = 8,
                        .c = 256,
                        .h = 57,
                        .w = 56,
                        .kernel_h = 3,
                        .kernel_w = 3,
                        .pad_h = 1,
                        .pad_w = 1,
                        .keep_indices = keep,
                        .dtype = dtype,
                        .layout = Layout::nhwc,
                        .direction = dir};
          ASSERT_TRUE(strips->check(p, *device_)) << p.key();
          const OpVerification v = check_against_reference(*device_, ProblemRef::of(p), *strips);
          EXPECT_TRUE(v.passed) << p.key() << ": " << v.summary;
          if (mode == PoolMode::max && dir == PoolDirection::forward)
            EXPECT_EQ(v.max_rel_err, 0.0) << p.key();
        }
      }
    }
  }
}

// What gpu.pool.strips refuses, each with a reason naming the value: nchw, channels not a multiple
// of 8, other windows and strides, average backward, adaptive windows. A NaN-poisoned output (what
// an unwritten element looks like) never passes the comparison the tests above rely on.
TEST_P(PoolGpu, StripWalkersRefuseWithAReason) {
  const PoolSolver* strips = find_solver_for<PoolProblem>(GetParam(), "gpu.pool.strips");
  ASSERT_NE(strips, nullptr);
  const PoolProblem base{.n = 1,
                         .c = 16,
                         .h = 16,
                         .w = 16,
                         .kernel_h = 3,
                         .kernel_w = 3,
                         .pad_h = 1,
                         .pad_w = 1,
                         .layout = Layout::nhwc};
  ASSERT_TRUE(strips->check(base, *device_));
  const auto refused = [&](PoolProblem p, const std::string& word) {
    const Applicability a = strips->check(p, *device_);
    EXPECT_FALSE(a) << p.key();
    EXPECT_NE(a.reason.find(word), std::string::npos) << p.key() << ": " << a.reason;
  };
  PoolProblem p = base;
  p.layout = Layout::nchw;
  refused(p, "nchw");
  p = base, p.c = 12;
  refused(p, "12");
  p = base, p.kernel_h = p.kernel_w = 5, p.pad_h = p.pad_w = 2;
  refused(p, "5x5");
  p = base, p.stride_h = p.stride_w = 3;
  refused(p, "3x3");
  p = base, p.kernel_w = 2;
  refused(p, "3x2");
  p = base, p.direction = PoolDirection::backward, p.stride_h = p.stride_w = 1;
  refused(p, "1x1");
  p = base, p.direction = PoolDirection::backward, p.mode = PoolMode::avg_include_pad;
  refused(p, "average");
  p = PoolProblem{.window = PoolWindow::adaptive,
                  .n = 1,
                  .c = 16,
                  .h = 16,
                  .w = 16,
                  .adaptive_h = 4,
                  .adaptive_w = 4,
                  .layout = Layout::nhwc};
  refused(p, "adaptive");
  EXPECT_FALSE(strips->check(base, runtime::device("cpu")));

  const std::vector<float> values(64, 1.5f);
  std::vector<std::uint16_t> ref(64), poisoned(64, 0xffff);
  from_float(DType::f16, values.data(), ref.data(), 64);
  const Comparison c = compare_outputs(DType::f16, poisoned.data(), ref.data(), 64, 1e-2);
  EXPECT_FALSE(c.passed);
  EXPECT_GT(c.nan_count, 0);
}

// The unrolled 3x3 window's special values: windows of only -inf keep their first in-input
// position (padding taps never take over), and the later of two NaNs wins where a window holds both.
TEST_P(PoolGpu, UnrolledWindowKeepsTheMaxRule) {
  runtime::Stream stream(*device_);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (Layout layout : {Layout::nchw, Layout::nhwc}) {
    PoolProblem p{.n = 1,
                  .c = 1,
                  .h = 5,
                  .w = 5,
                  .kernel_h = 3,
                  .kernel_w = 3,
                  .pad_h = 1,
                  .pad_w = 1,
                  .keep_indices = true,
                  .layout = layout};
    std::vector<float> x(25, -inf);
    x[12] = nan;  // (2, 2), in window (1, 1) only
    x[13] = nan;  // (2, 3), in windows (1, 1) and (1, 2)
    // Windows start at rows and columns 0, 1 and 3 once the padding is cut off.
    const int begin[3] = {0, 1, 3};
    for (const PoolSolver* s : solvers_for<PoolProblem>(GetParam())) {
      if (!s->check(p, *device_)) continue;
      Tensor xt = Tensor::empty(stream, p.src_desc()), yt = Tensor::empty(stream, p.dst_desc());
      Tensor it = Tensor::empty(stream, p.indices_desc());
      xt.copy_from_host(stream, x.data(), x.size() * 4);
      pooling_forward(stream, p, xt, yt, &it, s);
      const auto y = yt.to_host<float>(stream);
      const auto idx = it.to_host<std::int32_t>(stream);
      ASSERT_EQ(y.size(), 9u);
      for (int oh = 0; oh < 3; ++oh) {
        for (int ow = 0; ow < 3; ++ow) {
          const int o = oh * 3 + ow;
          if (oh == 1 && ow >= 1) {
            EXPECT_TRUE(std::isnan(y[o])) << s->name() << " window " << o;
            EXPECT_EQ(idx[o], 13) << s->name() << " window " << o;
          } else {
            EXPECT_EQ(y[o], -inf) << s->name() << " window " << o;
            EXPECT_EQ(idx[o], begin[oh] * 5 + begin[ow]) << s->name() << " window " << o;
          }
        }
      }
      // Backward finding the maxima itself (window tap numbers where it can) sends each gradient
      // where the kept indices do.
      PoolProblem recompute = p;
      recompute.keep_indices = false;
      recompute.direction = PoolDirection::backward;
      PoolProblem kept = p;
      kept.direction = PoolDirection::backward;
      if (!s->check(recompute, *device_) || !s->check(kept, *device_)) continue;
      const std::vector<float> dy_host = {1, 2, 3, 4, 5, 6, 7, 8, 9};
      Tensor dy = Tensor::empty(stream, p.dst_desc());
      Tensor dx_kept = Tensor::empty(stream, p.src_desc()), dx_found = Tensor::empty(stream, p.src_desc());
      dy.copy_from_host(stream, dy_host.data(), dy_host.size() * 4);
      pooling_backward(stream, kept, dy, dx_kept, nullptr, &it, s);
      pooling_backward(stream, recompute, dy, dx_found, &xt, nullptr, s);
      const auto want = dx_kept.to_host<float>(stream);
      const auto got = dx_found.to_host<float>(stream);
      EXPECT_EQ(got, want) << s->name();
      EXPECT_EQ(want[13], 5.0f + 6.0f) << s->name();  // windows (1, 1) and (1, 2) chose it
    }
  }
}

TEST_P(PoolGpu, SolversRefuseWithAReason) {
  const PoolProblem windowed{
      .n = 1, .c = 8, .h = 16, .w = 16, .kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1};
  const PoolSolver* global = find_solver_for<PoolProblem>(GetParam(), "gpu.pool.global");
  ASSERT_NE(global, nullptr);
  const Applicability a = global->check(windowed, *device_);
  EXPECT_FALSE(a);
  EXPECT_FALSE(a.reason.empty());
  const runtime::Device cpu = runtime::device("cpu");
  EXPECT_FALSE(global->check(windowed, cpu));
  if (GetParam() != "cuda") return;
  const PoolSolver* cudnn = find_solver_for<PoolProblem>("cuda", "cuda.pool.cudnn");
  ASSERT_NE(cudnn, nullptr);
  PoolProblem keep = windowed;
  keep.keep_indices = true;
  EXPECT_NE(cudnn->check(keep, *device_).reason.find("indices"), std::string::npos);
  PoolProblem ceil{.n = 1, .c = 8, .h = 15, .w = 15, .ceil_mode = true};
  EXPECT_NE(cudnn->check(ceil, *device_).reason.find("ceil"), std::string::npos);
  PoolProblem uneven{
      .window = PoolWindow::adaptive, .n = 1, .c = 8, .h = 15, .w = 15, .adaptive_h = 4, .adaptive_w = 4};
  EXPECT_FALSE(cudnn->check(uneven, *device_));
}

INSTANTIATE_TEST_SUITE_P(Backends, PoolGpu, ::testing::Values("cuda", "hip"));

}  // namespace
}  // namespace galley::dnn
