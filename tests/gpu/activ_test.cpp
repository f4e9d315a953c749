// Every GPU activation solver (gpu.activ.eltwise on cuda and hip, cuda.activ.cudnn) against
// ref.activ: every activation, both directions, f32/f16/bf16, odd shapes, both layouts; the
// vector path's full and partial tiles at small and full block sizes; the scalar path (misaligned
// pointers, sizes not a multiple of 8); in-place calls; large and NaN inputs as on the cpu. Skips
// without a device of the backend.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "dnn/op_verify.hpp"
#include "dnn/ref_activ.hpp"
#include "dnn/tensor_data.hpp"
#include "galley/dnn/activation.hpp"
#include "galley/memory/buffer.hpp"
#include "gpu_test_util.hpp"

namespace galley::dnn {
namespace {

std::vector<Activation> all_activations() {
  std::vector<Activation> out;
  for (std::size_t i = 0; i < kActivationCount; ++i) out.push_back(static_cast<Activation>(i));
  return out;
}

std::vector<ActivProblem> problems() {
  std::vector<ActivProblem> out;
  for (Activation a : all_activations()) {
    for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
      std::vector<ActivProblem> shapes = {
          ActivProblem::packed(a, dt, Layout::nchw, 1, 3, 31, 29),
          ActivProblem::packed(a, dt, Layout::nhwc, 2, 17, 5, 7),
          ActivProblem::contiguous(a, dt, {1}),
          ActivProblem::contiguous(a, dt, {7}),
          ActivProblem::contiguous(a, dt, {23, 179}),
          ActivProblem::contiguous(a, dt, {(1 << 18) + 3}),
      };
      // Large enough for full-size blocks, with a partial last tile and an element tail.
      if (a == Activation::relu || a == Activation::gelu_erf) {
        shapes.push_back(ActivProblem::contiguous(a, dt, {8 * (1024 * 530 + 100) + 5}));
      }
      if (a == Activation::leaky_relu) shapes[1].alpha = -0.2;
      // Lower bound 0, so cuDNN's clipped relu takes it; an upper bound inside the data that no
      // stored value equals, since a vendor need not take PyTorch's side at the bound itself.
      if (a == Activation::clip) shapes[1].beta = 0.70001;
      if (a == Activation::clip) shapes[3].alpha = -1, shapes[3].beta = 1;
      if (a == Activation::elu) shapes[1].alpha = 0.4;
      for (ActivDirection d : {ActivDirection::forward, ActivDirection::backward}) {
        for (ActivProblem p : shapes) {
          p.direction = d;
          out.push_back(p);
        }
      }
    }
  }
  return out;
}

class GpuActiv : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why;
    device_ = testing::first_device(GetParam(), why);
    if (!device_) GTEST_SKIP() << "no " << GetParam() << " device: " << why;
    solvers_ = solvers_for<ActivProblem>(GetParam());
    ASSERT_FALSE(solvers_.empty());
    ASSERT_NE(find_solver_for<ActivProblem>(GetParam(), "gpu.activ.eltwise"), nullptr);
  }
  std::optional<runtime::Device> device_;
  std::vector<const ActivSolver*> solvers_;
};

TEST_P(GpuActiv, EverySolverMatchesTheReference) {
  int checked = 0;
  for (const ActivProblem& p : problems()) {
    for (const ActivSolver* s : solvers_) {
      const Applicability a = s->check(p, *device_);
      if (!a) {
        EXPECT_FALSE(a.reason.empty()) << s->name();
        EXPECT_NE(s->name(), std::string_view("gpu.activ.eltwise")) << p.key() << ": " << a.reason;
        continue;
      }
      const OpVerification v = check_against_reference(*device_, ProblemRef::of(p), *s);
      EXPECT_TRUE(v.passed) << s->name() << " " << p.key() << ": " << v.summary;
      ++checked;
    }
  }
  EXPECT_GE(checked, 11 * 3 * 6 * 2 + 2 * 3 * 2);
}

