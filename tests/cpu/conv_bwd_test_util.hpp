// Runs one cpu backward-convolution solver on random data against the backward references with
// the output poisoned first (NaN, so an element left unwritten fails), or filled with finite
// garbage (so an output accumulated into instead of overwritten fails), and checks that the
// inputs and the memory past the workspace come back untouched.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "dnn/conv_backward_args.hpp"
#include "dnn/ref_conv_backward.hpp"
#include "dnn/tensor_data.hpp"
#include "galley/dnn/conv_solver.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"

namespace galley::test {

struct BwdSolverRun {
  dnn::Applicability applicable;
  dnn::Comparison comparison;
  std::size_t workspace_bytes = 0;
};

enum class Prefill { nan, garbage };

/// Runs `solver_name` on `p` (its direction says which pass) through the public interface and
/// compares with the reference.
inline BwdSolverRun run_bwd_against_reference(const std::string& solver_name, const dnn::ConvProblem& p,
                                              std::uint64_t seed = 1, Prefill prefill = Prefill::nan) {
  BwdSolverRun out;
  const dnn::ConvSolver* solver = dnn::find_conv_solver("cpu", solver_name);
  if (solver == nullptr) {
    out.applicable = dnn::Applicability::no("solver " + solver_name + " is not registered");
    return out;
  }
  const runtime::Device cpu = runtime::device("cpu");
  out.applicable = solver->check(p, cpu);
  if (!out.applicable) return out;
  const bool data = p.direction == dnn::ConvDirection::backward_data;
  const std::size_t esize = size_of(p.dtype);
  const std::int64_t nx = p.x_desc().elements(), nw = p.w_desc().elements(), ny = p.y_desc().elements();
  const std::int64_t n_out = data ? nx : nw;
  // The two inputs: (dy, w) for data, (x, dy) for weights.
  const auto in_a = dnn::random_tensor(p.dtype, data ? ny : nx, seed);
  const auto in_b = dnn::random_tensor(p.dtype, data ? nw : ny, seed + 1000);
  const auto keep_a = in_a, keep_b = in_b;
  std::vector<std::byte> got(static_cast<std::size_t>(n_out) * esize, std::byte{0xff});  // NaN in every dtype
  if (prefill == Prefill::garbage) got = dnn::random_tensor(p.dtype, n_out, seed + 7);
  std::vector<std::byte> ref(got.size());
  out.workspace_bytes = solver->workspace_bytes(p, cpu);
  constexpr std::size_t kGuard = 256;
  std::vector<std::byte> ws(out.workspace_bytes + kGuard, std::byte{0x5a});
  void* ws_ptr = out.workspace_bytes ? ws.data() : nullptr;
  const dnn::ConvArgs args =
      data ? dnn::conv_args(dnn::BackwardDataArgs{in_a.data(), in_b.data(), got.data()}, ws_ptr,
                            out.workspace_bytes)
           : dnn::conv_args(dnn::BackwardWeightsArgs{in_a.data(), in_b.data(), got.data()}, ws_ptr,
                            out.workspace_bytes);
  runtime::Stream stream(cpu);
  solver->run(stream, p, args);
  stream.synchronize();
  for (std::size_t i = out.workspace_bytes; i < ws.size(); ++i) {
    if (ws[i] != std::byte{0x5a}) {
      out.applicable =
          dnn::Applicability::no("wrote past its workspace_bytes() at byte " + std::to_string(i));
      return out;
    }
  }
  if (in_a != keep_a || in_b != keep_b) {
    out.applicable = dnn::Applicability::no("modified an input tensor");
    return out;
  }
  if (data) {
    dnn::reference_conv_backward_data(p, in_a.data(), in_b.data(), ref.data());
  } else {
    dnn::reference_conv_backward_weights(p, in_a.data(), in_b.data(), ref.data());
  }
  out.comparison = dnn::compare_outputs(p.dtype, got.data(), ref.data(), n_out, dnn::conv_tolerance(p.dtype));
  return out;
}

}  // namespace galley::test
