// Pooling: the problem's key, validation and output sizes (PyTorch's formulas), the reference on
// hand-computed cases and against central finite differences, every cpu solver against the
// reference over odd shapes, kept indices against recomputed ones, extreme values, and the Tensor
// entry points' refusals.
#include "galley/dnn/pool.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "dnn/op_verify.hpp"
#include "dnn/pool_geometry.hpp"
#include "dnn/ref_pool.hpp"
#include "dnn/tensor_data.hpp"
#include "galley/core/error.hpp"
#include "galley/runtime/device.hpp"
#include "galley/tensor.hpp"

namespace galley::dnn {
namespace {

PoolProblem stem() {
  return {.n = 2, .c = 3, .h = 7, .w = 6, .kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1};
}

std::string error_of(const PoolProblem& p) {
  try {
    p.validate();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument);
    return e.what();
  }
  return {};
}

TEST(PoolProblem, KeyRoundTripsForEveryWindowModeAndFlag) {
  std::vector<PoolProblem> problems;
  PoolProblem a = stem();
  problems.push_back(a);
  a.ceil_mode = true, a.stride_h = 3, a.dtype = DType::bf16, a.layout = Layout::nhwc;
  a.direction = PoolDirection::backward;
  problems.push_back(a);
  a.keep_indices = true;
  problems.push_back(a);
  problems.push_back(
      {.mode = PoolMode::avg_exclude_pad, .window = PoolWindow::global, .n = 4, .c = 5, .h = 7, .w = 7});
  problems.push_back({.mode = PoolMode::avg_include_pad,
                      .window = PoolWindow::adaptive,
                      .n = 1,
                      .c = 2,
                      .h = 10,
                      .w = 9,
                      .adaptive_h = 3,
                      .adaptive_w = 4,
                      .dtype = DType::f16});
  for (const PoolProblem& p : problems) {
    const std::string key = p.key();
    EXPECT_EQ(PoolProblem::parse_key(key), p) << key;
    EXPECT_EQ(PoolProblem::parse_key(key).key(), key);
    EXPECT_EQ(PoolProblem::parse_key(key).hash(), p.hash());
    EXPECT_EQ(parse_problem_key(key).ref().key(), key);
  }
  EXPECT_EQ(stem().key(), "pool-F-f32-nchw-max-kernel-n2-c3-h7-w6-y3-x3-p1-q1-u2-v2-ceil0-ah0-aw0-idx0");
}

TEST(PoolProblem, MalformedKeysAreRefused) {
  const std::string good = stem().key();
  for (const std::string& bad :
       {std::string("conv") + good.substr(4), good + "-x", good.substr(0, good.size() - 5),
        std::string("pool-X") + good.substr(6), std::string(good).replace(good.find("-y3"), 3, "-y03"),
        std::string(good).replace(good.find("ceil0"), 5, "ceil2"),
        std::string(good).replace(good.find("max"), 3, "min")}) {
    EXPECT_THROW(PoolProblem::parse_key(bad), Error) << bad;
  }
  // A key naming an invalid problem (padding over half the kernel) is refused too.
  EXPECT_THROW(PoolProblem::parse_key(std::string(good).replace(good.find("-p1"), 3, "-p2")), Error);
}

TEST(PoolProblem, ValidationNamesTheBadField) {
  PoolProblem p = stem();
  p.kernel_h = 10;
  p.pad_h = 1;
  EXPECT_NE(error_of(p).find("kernel_h (-y)"), std::string::npos) << error_of(p);
  p = stem(), p.kernel_w = 9, p.pad_w = 1;
  EXPECT_NE(error_of(p).find("kernel_w (-x)"), std::string::npos) << error_of(p);
  p = stem(), p.pad_h = 2;
  EXPECT_NE(error_of(p).find("pad_h (-p)"), std::string::npos) << error_of(p);
  p = stem(), p.pad_w = -1;
  EXPECT_NE(error_of(p).find("pad_w (-q)"), std::string::npos) << error_of(p);
  p = stem(), p.stride_w = 0;
  EXPECT_NE(error_of(p).find("stride_w (-v)"), std::string::npos) << error_of(p);
  p = stem(), p.c = 0;
  EXPECT_NE(error_of(p).find("c (channels"), std::string::npos) << error_of(p);
  p = stem(), p.mode = PoolMode::avg_include_pad, p.keep_indices = true;
  EXPECT_NE(error_of(p).find("keep_indices"), std::string::npos) << error_of(p);
  p = stem(), p.dtype = DType::i32;
  EXPECT_NE(error_of(p).find("dtype"), std::string::npos) << error_of(p);
  p = {.window = PoolWindow::global, .n = 1, .c = 1, .h = 4, .w = 4, .kernel_h = 3};
  EXPECT_NE(error_of(p).find("kernel_h (-y)"), std::string::npos) << error_of(p);
  p = {.window = PoolWindow::global, .n = 1, .c = 1, .h = 4, .w = 4, .ceil_mode = true};
  EXPECT_NE(error_of(p).find("ceil_mode"), std::string::npos) << error_of(p);
  p = {.window = PoolWindow::adaptive, .n = 1, .c = 1, .h = 4, .w = 4, .adaptive_h = 0, .adaptive_w = 2};
  EXPECT_NE(error_of(p).find("adaptive_h"), std::string::npos) << error_of(p);
  p = stem(), p.adaptive_w = 3;
  EXPECT_NE(error_of(p).find("adaptive"), std::string::npos) << error_of(p);
  p = {.n = 1, .c = 1, .h = 50000, .w = 50000};
  EXPECT_NE(error_of(p).find("i32"), std::string::npos) << error_of(p);
  p.mode = PoolMode::avg_include_pad;
  EXPECT_EQ(error_of(p), "");  // average pooling keeps no indices, so a huge plane is fine
}

TEST(PoolProblem, OutputSizesFollowPyTorch) {
  // floor((in + 2p - k) / s) + 1, or ceil, less a last window that would start in the right padding.
  struct Case {
    std::int64_t in, k, s, p;
    bool ceil;
    std::int64_t out;
  } cases[] = {{5, 2, 2, 0, false, 2}, {5, 2, 2, 0, true, 3},  {5, 2, 2, 1, false, 3},
               {5, 2, 2, 1, true, 3},  {6, 3, 2, 1, true, 4},  {112, 3, 2, 1, false, 56},
               {7, 7, 1, 0, true, 1},  {31, 3, 3, 1, true, 11}};
  for (const Case& c : cases) {
    const PoolProblem p{.h = c.in,
                        .w = 8,
                        .kernel_h = c.k,
                        .kernel_w = 2,
                        .pad_h = c.p,
                        .stride_h = c.s,
                        .ceil_mode = c.ceil};
    EXPECT_EQ(p.out_h(), c.out) << p.key();
  }
  // Adaptive windows: start floor(i*H/OH), end ceil((i+1)*H/OH).
  const PoolProblem a{.window = PoolWindow::adaptive, .h = 5, .w = 5, .adaptive_h = 3, .adaptive_w = 1};
  const PoolAxis ax = pool_axis_h(a);
  EXPECT_EQ(ax.span(0).begin, 0);
  EXPECT_EQ(ax.span(0).end, 2);
  EXPECT_EQ(ax.span(1).begin, 1);
  EXPECT_EQ(ax.span(1).end, 4);
  EXPECT_EQ(ax.span(2).begin, 3);
  EXPECT_EQ(ax.span(2).end, 5);
}

TEST(PoolProblem, CoveringOutputsAreExactlyThoseWhoseWindowsHoldTheInput) {
  const PoolProblem problems[] = {
      {.h = 31, .w = 4, .kernel_h = 3, .pad_h = 1, .stride_h = 2, .ceil_mode = true},
      {.h = 17, .w = 4, .kernel_h = 5, .pad_h = 2, .stride_h = 1},
      {.h = 13, .w = 4, .kernel_h = 2, .stride_h = 4},
      {.window = PoolWindow::adaptive, .h = 13, .w = 4, .adaptive_h = 5, .adaptive_w = 1},
      {.window = PoolWindow::adaptive, .h = 4, .w = 4, .adaptive_h = 9, .adaptive_w = 1},
  };
  for (const PoolProblem& p : problems) {
    const PoolAxis ax = pool_axis_h(p);
    for (std::int64_t i = 0; i < p.h; ++i) {
      std::int64_t first = 0, last = -1;
      ax.covering(i, first, last);
      for (std::int64_t o = 0; o < p.out_h(); ++o) {
        const PoolAxis::Span s = ax.span(o);
        EXPECT_EQ(s.begin <= i && i < s.end, first <= o && o <= last) << p.key() << " i " << i << " o " << o;
      }
    }
  }
}

// Runs the reference on float data; returns dst (forward) or diff_src (backward).
std::vector<float> run_ref(const PoolProblem& p, const std::vector<float>& in,
                           std::vector<std::int32_t>* idx = nullptr,
                           const std::vector<float>* src = nullptr) {
  const PoolProblem q = [&] {
    PoolProblem r = p;
    r.dtype = DType::f32;
    return r;
  }();
  PoolArgs a;
  std::vector<float> out;
  if (q.direction == PoolDirection::forward) {
    out.resize(static_cast<std::size_t>(q.dst_desc().elements()));
    if (idx != nullptr) idx->resize(out.size());
    a.src = in.data(), a.dst = out.data(), a.indices = idx != nullptr ? idx->data() : nullptr;
  } else {
    out.resize(static_cast<std::size_t>(q.src_desc().elements()));
    a.diff_dst = in.data(), a.diff_src = out.data();
    a.indices = idx != nullptr ? idx->data() : nullptr;
    a.src = src != nullptr ? src->data() : nullptr;
  }
  reference_pool(q, a);
  return out;
}

TEST(RefPool, HandComputedMaxAndIndices) {
  // 1x1x4x4 = 0..15 with a tie and a NaN; 2x2 windows at stride 2.
  std::vector<float> x(16);
  std::iota(x.begin(), x.end(), 0.0f);
  x[0] = 5, x[1] = 5, x[4] = 5, x[5] = 5;  // all equal: the first wins
  x[10] = std::numeric_limits<float>::quiet_NaN();
  x[14] = -std::numeric_limits<float>::infinity();
  const PoolProblem p{.h = 4, .w = 4, .keep_indices = true};
  std::vector<std::int32_t> idx;
  const std::vector<float> y = run_ref(p, x, &idx);
  EXPECT_EQ(y[0], 5);
  EXPECT_EQ(idx[0], 0);
  EXPECT_EQ(y[1], 7);
  EXPECT_EQ(idx[1], 7);
  EXPECT_EQ(y[2], 13);
  EXPECT_EQ(idx[2], 13);
  EXPECT_TRUE(std::isnan(y[3]));
  EXPECT_EQ(idx[3], 10);
  // A window of -inf only: -inf at the window's first element.
  std::vector<float> ninf(16, -std::numeric_limits<float>::infinity());
  const std::vector<float> yn = run_ref(p, ninf, &idx);
  EXPECT_EQ(yn[3], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(idx[3], 10);
}

TEST(RefPool, HandComputedAveragesWithAndWithoutPadding) {
  std::vector<float> x(16);
  std::iota(x.begin(), x.end(), 1.0f);  // 1..16
  PoolProblem p{.mode = PoolMode::avg_include_pad,
                .h = 4,
                .w = 4,
                .kernel_h = 3,
                .kernel_w = 3,
                .pad_h = 1,
                .pad_w = 1,
                .stride_h = 1,
                .stride_w = 1};
  const std::vector<float> inc = run_ref(p, x);
  EXPECT_FLOAT_EQ(inc[0], (1 + 2 + 5 + 6) / 9.0f);
  EXPECT_FLOAT_EQ(inc[5], (1 + 2 + 3 + 5 + 6 + 7 + 9 + 10 + 11) / 9.0f);
  p.mode = PoolMode::avg_exclude_pad;
  const std::vector<float> exc = run_ref(p, x);
  EXPECT_FLOAT_EQ(exc[0], (1 + 2 + 5 + 6) / 4.0f);
  EXPECT_FLOAT_EQ(exc[1], (1 + 2 + 3 + 5 + 6 + 7) / 6.0f);
  // Ceil mode: the last window covers [4, 6) of a 5-wide input with pad 0: PyTorch counts only
  // up to in + pad, so include-pad divides by 1 here, not by 2.
  const PoolProblem c{.mode = PoolMode::avg_include_pad,
                      .h = 1,
                      .w = 5,
                      .kernel_h = 1,
                      .kernel_w = 2,
                      .stride_h = 1,
                      .stride_w = 2,
                      .ceil_mode = true};
  const std::vector<float> row{1, 2, 3, 4, 10};
  const std::vector<float> yc = run_ref(c, row);
  ASSERT_EQ(yc.size(), 3u);
  EXPECT_FLOAT_EQ(yc[2], 10.0f);
  // Adaptive 5 -> 3: windows [0,2), [1,4), [3,5).
  const PoolProblem a{.mode = PoolMode::avg_exclude_pad,
                      .window = PoolWindow::adaptive,
                      .h = 1,
                      .w = 5,
                      .adaptive_h = 1,
                      .adaptive_w = 3};
  const std::vector<float> ya = run_ref(a, row);
  EXPECT_FLOAT_EQ(ya[0], 1.5f);
  EXPECT_FLOAT_EQ(ya[1], 3.0f);
  EXPECT_FLOAT_EQ(ya[2], 7.0f);
}

// L(x) = sum_o dy_o * y_o(x) in double; its gradient is what backward must return.
double loss(const PoolProblem& fwd, const std::vector<float>& x, const std::vector<float>& dy) {
  const std::vector<float> y = run_ref(fwd, x);
  double l = 0;
  for (std::size_t i = 0; i < y.size(); ++i) l += static_cast<double>(dy[i]) * y[i];
  return l;
}

TEST(RefPool, BackwardMatchesCentralFiniteDifferences) {
  std::vector<PoolProblem> problems;
  for (PoolMode mode : {PoolMode::max, PoolMode::avg_include_pad, PoolMode::avg_exclude_pad}) {
    for (Layout layout : {Layout::nchw, Layout::nhwc}) {
      problems.push_back({.mode = mode,
                          .n = 1,
                          .c = 2,
                          .h = 5,
                          .w = 6,
                          .kernel_h = 3,
                          .kernel_w = 3,
                          .pad_h = 1,
                          .pad_w = 1,
                          .ceil_mode = true,
                          .layout = layout});
      problems.push_back({.mode = mode,
                          .n = 2,
                          .c = 1,
                          .h = 5,
                          .w = 4,
                          .kernel_h = 2,
                          .kernel_w = 3,
                          .pad_h = 1,
                          .pad_w = 0,
                          .stride_h = 1,
                          .stride_w = 2,
                          .layout = layout});
      problems.push_back({.mode = mode,
                          .window = PoolWindow::adaptive,
                          .n = 1,
                          .c = 2,
                          .h = 5,
                          .w = 7,
                          .adaptive_h = 3,
                          .adaptive_w = 4,
                          .layout = layout});
      problems.push_back(
          {.mode = mode, .window = PoolWindow::global, .n = 1, .c = 3, .h = 3, .w = 4, .layout = layout});
    }
  }
  for (const PoolProblem& fwd : problems) {
    const std::int64_t nx = fwd.src_desc().elements(), ny = fwd.dst_desc().elements();
    // Distinct inputs 0.1 apart (a shuffled ramp), so no max window is near a tie.
    std::vector<float> x(static_cast<std::size_t>(nx));
    for (std::int64_t i = 0; i < nx; ++i) x[i] = 0.1f * static_cast<float>((i * 37) % nx) - 1.0f;
    std::vector<float> dy(static_cast<std::size_t>(ny));
    for (std::int64_t i = 0; i < ny; ++i) dy[i] = 0.25f * static_cast<float>(i % 7) - 0.6f;
    PoolProblem bwd = fwd;
    bwd.direction = PoolDirection::backward;
    const std::vector<float> dx = run_ref(bwd, dy, nullptr, &x);
    double largest = 0;
    for (float v : dx) largest = std::max(largest, std::fabs(static_cast<double>(v)));
    EXPECT_GT(largest, 0.05) << fwd.key();  // a zero gradient would match a flat loss trivially
    const float eps = 0.02f;
    for (std::int64_t i = 0; i < nx; ++i) {
      std::vector<float> xp = x, xm = x;
      xp[i] += eps, xm[i] -= eps;
      const double fd = (loss(fwd, xp, dy) - loss(fwd, xm, dy)) / (2.0 * static_cast<double>(eps));
      EXPECT_NEAR(dx[i], fd, 1e-3) << fwd.key() << " element " << i;
    }
  }
}

// The odd shapes of the conformance grid: every window kind, mode, dtype, layout and direction.
std::vector<PoolProblem> conformance_problems() {
  std::vector<PoolProblem> windows = {
      {.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1},
      {.kernel_h = 2, .kernel_w = 2, .ceil_mode = true},
      {.kernel_h = 3, .kernel_w = 2, .pad_h = 1, .stride_h = 1, .stride_w = 3, .ceil_mode = true},
      {.window = PoolWindow::global, .kernel_h = 2, .kernel_w = 2},
      {.window = PoolWindow::adaptive, .adaptive_h = 7, .adaptive_w = 5},
      {.window = PoolWindow::adaptive, .adaptive_h = 40, .adaptive_w = 33},
  };
  const struct { std::int64_t n, c; } sizes[] = {{1, 3}, {2, 17}, {1, 23}};
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
              p.n = sizes[pick % 3].n, p.c = sizes[pick % 3].c, p.h = 31, p.w = 29;
              ++pick;
              out.push_back(p);
            }
          }
        }
      }
    }
  }
  return out;
}

