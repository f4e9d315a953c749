// The vendor solvers keep per-call state for their 16 most recent pointer sets per plan or problem
// (cuda.conv.cudnn_graph: cuDNN's variant pack) and replay a set's calls as a CUDA graph from its
// third call (both it and cuda.conv.cublas_gemm). Layers of one shape share that state with their
// own tensors, so every call must run on its own tensors whatever the order: more sets than the cache holds (an evicted set is rebuilt), revisits in
// reverse order, two sets taking turns (direct calls, the capture, then replays), new data under a
// replayed set's pointers, and a call inside the user's own capture. Each output is poisoned with NaN
// before its call and compared with the reference for its own input. Skips without a CUDA device.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "dnn/ref_conv_direct.hpp"
#include "dnn/tensor_data.hpp"
#include "galley/dnn/conv_solver.hpp"
#include "galley/memory/buffer.hpp"
#include "galley/runtime/stream.hpp"
#include "gpu_test_util.hpp"

namespace galley::dnn {
namespace {

struct TensorSet {
  std::vector<std::byte> want;
  memory::Buffer x, y, ws;
};

struct SetsCase {
  const char* solver;
  DType dtype;
  Layout layout;
};

class VendorTensorSets : public ::testing::TestWithParam<SetsCase> {};

TEST_P(VendorTensorSets, EveryCallRunsOnItsOwnTensors) {
  std::string why;
  const auto device = galley::testing::first_device("cuda", why);
  if (!device) GTEST_SKIP() << "no CUDA device: " << why;
  const ConvSolver* solver = find_conv_solver("cuda", GetParam().solver);
  ASSERT_NE(solver, nullptr) << GetParam().solver;
  // 3x3 with padding: cublas_gemm runs im2col into the workspace, so the workspace pointer counts.
  ConvProblem p{.n = 1, .c = 12, .h = 11, .w = 7, .k = 20, .y = 3, .x = 3, .pad_h = 1, .pad_w = 1};
  p.dtype = GetParam().dtype;
  p.layout = GetParam().layout;
  ASSERT_TRUE(solver->check(p, *device));

  runtime::Stream stream(*device);
  const auto w = random_tensor(p.dtype, p.w_desc().elements(), 7);
  memory::Buffer dw = memory::allocate(stream, w.size());
  memory::copy_from_host(stream, dw, w.data(), w.size());
  const std::size_t y_bytes = p.y_desc().bytes();
  const std::size_t ws_bytes = solver->workspace_bytes(p, *device);
  constexpr int kSets = 21;  // more than the 16 packs a plan keeps
  std::vector<TensorSet> sets;
  for (int i = 0; i < kSets; ++i) {
    const auto x = random_tensor(p.dtype, p.x_desc().elements(), 100 + static_cast<std::uint64_t>(i));
    TensorSet s{std::vector<std::byte>(y_bytes), memory::allocate(stream, x.size()), memory::allocate(stream, y_bytes),
                memory::allocate(stream, ws_bytes)};
    reference_conv_forward(p, x.data(), w.data(), s.want.data());
    memory::copy_from_host(stream, s.x, x.data(), x.size());
    sets.push_back(std::move(s));
  }

  std::vector<int> order;
  for (int i = 0; i < kSets; ++i) order.push_back(i);       // fills the cache and evicts the oldest
  for (int i = kSets - 1; i >= 0; --i) order.push_back(i);  // cached sets, then evicted ones again
  for (int r = 0; r < 4; ++r) order.insert(order.end(), {3, 17});
  std::vector<std::byte> got(y_bytes);
  auto poison = [&](TensorSet& s) {
    memory::memset(stream, s.y, 0xff, y_bytes);
    if (ws_bytes > 0) memory::memset(stream, s.ws, 0xff, ws_bytes);
  };
  auto call = [&](TensorSet& s) {
    solver->run(stream, p, ConvArgs{s.x.data(), dw.data(), s.y.data(), ws_bytes ? s.ws.data() : nullptr, ws_bytes});
  };
  auto expect_right = [&](TensorSet& s, const std::string& what) {
    memory::copy_to_host(stream, got.data(), s.y, y_bytes);
    stream.synchronize();
    const Comparison cmp = compare_outputs(p.dtype, got.data(), s.want.data(), p.y_desc().elements(), conv_tolerance(p.dtype));
    EXPECT_TRUE(cmp.passed) << what << ": " << cmp.summary;
    return cmp.passed;
  };
  for (std::size_t i = 0; i < order.size(); ++i) {
    TensorSet& s = sets[static_cast<std::size_t>(order[i])];
    poison(s);
    call(s);
    if (!expect_right(s, "call " + std::to_string(i) + " on tensor set " + std::to_string(order[i]))) return;
  }

  // New data under set 3's pointers, whose calls are graph launches by now.
  const auto x_new = random_tensor(p.dtype, p.x_desc().elements(), 999);
  reference_conv_forward(p, x_new.data(), w.data(), sets[3].want.data());
  memory::copy_from_host(stream, sets[3].x, x_new.data(), x_new.size());
  poison(sets[3]);
  call(sets[3]);
  if (!expect_right(sets[3], "new data under a replayed pointer set")) return;

  // Inside the user's capture the call is captured as it is, then replayed by the user.
  poison(sets[17]);
  stream.begin_capture();
  call(sets[17]);
  runtime::Graph graph = stream.end_capture();
  graph.replay(stream);
  expect_right(sets[17], "a call captured in the user's graph");
}

INSTANTIATE_TEST_SUITE_P(Solvers, VendorTensorSets,
                         ::testing::Values(SetsCase{"cuda.conv.cudnn_graph", DType::f16, Layout::nhwc},
                                           SetsCase{"cuda.conv.cudnn_graph", DType::f32, Layout::nchw},
                                           SetsCase{"cuda.conv.cublas_gemm", DType::f16, Layout::nhwc},
                                           SetsCase{"cuda.conv.cublas_gemm", DType::f32, Layout::nchw}),
                         [](const auto& info) {
                           std::string name = info.param.solver;
                           return name.substr(name.rfind('.') + 1) + "_" + to_string(info.param.dtype) + "_" +
                                  (info.param.layout == Layout::nhwc ? "nhwc" : "nchw");
                         });

}  // namespace
}  // namespace galley::dnn
