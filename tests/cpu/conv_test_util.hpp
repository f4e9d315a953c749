// Runs one cpu conv solver on random data against the reference (ref.conv.direct's
// reference_conv_forward) with the output poisoned first, so an element left unwritten is NaN. A
// problem with a fused epilogue gets a random bias and residual as it asks.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "dnn/ref_conv_direct.hpp"
#include "dnn/tensor_data.hpp"
#include "galley/dnn/conv_solver.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"

namespace galley::test {

struct SolverRun {
  dnn::Applicability applicable;
  dnn::Comparison comparison;
  std::size_t workspace_bytes = 0;
};

/// Runs `solver_name` on `p` through its public interface (check, workspace_bytes, run on a cpu
/// stream) and compares with the reference. The workspace is exactly workspace_bytes() long
/// with a guard zone after it that must come back untouched.
inline SolverRun run_against_reference(const std::string& solver_name, const dnn::ConvProblem& p,
                                       std::uint64_t seed = 1) {
  SolverRun out;
  const dnn::ConvSolver* solver = dnn::find_conv_solver("cpu", solver_name);
  if (solver == nullptr) {
    out.applicable = dnn::Applicability::no("solver " + solver_name + " is not registered");
    return out;
  }
  const runtime::Device cpu = runtime::device("cpu");
  out.applicable = solver->check(p, cpu);
  if (!out.applicable) return out;
  const std::size_t esize = size_of(p.dtype);
  const std::int64_t nx = p.x_desc().elements(), nw = p.w_desc().elements(), ny = p.y_desc().elements();
  const auto x = dnn::random_tensor(p.dtype, nx, seed);
  const auto w = dnn::random_tensor(p.dtype, nw, seed + 1000);
  const auto bias = dnn::random_tensor(p.dtype, p.epilogue.bias ? p.k : 0, seed + 2000);
  const auto residual = dnn::random_tensor(p.dtype, p.epilogue.residual ? ny : 0, seed + 3000);
  const void* bias_arg = p.epilogue.bias ? bias.data() : nullptr;
  const void* residual_arg = p.epilogue.residual ? residual.data() : nullptr;
  std::vector<std::byte> y(static_cast<std::size_t>(ny) * esize, std::byte{0xff});  // NaN in every dtype
  std::vector<std::byte> ref(static_cast<std::size_t>(ny) * esize);
  out.workspace_bytes = solver->workspace_bytes(p, cpu);
  constexpr std::size_t kGuard = 256;
  std::vector<std::byte> ws(out.workspace_bytes + kGuard, std::byte{0x5a});
  dnn::ConvArgs args{x.data(), w.data(), y.data(), out.workspace_bytes ? ws.data() : nullptr, out.workspace_bytes};
  args.bias = bias_arg;
  args.residual = residual_arg;
  runtime::Stream stream(cpu);
  solver->run(stream, p, args);
  stream.synchronize();
  for (std::size_t i = out.workspace_bytes; i < ws.size(); ++i) {
    if (ws[i] != std::byte{0x5a}) {
      out.applicable = dnn::Applicability::no("wrote past its workspace_bytes() at byte " + std::to_string(i));
      return out;
    }
  }
  dnn::reference_conv_forward(p, x.data(), w.data(), ref.data(), bias_arg, residual_arg);
  out.comparison = dnn::compare_outputs(p.dtype, y.data(), ref.data(), ny, dnn::conv_tolerance(p.dtype));
  return out;
}

}  // namespace galley::test
