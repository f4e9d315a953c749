// Shared by the normalisation tests (cpu here, GPU in tests/gpu): run one solver on chosen inputs
// and read every output back as floats, and small helpers on float vectors.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dnn/op_verify.hpp"
#include "dnn/tensor_data.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/problem.hpp"
#include "galley/dnn/solver.hpp"
#include "galley/memory/buffer.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"

namespace galley::dnn::norm_test {

using Values = std::map<ArgId, std::vector<float>>;

/// Runs `solver` on `device` once. Inputs are the problem's seeded random data, except those in
/// `inputs` (by role, as floats rounded to the tensor's dtype). Returns every tensor after the call
/// (inputs as given, outputs as written), as floats.
inline Values run_solver(const runtime::Device& device, ProblemRef problem, const SolverBase& solver,
                         const Values& inputs = {}) {
  runtime::Stream stream(device);
  OpTensors t = make_op_tensors(stream, problem, default_op_seed(problem));
  for (std::size_t i = 0; i < t.args.size(); ++i) {
    const auto it = inputs.find(t.args[i].id);
    if (it == inputs.end()) continue;
    const TensorArg& a = t.args[i];
    EXPECT_EQ(static_cast<std::int64_t>(it->second.size()), a.desc.elements()) << a.name;
    t.host[i].resize(a.desc.bytes());
    from_float(a.desc.dtype, it->second.data(), t.host[i].data(), a.desc.elements());
  }
  load_op_tensors(stream, t);
  const std::size_t ws_bytes = solver.workspace_bytes_any(problem, device);
  const memory::Buffer ws = memory::allocate(stream, ws_bytes);
  OpArgs args = t.op_args;
  args.workspace = ws.data();
  args.workspace_bytes = ws_bytes;
  solver.run_any(stream, problem, args);
  Values out;
  for (std::size_t i = 0; i < t.args.size(); ++i) {
    const TensorArg& a = t.args[i];
    std::vector<std::byte> bytes(a.desc.bytes());
    stream.copy_d2h(bytes.data(), t.buffers[i].data(), bytes.size());
    stream.synchronize();
    std::vector<float> f(static_cast<std::size_t>(a.desc.elements()));
    to_float(a.desc.dtype, bytes.data(), f.data(), a.desc.elements());
    out[a.id] = std::move(f);
  }
  return out;
}

/// Every value finite.
inline bool all_finite(const std::vector<float>& v) {
  for (float x : v) {
    if (!std::isfinite(x)) return false;
  }
  return true;
}

/// max |a - b| / max |b| (1 when b is all zero).
inline double rel_err(const std::vector<float>& a, const std::vector<float>& b) {
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, std::abs(double(a[i]) - double(b[i])));
    norm = std::max(norm, std::abs(double(b[i])));
  }
  return err / (norm > 0 ? norm : 1.0);
}

/// Seeded uniform values in [lo, hi).
inline std::vector<float> uniform(std::size_t n, float lo, float hi, std::uint64_t seed) {
  std::vector<float> v(n);
  std::uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (float& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = lo + (hi - lo) * static_cast<float>((s >> 40) * (1.0 / 16777216.0));
  }
  return v;
}

/// Runs check_against_reference and fails with the problem key and the summary.
inline void expect_matches_reference(const runtime::Device& device, ProblemRef problem,
                                     const SolverBase& solver) {
  SCOPED_TRACE(std::string(solver.name()) + " " + problem.key());
  const Applicability ok = solver.check_any(problem, device);
  ASSERT_TRUE(ok) << ok.reason;
  const OpVerification v = check_against_reference(device, problem, solver);
  EXPECT_TRUE(v.passed) << v.summary;
}

/// Expects fn() to throw Error(invalid_argument) whose message contains every fragment.
template <class Fn>
void expect_invalid(Fn&& fn, std::initializer_list<std::string_view> fragments) {
  try {
    fn();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument) << e.what();
    for (auto f : fragments) EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << e.what();
  }
}

}  // namespace galley::dnn::norm_test