// Runs `s` on device copies of host data at `offset` bytes into each buffer; returns the output.
std::vector<std::byte> run_on(const runtime::Device& device, const ActivSolver& s, const ActivProblem& p,
                              const std::vector<std::byte>& in0, const std::vector<std::byte>& in1,
                              std::size_t offset, bool in_place) {
  runtime::Stream stream(device);
  const std::size_t bytes = p.desc().bytes();
  memory::Buffer a = memory::allocate(stream, bytes + offset), b = memory::allocate(stream, bytes + offset);
  memory::Buffer o = memory::allocate(stream, bytes + offset);
  const std::size_t ws_bytes = s.workspace_bytes(p, device);
  memory::Buffer ws = memory::allocate(stream, ws_bytes);
  auto* pa = static_cast<unsigned char*>(a.data()) + offset;
  auto* pb = static_cast<unsigned char*>(b.data()) + offset;
  auto* po = in_place ? pa : static_cast<unsigned char*>(o.data()) + offset;
  stream.copy_h2d(pa, in0.data(), bytes);
  stream.copy_h2d(pb, in1.data(), bytes);
  if (!in_place) stream.memset(po, 0xff, bytes);
  ActivArgs args;
  args.workspace = ws.data();
  args.workspace_bytes = ws_bytes;
  if (p.direction == ActivDirection::forward) {
    args.x = pa;
    args.y = po;
  } else {
    args.dy = pa;
    args.dx = po;
    args.x = pb;
    args.y = pb;
  }
  s.run(stream, p, args);
  std::vector<std::byte> out(bytes);
  stream.copy_d2h(out.data(), po, bytes);
  stream.synchronize();
  return out;
}

std::vector<std::byte> reference_of(const ActivProblem& p, const std::vector<std::byte>& in0,
                                    const std::vector<std::byte>& in1) {
  std::vector<std::byte> out(p.desc().bytes());
  ActivArgs args;
  if (p.direction == ActivDirection::forward) {
    args.x = in0.data();
    args.y = out.data();
  } else {
    args.dy = in0.data();
    args.x = in1.data();
    args.y = const_cast<std::byte*>(in1.data());  // read, not written, by a backward
    args.dx = out.data();
  }
  reference_activation(p, args);
  return out;
}

// Misaligned pointers take the scalar kernel; in-place calls write what they read (also through a
// partial last tile: 300 vectors of 8).
TEST_P(GpuActiv, MisalignedAndInPlaceCallsMatchTheReference) {
  for (const ActivSolver* s : solvers_) {
    for (Activation act : all_activations()) {
      for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
        for (ActivDirection d : {ActivDirection::forward, ActivDirection::backward}) {
          for (const std::int64_t n : {std::int64_t(4099), std::int64_t(8 * 300 + 5)}) {
            ActivProblem p = ActivProblem::contiguous(act, dt, {n});
            p.direction = d;
            if (!s->check(p, *device_)) continue;
            SCOPED_TRACE(std::string(s->name()) + " " + p.key());
            const auto in0 = random_tensor(dt, p.elements(), 3);
            const auto in1 = random_tensor(dt, p.elements(), 4);
            const auto want = reference_of(p, in0, in1);
            for (const std::size_t offset : {std::size_t(0), size_of(dt), 3 * size_of(dt)}) {
              for (const bool in_place : {false, true}) {
                const auto got = run_on(*device_, *s, p, in0, in1, offset, in_place);
                const Comparison c = compare_outputs(dt, got.data(), want.data(), p.elements(), p.tolerance());
                EXPECT_TRUE(c.passed) << "offset " << offset << (in_place ? " in place: " : ": ") << c.summary;
              }
            }
          }
        }
      }
    }
  }
}

