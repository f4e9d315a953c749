// One call of a GPU conv solver on seeded random data, compared with ref.conv.direct: y is poisoned
// with NaN first (every element must be written) and so is the workspace (nothing may rely on
// zeroed scratch). Shared by the gpu tests of single solvers.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dnn/ref_conv_direct.hpp"
#include "dnn/tensor_data.hpp"
#include "galley/dnn/conv_solver.hpp"
#include "galley/memory/buffer.hpp"
#include "galley/runtime/stream.hpp"
#include "gpu_test_util.hpp"

namespace galley::testing {

/// x from `seed`, w from `seed + 1`. `config`: an inner choice of the solver (parse_config_any), or
/// null for its default.
inline dnn::Comparison run_against_reference(const dnn::ConvSolver& solver, const dnn::ConvProblem& p,
                                             const runtime::Device& device, std::uint64_t seed,
                                             const void* config = nullptr) {
  runtime::Stream stream(device);
  const auto x = dnn::random_tensor(p.dtype, p.x_desc().elements(), seed);
  const auto w = dnn::random_tensor(p.dtype, p.w_desc().elements(), seed + 1);
  std::vector<std::byte> want(p.y_desc().bytes()), got(p.y_desc().bytes());
  dnn::reference_conv_forward(p, x.data(), w.data(), want.data());
  memory::Buffer dx = memory::allocate(stream, x.size()), dw = memory::allocate(stream, w.size());
  memory::Buffer dy = memory::allocate(stream, got.size());
  const dnn::ProblemRef ref = dnn::ProblemRef::of(p);
  const std::size_t ws_bytes = solver.workspace_bytes_any(ref, device, config);
  memory::Buffer ws = memory::allocate(stream, ws_bytes);
  memory::copy_from_host(stream, dx, x.data(), x.size());
  memory::copy_from_host(stream, dw, w.data(), w.size());
  memory::memset(stream, dy, 0xff, got.size());
  if (ws_bytes > 0) memory::memset(stream, ws, 0xff, ws_bytes);
  dnn::OpArgs args;
  args.set(dnn::ArgId::src, dx.data());
  args.set(dnn::ArgId::wei, dw.data());
  args.set(dnn::ArgId::dst, dy.data());
  args.workspace = ws_bytes ? ws.data() : nullptr;
  args.workspace_bytes = ws_bytes;
  solver.run_any(stream, ref, args, config);
  memory::copy_to_host(stream, got.data(), dy, got.size());
  stream.synchronize();
  return dnn::compare_outputs(p.dtype, got.data(), want.data(), p.y_desc().elements(), dnn::conv_tolerance(p.dtype));
}

/// A parameterised test of one solver on the first CUDA device; skips without one.
template <typename Param>
class CudaSolverTest : public ::testing::TestWithParam<Param> {
 protected:
  explicit CudaSolverTest(const char* solver_name) : solver_name_(solver_name) {}
  void SetUp() override {
    std::string why;
    device_ = first_device("cuda", why);
    if (!device_) GTEST_SKIP() << "no CUDA device: " << why;
    solver_ = dnn::find_conv_solver("cuda", solver_name_);
    ASSERT_NE(solver_, nullptr) << solver_name_ << " is not registered on cuda";
  }
  const char* solver_name_;
  std::optional<runtime::Device> device_;
  const dnn::ConvSolver* solver_ = nullptr;
};

}  // namespace galley::testing