TEST(CpuPoolSolvers, EveryCpuSolverMatchesTheReference) {
  const runtime::Device cpu = runtime::device("cpu");
  int checked = 0;
  for (const PoolProblem& p : conformance_problems()) {
    for (const Solver<PoolProblem>* s : solvers_for<PoolProblem>("cpu")) {
      if (s->is_reference() || !s->check(p, cpu)) continue;
      const OpVerification v = check_against_reference(cpu, ProblemRef::of(p), *s);
      EXPECT_TRUE(v.passed) << s->name() << " " << p.key() << ": " << v.summary;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 288);  // one fast solver over the whole grid
}

// Max backward from kept indices (written by a forward) equals max backward that finds the
// maxima again, for every cpu solver; both equal the reference.
TEST(CpuPoolSolvers, KeptIndicesGiveTheSameGradientAsRecomputing) {
  const runtime::Device cpu = runtime::device("cpu");
  runtime::Stream stream(cpu);
  for (Layout layout : {Layout::nchw, Layout::nhwc}) {
    for (DType dtype : {DType::f32, DType::bf16}) {
      PoolProblem p{.n = 2,
                    .c = 17,
                    .h = 31,
                    .w = 29,
                    .kernel_h = 3,
                    .kernel_w = 3,
                    .pad_h = 1,
                    .pad_w = 1,
                    .keep_indices = true,
                    .dtype = dtype,
                    .layout = layout};
      const auto x_host = random_tensor(dtype, p.src_desc().elements(), 7);
      const auto dy_host = random_tensor(dtype, p.dst_desc().elements(), 8);
      for (const PoolSolver* s : solvers_for<PoolProblem>("cpu")) {
        Tensor x = Tensor::empty(stream, p.src_desc()), y = Tensor::empty(stream, p.dst_desc());
        Tensor idx = Tensor::empty(stream, p.indices_desc()), dy = Tensor::empty(stream, p.dst_desc());
        Tensor dx_kept = Tensor::empty(stream, p.src_desc()), dx_found = Tensor::empty(stream, p.src_desc());
        x.copy_from_host(stream, x_host.data(), x_host.size());
        dy.copy_from_host(stream, dy_host.data(), dy_host.size());
        pooling_forward(stream, p, x, y, &idx, s);
        pooling_backward(stream, p, dy, dx_kept, nullptr, &idx, s);
        PoolProblem recompute = p;
        recompute.keep_indices = false;
        pooling_backward(stream, recompute, dy, dx_found, &x, nullptr, s);
        std::vector<std::byte> kept(p.src_desc().bytes()), found(p.src_desc().bytes());
        dx_kept.copy_to_host(stream, kept.data(), kept.size());
        dx_found.copy_to_host(stream, found.data(), found.size());
        stream.synchronize();
        EXPECT_EQ(std::memcmp(kept.data(), found.data(), kept.size()), 0) << s->name() << " " << p.key();
      }
    }
  }
}

TEST(CpuPoolSolvers, ExtremeValues) {
  const runtime::Device cpu = runtime::device("cpu");
  runtime::Stream stream(cpu);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (Layout layout : {Layout::nchw, Layout::nhwc}) {
    for (const PoolSolver* s : solvers_for<PoolProblem>("cpu")) {
      // NaN propagates through max with its index; -inf windows keep their first element.
      PoolProblem p{.n = 1, .c = 2, .h = 4, .w = 4, .keep_indices = true, .layout = layout};
      std::vector<float> x(32, -inf);
      x[layout == Layout::nchw ? 5 : 10] = nan;  // channel 0, position (1, 1)
      Tensor xt = Tensor::empty(stream, p.src_desc()), yt = Tensor::empty(stream, p.dst_desc());
      Tensor it = Tensor::empty(stream, p.indices_desc());
      xt.copy_from_host(stream, x.data(), x.size() * 4);
      pooling_forward(stream, p, xt, yt, &it, s);
      const std::vector<float> y = yt.to_host<float>(stream);
      const std::vector<std::int32_t> idx = it.to_host<std::int32_t>(stream);
      const std::size_t first = 0, second_window = layout == Layout::nchw ? 1 : 2;
      EXPECT_TRUE(std::isnan(y[first])) << s->name();
      EXPECT_EQ(idx[first], 5) << s->name();
      EXPECT_EQ(y[second_window], -inf) << s->name();
      EXPECT_EQ(idx[second_window], 2) << s->name();
      // f16 averages of the largest finite value: the sum is kept in f32, so no overflow to inf.
      PoolProblem a{.mode = PoolMode::avg_include_pad,
                    .window = PoolWindow::global,
                    .n = 1,
                    .c = 3,
                    .h = 9,
                    .w = 9,
                    .dtype = DType::f16,
                    .layout = layout};
      std::vector<std::uint16_t> big(243, float_to_half(65504.0f));
      Tensor at = Tensor::empty(stream, a.src_desc()), bt = Tensor::empty(stream, a.dst_desc());
      at.copy_from_host(stream, big.data(), big.size() * 2);
      pooling_forward(stream, a, at, bt, nullptr, s);
      for (std::uint16_t v : bt.to_host<std::uint16_t>(stream))
        EXPECT_EQ(half_to_float(v), 65504.0f) << s->name();
    }
  }
}

// Ties, NaNs and -inf on every code path of the cpu solvers (whole-kernel blocks, window edges,
// wide rows of global and adaptive windows, both layouts): values and indices equal the reference's.
TEST(CpuPoolSolvers, MaxRuleHoldsOnEveryPath) {
  const runtime::Device cpu = runtime::device("cpu");
  runtime::Stream stream(cpu);
  const PoolSolver* ref = find_solver_for<PoolProblem>("cpu", kRefPoolName);
  ASSERT_NE(ref, nullptr);
  const std::vector<PoolProblem> windows = {
      {.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1},
      {.kernel_h = 2, .kernel_w = 2, .ceil_mode = true},
      {.window = PoolWindow::global},
      {.window = PoolWindow::adaptive, .adaptive_h = 3, .adaptive_w = 5},
  };
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (const PoolProblem& win : windows) {
    for (Layout layout : {Layout::nchw, Layout::nhwc}) {
      // No NaNs, rare ones and (where the last NaN of a wide window must win) many.
      for (std::size_t nan_rate : {0, 2, 60}) {
        PoolProblem p = win;
        p.n = 2, p.c = 3, p.h = 9, p.w = 41, p.keep_indices = true, p.layout = layout;
        std::vector<float> x(static_cast<std::size_t>(p.src_desc().elements()));
        for (std::size_t i = 0; i < x.size(); ++i) {
          // Ties everywhere (+0 and -0 among them), some -inf, and NaNs at nan_rate in 997, so that
          // tie-breaking is visible in wide windows too rather than hidden behind a NaN.
          const std::size_t r = (i * 2654435761u) % 997;
          x[i] = r < nan_rate ? nan : r < 150 ? -inf : r % 7 == 0 ? -0.0f : static_cast<float>(r % 3);
        }
        for (const PoolSolver* s : solvers_for<PoolProblem>("cpu")) {
          Tensor xt = Tensor::empty(stream, p.src_desc());
          xt.copy_from_host(stream, x.data(), x.size() * 4);
          Tensor y_ref = Tensor::empty(stream, p.dst_desc()), y = Tensor::empty(stream, p.dst_desc());
          Tensor i_ref = Tensor::empty(stream, p.indices_desc()), i = Tensor::empty(stream, p.indices_desc());
          pooling_forward(stream, p, xt, y_ref, &i_ref, ref);
          pooling_forward(stream, p, xt, y, &i, s);
          const auto want = y_ref.to_host<std::uint32_t>(stream), got = y.to_host<std::uint32_t>(stream);
          EXPECT_EQ(got, want) << s->name() << " " << p.key();
          EXPECT_EQ(i.to_host<std::int32_t>(stream), i_ref.to_host<std::int32_t>(stream))
              << s->name() << " " << p.key();
        }
      }
    }
  }
}

// Max values without indices (inference) take cpu.pool.direct's vector path for column strides 1
// and 2: ties of +0 and -0, -inf and NaN, windows clipped by padding and by ceil mode, rows of
// several vectors and a partial last one; the bits equal the reference's.
TEST(CpuPoolSolvers, MaxValuesAloneFollowTheRule) {
  const runtime::Device cpu = runtime::device("cpu");
  runtime::Stream stream(cpu);
  const PoolSolver* ref = find_solver_for<PoolProblem>("cpu", kRefPoolName);
  ASSERT_NE(ref, nullptr);
  const std::vector<PoolProblem> windows = {
      {.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1, .stride_h = 2, .stride_w = 2},  // ResNet's
      {.kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1, .stride_h = 1, .stride_w = 1},
      {.kernel_h = 2, .kernel_w = 2, .stride_h = 2, .stride_w = 2, .ceil_mode = true},
      {.kernel_h = 3, .kernel_w = 5, .pad_h = 1, .pad_w = 2, .stride_h = 2, .stride_w = 2, .ceil_mode = true},
      {.kernel_h = 2, .kernel_w = 3, .pad_h = 0, .pad_w = 1, .stride_h = 3, .stride_w = 1},
  };
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (const PoolProblem& win : windows) {
    for (const std::int64_t w : {41, 67, 7}) {
      for (bool with_nan : {false, true}) {
        PoolProblem p = win;
        p.n = 1, p.c = 3, p.h = 13, p.w = w;
        std::vector<float> x(static_cast<std::size_t>(p.src_desc().elements()));
        for (std::size_t i = 0; i < x.size(); ++i) {
          const std::size_t r = (i * 2654435761u) % 997;
          x[i] = with_nan && r < 3 ? nan : r < 150 ? -inf : r % 4 == 0 ? -0.0f : static_cast<float>(r % 3);
        }
        for (const PoolSolver* s : solvers_for<PoolProblem>("cpu")) {
          Tensor xt = Tensor::empty(stream, p.src_desc());
          xt.copy_from_host(stream, x.data(), x.size() * 4);
          Tensor y_ref = Tensor::empty(stream, p.dst_desc()), y = Tensor::empty(stream, p.dst_desc());
          pooling_forward(stream, p, xt, y_ref, nullptr, ref);
          pooling_forward(stream, p, xt, y, nullptr, s);
          EXPECT_EQ(y.to_host<std::uint32_t>(stream), y_ref.to_host<std::uint32_t>(stream))
              << s->name() << " " << p.key();
        }
      }
    }
  }
}

TEST(PoolEntryPoints, MismatchedOrUnusedTensorsAreNamed) {
  const runtime::Device cpu = runtime::device("cpu");
  runtime::Stream stream(cpu);
  const PoolProblem p = stem();
  Tensor x = Tensor::empty(stream, p.src_desc());
  Tensor bad_y = Tensor::empty(stream, TensorDesc::packed(DType::f32, Layout::nchw, 2, 3, 4, 4));
  const auto message = [](auto&& call) -> std::string {
    try {
      call();
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::invalid_argument);
      return e.what();
    }
    return "(no error)";
  };
  std::string m = message([&] { pooling_forward(stream, p, x, bad_y); });
  EXPECT_NE(m.find("y (output)"), std::string::npos) << m;
  Tensor y = Tensor::empty(stream, p.dst_desc());
  Tensor idx = Tensor::empty(stream, p.indices_desc());
  m = message([&] { pooling_forward(stream, p, x, y, &idx); });
  EXPECT_NE(m.find("indices"), std::string::npos) << m;
  PoolProblem keep = p;
  keep.keep_indices = true;
  m = message([&] { pooling_forward(stream, keep, x, y); });
  EXPECT_NE(m.find("indices"), std::string::npos) << m;
  Tensor wrong_idx = Tensor::empty(stream, p.dst_desc());  // f32, not i32
  m = message([&] { pooling_forward(stream, keep, x, y, &wrong_idx); });
  EXPECT_NE(m.find("indices"), std::string::npos) << m;
  PoolProblem avg = p;
  avg.mode = PoolMode::avg_exclude_pad;
  Tensor dx = Tensor::empty(stream, p.src_desc());
  m = message([&] { pooling_backward(stream, avg, y, dx, &x); });
  EXPECT_NE(m.find("x (input)"), std::string::npos) << m;
  m = message([&] { pooling_backward(stream, p, y, dx); });  // max without x or indices
  EXPECT_NE(m.find("x (input)"), std::string::npos) << m;
  pooling_backward(stream, avg, y, dx);
  stream.synchronize();
}

}  // namespace
}  // namespace galley::dnn