// The values the cpu tests pin down hold on the GPU too: large |x| gives no NaN, NaN propagates
// (as PyTorch's formulas do, for the own kernel).
TEST_P(GpuActiv, ExtremeInputsBehaveAsOnTheCpu) {
  const float big = std::numeric_limits<float>::max();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> xs = {1e4f, -1e4f, 88.8f, -88.8f, 200.f, -200.f, 1e20f, -1e20f, big, -big, nan, 0.f};
  const std::vector<float> dys(xs.size(), 0.75f);
  std::vector<std::byte> in_x(xs.size() * 4), in_dy(xs.size() * 4);
  std::memcpy(in_x.data(), xs.data(), in_x.size());
  std::memcpy(in_dy.data(), dys.data(), in_dy.size());
  for (const ActivSolver* s : solvers_) {
    for (Activation act : all_activations()) {
      for (ActivDirection d : {ActivDirection::forward, ActivDirection::backward}) {
        ActivProblem p = ActivProblem::contiguous(act, DType::f32, {static_cast<std::int64_t>(xs.size())});
        p.direction = d;
        if (!s->check(p, *device_)) continue;
        SCOPED_TRACE(std::string(s->name()) + " " + p.key());
        // Backward of an activation that keeps y gets y = f(x), as a real backward does.
        std::vector<std::byte> saved = in_x;
        if (d == ActivDirection::backward && p.reads_dst()) {
          ActivProblem fwd = p;
          fwd.direction = ActivDirection::forward;
          saved = reference_of(fwd, in_x, in_x);
        }
        const auto& in0 = d == ActivDirection::forward ? in_x : in_dy;
        const auto want = reference_of(p, in0, saved);
        const auto got = run_on(*device_, *s, p, in0, saved, 0, false);
        std::vector<float> g(xs.size()), w(xs.size());
        std::memcpy(g.data(), got.data(), got.size());
        std::memcpy(w.data(), want.data(), want.size());
        // A vendor library need not follow PyTorch at NaN or at a kink (x = 0); the own kernel must.
        const bool own = s->name().rfind("gpu.", 0) == 0;
        for (std::size_t i = 0; i < xs.size(); ++i) {
          if (!own && (std::isnan(xs[i]) || xs[i] == 0.f)) continue;
          EXPECT_EQ(std::isnan(g[i]), std::isnan(w[i])) << "x = " << xs[i] << ": got " << g[i] << ", want " << w[i];
          // Near FLT_MAX a float product (hardswish's x * 6) overflows where the double reference
          // does not; PyTorch's float kernels overflow the same way.
          if (std::isfinite(w[i]) && std::abs(w[i]) < 1e37f) {
            EXPECT_NEAR(g[i], w[i], 1e-5 * (1 + std::abs(w[i]))) << "x = " << xs[i];
          }
        }
      }
    }
  }
}

TEST_P(GpuActiv, VendorSolversRefuseWithAReason) {
  const ActivSolver* cudnn = find_solver_for<ActivProblem>(GetParam(), "cuda.activ.cudnn");
  if (GetParam() != "cuda") {
    EXPECT_EQ(cudnn, nullptr);
    return;
  }
  ASSERT_NE(cudnn, nullptr);
  ActivProblem gelu = ActivProblem::contiguous(Activation::gelu_tanh, DType::f32, {8});
  EXPECT_NE(cudnn->check(gelu, *device_).reason.find("gelu_tanh"), std::string::npos);
  ActivProblem hardtanh = ActivProblem::contiguous(Activation::clip, DType::f32, {8});
  hardtanh.alpha = -1;
  hardtanh.beta = 1;
  EXPECT_NE(cudnn->check(hardtanh, *device_).reason.find("lower bound 0"), std::string::npos);
  ActivProblem sigmoid = ActivProblem::contiguous(Activation::sigmoid, DType::f32, {8});
  EXPECT_TRUE(cudnn->check(sigmoid, *device_));
  sigmoid.direction = ActivDirection::backward;
  EXPECT_FALSE(cudnn->check(sigmoid, *device_));
}

INSTANTIATE_TEST_SUITE_P(Backends, GpuActiv, ::testing::Values("cuda", "hip"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace galley::dnn
