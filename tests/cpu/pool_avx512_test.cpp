// cpu.pool.direct's AVX-512 paths against the reference: max pooling without indices (the fixed
// windows' stream kernels, the generic per-tap kernel, and the rows with NaNs that fall back to the
// full rule) bit for bit, and f32 averages over whole planes within rounding. The shapes put
// windows across vector boundaries, past both ends of short and 1-wide rows, in ceil mode and with
// padding wider than the row; the data has ties of +0 and -0 across rows and columns, -inf, and
// NaNs with distinct payloads, so that taking the wrong one of equal values or of two NaNs shows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/conv_isa.hpp"
#include "dnn/ref_pool.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/pool.hpp"
#include "galley/dnn/solver.hpp"
#include "galley/runtime/device.hpp"
#include "galley/tensor.hpp"
#include "random_floats.hpp"

namespace galley::dnn {
namespace {

constexpr const char* kDirect = "cpu.pool.direct";

float nan_with_payload(std::uint32_t payload) {
  const std::uint32_t bits = 0x7fc00000u | (payload & 0x3fffffu);
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

enum class Data { random, ties, ties_and_nans, one_nan_per_plane };

std::vector<float> input(const PoolProblem& p, Data kind, std::uint32_t seed) {
  const auto count = static_cast<std::size_t>(p.src_desc().elements());
  std::vector<float> x = test::random_floats(count, seed);
  std::mt19937 gen(seed);
  const float inf = std::numeric_limits<float>::infinity();
  const float ties[] = {0.0f, -0.0f, 1.0f, -1.0f, -inf};
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint32_t r = gen() % 1000;
    if (kind == Data::ties || kind == Data::ties_and_nans) x[i] = ties[r % 5];
    if (kind == Data::ties_and_nans && r < 40) x[i] = nan_with_payload(static_cast<std::uint32_t>(i) + 1);
  }
  if (kind == Data::one_nan_per_plane) {
    // Every other plane gets one NaN, so planes and rows without one stay on the fast rule.
    const auto plane = static_cast<std::size_t>(p.h * p.w);
    for (std::size_t start = 0; start < count; start += 2 * plane)
      x[start + gen() % plane] = nan_with_payload(7);
  }
  return x;
}

// The bits of y from `solver` and from the reference on the same input.
void expect_same_bits(const PoolProblem& p, const std::vector<float>& x, const PoolSolver* solver,
                      const std::string& what) {
  const runtime::Device cpu = runtime::device("cpu");
  runtime::Stream stream(cpu);
  const PoolSolver* ref = find_solver_for<PoolProblem>("cpu", kRefPoolName);
  ASSERT_NE(ref, nullptr);
  Tensor xt = Tensor::empty(stream, p.src_desc());
  xt.copy_from_host(stream, x.data(), x.size() * sizeof(float));
  Tensor want = Tensor::empty(stream, p.dst_desc()), got = Tensor::empty(stream, p.dst_desc());
  pooling_forward(stream, p, xt, want, nullptr, ref);
  pooling_forward(stream, p, xt, got, nullptr, solver);
  EXPECT_EQ(got.to_host<std::uint32_t>(stream), want.to_host<std::uint32_t>(stream))
      << what << " " << p.key();
}

bool valid(const PoolProblem& p) {
  try {
    p.validate();
  } catch (const Error&) {
    return false;
  }
  return true;
}

TEST(PoolAvx512, MaxValuesEqualTheReferenceBitForBit) {
  if (!backends::cpu::cpu_has_avx512())
    GTEST_SKIP() << "no AVX-512 here: the pool solver tests cover the rest";
  const PoolSolver* direct = find_solver_for<PoolProblem>("cpu", kDirect);
  ASSERT_NE(direct, nullptr);
  struct Window {
    std::int64_t kh, kw, ph, pw, sh, sw;
    bool ceil;
  };
  const Window windows[] = {
      {3, 3, 1, 1, 2, 2, false},  // ResNet's: the stream kernel, stride 2
      {3, 3, 1, 1, 1, 1, false},  // the stream kernel, stride 1
      {3, 3, 0, 0, 2, 2, true},  {3, 3, 0, 0, 1, 1, false},
      {2, 2, 0, 0, 2, 2, false}, {2, 2, 0, 0, 2, 2, true},
      {2, 2, 0, 0, 1, 1, true},  {2, 2, 1, 1, 2, 2, false},  // per-tap kernel from here
      {5, 5, 2, 2, 2, 2, true},  {1, 7, 0, 3, 1, 1, false},
      {3, 1, 1, 0, 2, 1, false}, {1, 20, 0, 10, 1, 2, false},
      {2, 3, 0, 1, 3, 1, false},  // rows between windows
  };
  const struct {
    std::int64_t h, w;
  } planes[] = {{1, 1},  {1, 2},   {5, 1},  {7, 13},  {9, 16}, {13, 17},
                {6, 31}, {11, 32}, {8, 33}, {17, 47}, {5, 64}, {3, 97}};
  int checked = 0;
  std::uint32_t seed = 1;
  for (const Window& win : windows) {
    for (const auto& plane : planes) {
      for (Data data : {Data::random, Data::ties, Data::ties_and_nans, Data::one_nan_per_plane}) {
        PoolProblem p{.n = 1 + seed % 2,
                      .c = 3,
                      .h = plane.h,
                      .w = plane.w,
                      .kernel_h = win.kh,
                      .kernel_w = win.kw,
                      .pad_h = win.ph,
                      .pad_w = win.pw,
                      .stride_h = win.sh,
                      .stride_w = win.sw,
                      .ceil_mode = win.ceil};
        if (!valid(p)) continue;
        expect_same_bits(p, input(p, data, seed++), direct, "data " + std::to_string(static_cast<int>(data)));
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 400);  // the grid is not mostly invalid shapes
}

// Global max pooling by value alone: planes with NaNs (redone under the full rule), with zeros of
// both signs as their largest value (the rule keeps the first of them), all -inf, plane sizes
// around the two-vector step, and a tensor past 4 MiB, where the next plane is prefetched.
TEST(PoolAvx512, GlobalMaxValuesEqualTheReferenceBitForBit) {
  if (!backends::cpu::cpu_has_avx512())
    GTEST_SKIP() << "no AVX-512 here: the pool solver tests cover the rest";
  const PoolSolver* direct = find_solver_for<PoolProblem>("cpu", kDirect);
  ASSERT_NE(direct, nullptr);
  const struct {
    std::int64_t n, c, h, w;
  } shapes[] = {{1, 3, 1, 1},  {2, 3, 1, 15},  {1, 4, 4, 8},   {2, 3, 3, 11},   {1, 5, 7, 7},
                {2, 3, 5, 13}, {1, 3, 11, 32}, {1, 2, 56, 56}, {2, 170, 57, 57}};
  std::uint32_t seed = 71;
  for (const auto& shape : shapes) {
    const PoolProblem p{.window = PoolWindow::global, .n = shape.n, .c = shape.c, .h = shape.h, .w = shape.w};
    ASSERT_TRUE(valid(p)) << p.key();
    for (Data data : {Data::random, Data::ties, Data::ties_and_nans, Data::one_nan_per_plane}) {
      std::vector<float> x = input(p, data, seed++);
      if (data == Data::ties) {
        // Some planes of zeros of both signs alone, and one of -inf alone.
        const auto plane = static_cast<std::size_t>(p.h * p.w);
        for (std::size_t i = 0; i < plane; ++i) {
          x[i] = -std::numeric_limits<float>::infinity();
          if (x.size() >= 3 * plane) x[plane + i] = i % 3 == 1 ? 0.0f : -0.0f;
          if (x.size() >= 3 * plane) x[2 * plane + i] = i % 3 == 0 ? 0.0f : -0.0f;
        }
      }
      expect_same_bits(p, x, direct, "global, data " + std::to_string(static_cast<int>(data)));
    }
  }
}

// The ResNet-50 stem's shape with a NaN in one row only, in each of the row's vectors in turn: the
// row is redone under the full rule and the output rows after it fold under it.
TEST(PoolAvx512, OneNaNAnywhereInTheStemsPlane) {
  if (!backends::cpu::cpu_has_avx512())
    GTEST_SKIP() << "no AVX-512 here: the pool solver tests cover the rest";
  const PoolSolver* direct = find_solver_for<PoolProblem>("cpu", kDirect);
  ASSERT_NE(direct, nullptr);
  const PoolProblem p{
      .n = 1, .c = 2, .h = 112, .w = 112, .kernel_h = 3, .kernel_w = 3, .pad_h = 1, .pad_w = 1};
  for (const std::int64_t at : {0L, 15L, 16L, 40L * 112 + 63, 111L * 112 + 111, 112L * 112 + 57}) {
    std::vector<float> x = test::random_floats(static_cast<std::size_t>(p.src_desc().elements()), 3);
    x[static_cast<std::size_t>(at)] = nan_with_payload(5);
    expect_same_bits(p, x, direct, "NaN at " + std::to_string(at));
  }
}

TEST(PoolAvx512, AveragesOverWholePlanes) {
  if (!backends::cpu::cpu_has_avx512())
    GTEST_SKIP() << "no AVX-512 here: the pool solver tests cover the rest";
  const runtime::Device cpu = runtime::device("cpu");
  runtime::Stream stream(cpu);
  const PoolSolver* direct = find_solver_for<PoolProblem>("cpu", kDirect);
  const PoolSolver* ref = find_solver_for<PoolProblem>("cpu", kRefPoolName);
  ASSERT_NE(direct, nullptr);
  ASSERT_NE(ref, nullptr);
  const struct {
    std::int64_t h, w;
  } planes[] = {{1, 1}, {1, 15}, {4, 4}, {1, 17}, {7, 7}, {5, 13}, {3, 32}, {11, 11}, {2, 33}};
  std::uint32_t seed = 11;
  for (const auto& plane : planes) {
    for (PoolMode mode : {PoolMode::avg_include_pad, PoolMode::avg_exclude_pad}) {
      for (PoolWindow window : {PoolWindow::global, PoolWindow::kernel}) {
        PoolProblem p{.mode = mode, .window = window, .n = 1 + seed % 2, .c = 5, .h = plane.h, .w = plane.w};
        if (window == PoolWindow::kernel) p.kernel_h = plane.h, p.kernel_w = plane.w;  // one window per plane
        ASSERT_TRUE(valid(p)) << p.key();
        std::vector<float> x = test::random_floats(static_cast<std::size_t>(p.src_desc().elements()), seed++);
        x[0] = std::numeric_limits<float>::quiet_NaN();  // the first plane only
        Tensor xt = Tensor::empty(stream, p.src_desc());
        xt.copy_from_host(stream, x.data(), x.size() * sizeof(float));
        Tensor want = Tensor::empty(stream, p.dst_desc()), got = Tensor::empty(stream, p.dst_desc());
        pooling_forward(stream, p, xt, want, nullptr, ref);
        pooling_forward(stream, p, xt, got, nullptr, direct);
        const std::vector<float> a = got.to_host<float>(stream), b = want.to_host<float>(stream);
        ASSERT_EQ(a.size(), b.size());
        EXPECT_TRUE(std::isnan(a[0])) << p.key();
        // Inputs in [-1, 1) and at most 121 to a plane: summing in another order moves an average by
        // well under 1e-6, while a lost or foreign element moves it by 1 / 121 or more.
        for (std::size_t i = 1; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6) << p.key() << " plane " << i;
      }
    }
  }
}

// The separable average kernels, forward and backward, with and without the padding counted:
// windows that reach past both ends of a row, ceil mode, rows no window holds, odd planes and
// channel counts, and planes wider than two vectors. For the stem's backward pass (3x3 windows,
// stride 2, padding 1): one output column, output rows of exactly 16 and of 16k + 1 outputs, widths
// of one to three strips of its column blocks (up to 128 columns a strip), one and two output rows,
// and plane ends that fall inside a row's last block.
TEST(PoolAvx512, AveragesOverKernelWindowsForwardAndBackward) {
  if (!backends::cpu::cpu_has_avx512())
    GTEST_SKIP() << "no AVX-512 here: the pool solver tests cover the rest";
  const runtime::Device cpu = runtime::device("cpu");
  runtime::Stream stream(cpu);
  const PoolSolver* direct = find_solver_for<PoolProblem>("cpu", kDirect);
  const PoolSolver* ref = find_solver_for<PoolProblem>("cpu", kRefPoolName);
  ASSERT_NE(direct, nullptr);
  ASSERT_NE(ref, nullptr);
  struct Window {
    std::int64_t kh, kw, ph, pw, sh, sw;
    bool ceil;
  };
  const Window windows[] = {
      {3, 3, 1, 1, 2, 2, false},
      {3, 3, 1, 1, 2, 2, true},
      {3, 3, 1, 1, 1, 1, false},
      {3, 3, 0, 0, 2, 2, true},
      {2, 2, 0, 0, 2, 2, false},
      {5, 5, 2, 2, 2, 2, true},
      {1, 7, 0, 3, 1, 1, false},
      {3, 1, 1, 0, 2, 1, false},
      {1, 20, 0, 10, 1, 2, false},
      {2, 3, 0, 1, 3, 1, false},
      {4, 4, 1, 2, 2, 2, true},
      // ResNet's column windows (3 columns, stride 2, padding 1) under other row windows:
      // rows shared by up to four output rows, rows no window holds.
      {5, 3, 2, 1, 1, 2, false},
      {1, 3, 0, 1, 3, 2, false},
      {2, 3, 1, 1, 2, 2, true},
  };
  const struct {
    std::int64_t n, c, h, w;
  } shapes[] = {{1, 3, 31, 29}, {2, 17, 7, 13}, {1, 1, 1, 1},   {1, 3, 5, 64},  {1, 2, 9, 33},
                {1, 3, 56, 56}, {1, 2, 4, 32},  {1, 2, 6, 97},  {1, 23, 4, 30}, {2, 3, 6, 2},
                {1, 2, 2, 31},  {1, 2, 3, 35},  {1, 2, 5, 130}, {1, 2, 7, 200}, {1, 1, 4, 257}};
  int checked = 0;
  std::uint32_t seed = 21;
  for (const Window& win : windows) {
    for (const auto& shape : shapes) {
      for (PoolMode mode : {PoolMode::avg_include_pad, PoolMode::avg_exclude_pad}) {
        PoolProblem p{.mode = mode,
                      .n = shape.n,
                      .c = shape.c,
                      .h = shape.h,
                      .w = shape.w,
                      .kernel_h = win.kh,
                      .kernel_w = win.kw,
                      .pad_h = win.ph,
                      .pad_w = win.pw,
                      .stride_h = win.sh,
                      .stride_w = win.sw,
                      .ceil_mode = win.ceil};
        if (!valid(p)) continue;
        const std::vector<float> x =
            test::random_floats(static_cast<std::size_t>(p.src_desc().elements()), seed++);
        const std::vector<float> dy =
            test::random_floats(static_cast<std::size_t>(p.dst_desc().elements()), seed++);
        Tensor xt = Tensor::empty(stream, p.src_desc()), dyt = Tensor::empty(stream, p.dst_desc());
        xt.copy_from_host(stream, x.data(), x.size() * sizeof(float));
        dyt.copy_from_host(stream, dy.data(), dy.size() * sizeof(float));
        Tensor want = Tensor::empty(stream, p.dst_desc()), got = Tensor::empty(stream, p.dst_desc());
        pooling_forward(stream, p, xt, want, nullptr, ref);
        pooling_forward(stream, p, xt, got, nullptr, direct);
        Tensor want_dx = Tensor::empty(stream, p.src_desc()), got_dx = Tensor::empty(stream, p.src_desc());
        pooling_backward(stream, p, dyt, want_dx, nullptr, nullptr, ref);
        pooling_backward(stream, p, dyt, got_dx, nullptr, nullptr, direct);
        // Inputs in [-1, 1) and at most 25 to a window, at most 9 windows to an input: another order
        // of the sums moves a result by well under 1e-5, while a lost or foreign tap moves it by
        // 1 / 25 of an input or more.
        const std::vector<float> a = got.to_host<float>(stream), b = want.to_host<float>(stream);
        for (std::size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5) << p.key() << " y " << i;
        const std::vector<float> da = got_dx.to_host<float>(stream), db = want_dx.to_host<float>(stream);
        for (std::size_t i = 0; i < da.size(); ++i) ASSERT_NEAR(da[i], db[i], 1e-5) << p.key() << " dx " << i;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 80);
}

// Backward of averages over whole planes broadcasts each plane's share.
TEST(PoolAvx512, BackwardOfAveragesOverWholePlanes) {
  const runtime::Device cpu = runtime::device("cpu");
  runtime::Stream stream(cpu);
  const PoolSolver* direct = find_solver_for<PoolProblem>("cpu", kDirect);
  const PoolSolver* ref = find_solver_for<PoolProblem>("cpu", kRefPoolName);
  ASSERT_NE(direct, nullptr);
  ASSERT_NE(ref, nullptr);
  const struct {
    std::int64_t n, c, h, w;
  } shapes[] = {{1, 3, 31, 29},
                {2, 17, 7, 7},
                {1, 1, 1, 1},
                {1, 5, 1, 33},
                {1, 23, 11, 13},
                // Past the size that writes around the caches.
                {1, 2, 1030, 2050}};
  std::uint32_t seed = 41;
  for (const auto& shape : shapes) {
    const PoolProblem p{.mode = PoolMode::avg_include_pad,
                        .window = PoolWindow::global,
                        .n = shape.n,
                        .c = shape.c,
                        .h = shape.h,
                        .w = shape.w};
    ASSERT_TRUE(valid(p)) << p.key();
    const std::vector<float> dy =
        test::random_floats(static_cast<std::size_t>(p.dst_desc().elements()), seed++);
    Tensor dyt = Tensor::empty(stream, p.dst_desc());
    dyt.copy_from_host(stream, dy.data(), dy.size() * sizeof(float));
    Tensor want = Tensor::empty(stream, p.src_desc()), got = Tensor::empty(stream, p.src_desc());
    pooling_backward(stream, p, dyt, want, nullptr, nullptr, ref);
    pooling_backward(stream, p, dyt, got, nullptr, nullptr, direct);
    const std::vector<float> a = got.to_host<float>(stream), b = want.to_host<float>(stream);
    for (std::size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-7) << p.key() << " dx " << i;
  }
}

// Max backward on the gather kernel, finding the maxima again and from kept indices (some of them
// moved outside their windows, which must contribute nothing), against the reference: ties of +0
// and -0, -inf windows and NaNs decide which input takes each gradient.
TEST(PoolAvx512, MaxBackwardMatchesTheReference) {
  if (!backends::cpu::cpu_has_avx512())
    GTEST_SKIP() << "no AVX-512 here: the pool solver tests cover the rest";
  const runtime::Device cpu = runtime::device("cpu");
  runtime::Stream stream(cpu);
  const PoolSolver* direct = find_solver_for<PoolProblem>("cpu", kDirect);
  const PoolSolver* ref = find_solver_for<PoolProblem>("cpu", kRefPoolName);
  ASSERT_NE(direct, nullptr);
  ASSERT_NE(ref, nullptr);
  struct Window {
    std::int64_t kh, kw, ph, pw, sh, sw;
    bool ceil;
  };
  const Window windows[] = {
      {3, 3, 1, 1, 2, 2, false},
      {3, 3, 1, 1, 1, 1, false},
      {3, 3, 0, 0, 2, 2, true},
      {2, 2, 0, 0, 2, 2, false},
      {5, 5, 2, 2, 2, 2, true},
      {1, 7, 0, 3, 1, 1, false},
      {3, 1, 1, 0, 2, 1, false},
      {1, 20, 0, 10, 1, 2, false},
      {2, 3, 0, 1, 3, 1, false},
      // The one-pass kernel's windows (3 columns, stride 2, padding 1) under other row windows:
      // rows shared by up to four output rows, rows no window holds, ceil mode.
      {5, 3, 2, 1, 1, 2, false},
      {1, 3, 0, 1, 3, 2, false},
      {3, 3, 1, 1, 2, 2, true},
      {2, 3, 1, 1, 2, 2, true},
  };
  const struct {
    std::int64_t n, c, h, w;
  } shapes[] = {{1, 3, 31, 29}, {2, 17, 7, 13}, {1, 1, 1, 1},  {1, 3, 5, 64},
                {1, 2, 9, 33},  {1, 3, 56, 56}, {1, 2, 6, 97}, {1, 23, 4, 30}};
  int checked = 0;
  std::uint32_t seed = 61;
  for (const Window& win : windows) {
    for (const auto& shape : shapes) {
      for (Data data : {Data::random, Data::ties, Data::ties_and_nans, Data::one_nan_per_plane}) {
        for (bool keep : {false, true}) {
          PoolProblem p{.n = shape.n,
                        .c = shape.c,
                        .h = shape.h,
                        .w = shape.w,
                        .kernel_h = win.kh,
                        .kernel_w = win.kw,
                        .pad_h = win.ph,
                        .pad_w = win.pw,
                        .stride_h = win.sh,
                        .stride_w = win.sw,
                        .ceil_mode = win.ceil,
                        .keep_indices = keep};
          if (!valid(p)) continue;
          const std::vector<float> x = input(p, data, seed++);
          const std::vector<float> dy =
              test::random_floats(static_cast<std::size_t>(p.dst_desc().elements()), seed++);
          Tensor xt = Tensor::empty(stream, p.src_desc()), dyt = Tensor::empty(stream, p.dst_desc());
          xt.copy_from_host(stream, x.data(), x.size() * sizeof(float));
          dyt.copy_from_host(stream, dy.data(), dy.size() * sizeof(float));
          Tensor want = Tensor::empty(stream, p.src_desc()), got = Tensor::empty(stream, p.src_desc());
          if (keep) {
            Tensor y = Tensor::empty(stream, p.dst_desc()), idx = Tensor::empty(stream, p.indices_desc());
            pooling_forward(stream, p, xt, y, &idx, ref);
            std::vector<std::int32_t> moved = idx.to_host<std::int32_t>(stream);
            for (std::size_t i = 0; i < moved.size(); i += 5)
              moved[i] = static_cast<std::int32_t>((i * 7) % (p.h * p.w));
            idx.copy_from_host(stream, moved.data(), moved.size() * sizeof(std::int32_t));
            pooling_backward(stream, p, dyt, want, nullptr, &idx, ref);
            pooling_backward(stream, p, dyt, got, nullptr, &idx, direct);
          } else {
            pooling_backward(stream, p, dyt, want, &xt, nullptr, ref);
            pooling_backward(stream, p, dyt, got, &xt, nullptr, direct);
          }
          // Gradients in [-1, 1), at most 25 to an input: another order of the sums moves an
          // element by well under 1e-5, a gradient at the wrong element by far more.
          const std::vector<float> a = got.to_host<float>(stream), b = want.to_host<float>(stream);
          for (std::size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5) << p.key() << " dx " << i;
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 150);
}

// One plane whose scratch is larger than a thread keeps between calls, and a batch large enough to
// prefetch the next plane: the one-pass max backward against the reference.
TEST(PoolAvx512, MaxBackwardOfLargePlanes) {
  if (!backends::cpu::cpu_has_avx512())
    GTEST_SKIP() << "no AVX-512 here: the pool solver tests cover the rest";
  const runtime::Device cpu = runtime::device("cpu");
  runtime::Stream stream(cpu);
  const PoolSolver* direct = find_solver_for<PoolProblem>("cpu", kDirect);
  const PoolSolver* ref = find_solver_for<PoolProblem>("cpu", kRefPoolName);
  ASSERT_NE(direct, nullptr);
  ASSERT_NE(ref, nullptr);
  const struct { std::int64_t n, c, h, w; } shapes[] = {{1, 1, 1030, 2050}, {2, 160, 56, 56}};
  std::uint32_t seed = 91;
  for (const auto& shape : shapes) {
    const PoolProblem p{.n = shape.n,
                        .c = shape.c,
                        .h = shape.h,
                        .w = shape.w,
                        .kernel_h = 3,
                        .kernel_w = 3,
                        .pad_h = 1,
                        .pad_w = 1,
                        .stride_h = 2,
                        .stride_w = 2};
    ASSERT_TRUE(valid(p)) << p.key();
    const std::vector<float> x = input(p, Data::ties, seed++);
    const std::vector<float> dy =
        test::random_floats(static_cast<std::size_t>(p.dst_desc().elements()), seed++);
    Tensor xt = Tensor::empty(stream, p.src_desc()), dyt = Tensor::empty(stream, p.dst_desc());
    xt.copy_from_host(stream, x.data(), x.size() * sizeof(float));
    dyt.copy_from_host(stream, dy.data(), dy.size() * sizeof(float));
    Tensor want = Tensor::empty(stream, p.src_desc()), got = Tensor::empty(stream, p.src_desc());
    pooling_backward(stream, p, dyt, want, &xt, nullptr, ref);
    pooling_backward(stream, p, dyt, got, &xt, nullptr, direct);
    const std::vector<float> a = got.to_host<float>(stream), b = want.to_host<float>(stream);
    for (std::size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-5) << p.key() << " dx " << i;
  }
}

// The one-pass max backward of windows 3 columns wide, column stride 2, padded by 1 column, against
// the general kernel from the forward's kept indices, bit for bit: both sum each element's
// gradients from +0 in the same order, so a -0 gradient, a tie taken by the wrong tap or row, or
// another order of the sums shows. Rows of one output up to several vectors of outputs with one
// lane in the last, planes of one to two rows (output rows without a top or a bottom row), ceil
// mode (a last window of one row), other row windows, and NaNs at random places (the plane goes to
// the general kernel, with dx partly written).
TEST(PoolAvx512, MaxBackwardOfThreeColumnWindowsEqualsTheKeptIndicesBitForBit) {
  if (!backends::cpu::cpu_has_avx512())
    GTEST_SKIP() << "no AVX-512 here: the pool solver tests cover the rest";
  const runtime::Device cpu = runtime::device("cpu");
  runtime::Stream stream(cpu);
  const PoolSolver* direct = find_solver_for<PoolProblem>("cpu", kDirect);
  ASSERT_NE(direct, nullptr);
  struct Window {
    std::int64_t kh, ph, sh;
    bool ceil;
  };
  const Window windows[] = {
      {3, 1, 2, false}, {3, 1, 2, true}, {3, 0, 2, false}, {2, 1, 2, true}, {5, 2, 1, false}};
  const struct {
    std::int64_t n, c, h, w;
  } shapes[] = {{1, 2, 1, 1},   {2, 3, 2, 2},    {1, 3, 3, 3},   {1, 2, 4, 31}, {1, 2, 5, 32},
                {2, 2, 6, 33},  {1, 3, 8, 55},   {1, 3, 9, 56},  {1, 2, 7, 57}, {1, 2, 10, 64},
                {1, 2, 11, 65}, {1, 2, 12, 130}, {1, 3, 56, 56}, {2, 2, 57, 97}};
  int checked = 0;
  std::uint32_t seed = 131;
  for (const Window& win : windows) {
    for (const auto& shape : shapes) {
      for (Data data : {Data::random, Data::ties, Data::ties_and_nans, Data::one_nan_per_plane}) {
        PoolProblem p{.n = shape.n,
                      .c = shape.c,
                      .h = shape.h,
                      .w = shape.w,
                      .kernel_h = win.kh,
                      .kernel_w = 3,
                      .pad_h = win.ph,
                      .pad_w = 1,
                      .stride_h = win.sh,
                      .stride_w = 2,
                      .ceil_mode = win.ceil,
                      .keep_indices = true};
        if (!valid(p)) continue;
        const std::vector<float> x = input(p, data, seed++);
        std::vector<float> dy =
            test::random_floats(static_cast<std::size_t>(p.dst_desc().elements()), seed++);
        for (std::size_t i = 0; i < dy.size(); i += 3) dy[i] = -0.0f;
        Tensor xt = Tensor::empty(stream, p.src_desc()), dyt = Tensor::empty(stream, p.dst_desc());
        xt.copy_from_host(stream, x.data(), x.size() * sizeof(float));
        dyt.copy_from_host(stream, dy.data(), dy.size() * sizeof(float));
        Tensor y = Tensor::empty(stream, p.dst_desc()), idx = Tensor::empty(stream, p.indices_desc());
        pooling_forward(stream, p, xt, y, &idx, direct);
        Tensor kept = Tensor::empty(stream, p.src_desc()), found = Tensor::empty(stream, p.src_desc());
        pooling_backward(stream, p, dyt, kept, nullptr, &idx, direct);
        PoolProblem recompute = p;
        recompute.keep_indices = false;
        pooling_backward(stream, recompute, dyt, found, &xt, nullptr, direct);
        EXPECT_EQ(found.to_host<std::uint32_t>(stream), kept.to_host<std::uint32_t>(stream))
            << p.key() << " data " << static_cast<int>(data);
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 200);
}

}  // namespace
}  // namespace galley::dnn
