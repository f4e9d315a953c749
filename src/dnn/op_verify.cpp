#include "dnn/op_verify.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "dnn/tensor_data.hpp"
#include "galley/core/error.hpp"
#include "galley/core/hash.hpp"
#include "galley/runtime/device.hpp"

namespace galley::dnn {
namespace {

bool is_float(DType dtype) { return dtype == DType::f32 || dtype == DType::f16 || dtype == DType::bf16; }

std::vector<std::byte> host_input(const TensorArg& t, std::uint64_t seed) {
  const auto count = static_cast<std::int64_t>(t.desc.bytes() / size_of(t.desc.dtype));
  if (!is_float(t.desc.dtype) || t.fill == Fill::zero) return std::vector<std::byte>(t.desc.bytes());
  std::vector<std::byte> data = random_tensor(t.desc.dtype, count, seed);
  if (t.fill == Fill::positive) {
    std::vector<float> values(static_cast<std::size_t>(count));
    to_float(t.desc.dtype, data.data(), values.data(), count);
    for (float& v : values) v = 1.0f + 0.5f * v;
    from_float(t.desc.dtype, values.data(), data.data(), count);
  }
  return data;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace

std::uint64_t default_op_seed(ProblemRef problem) { return fnv1a64(problem.key()); }

OpTensors make_op_tensors(runtime::Stream& stream, ProblemRef problem, std::uint64_t seed) {
  OpTensors t;
  t.args = problem.tensors();
  for (const TensorArg& a : t.args) {
    t.buffers.push_back(memory::allocate(stream, a.desc.bytes()));
    t.op_args.set(a.id, t.buffers.back().data());
    t.host.push_back(!a.output || a.also_read ? host_input(a, seed) : std::vector<std::byte>{});
    ++seed;
  }
  return t;
}

void load_op_tensors(runtime::Stream& stream, OpTensors& t) {
  for (std::size_t i = 0; i < t.args.size(); ++i) {
    if (!t.host[i].empty()) {
      stream.copy_h2d(t.buffers[i].data(), t.host[i].data(), t.host[i].size());
    } else {
      stream.memset(t.buffers[i].data(), 0xff, t.args[i].desc.bytes());
    }
  }
}

std::vector<std::vector<std::byte>> reference_op_outputs(ProblemRef problem, std::uint64_t seed) {
  const runtime::Device cpu = runtime::device("cpu");
  const SolverBase* ref = nullptr;
  std::vector<std::string> refused;
  for (const SolverBase* s : solvers_of(cpu.backend(), problem.kind())) {
    if (!s->is_reference()) continue;
    const Applicability a = s->check_any(problem, cpu);
    if (a) {
      ref = s;
      break;
    }
    refused.push_back(std::string(s->name()) + ": " + a.reason);
  }
  if (ref == nullptr) {
    throw Error(Status::unsupported, std::string("no reference solver of ") + to_string(problem.kind()) +
                                         " accepts " + problem.key() +
                                         (refused.empty() ? "" : " (" + join(refused) + ")"));
  }
  runtime::Stream stream(cpu);
  OpTensors host = make_op_tensors(stream, problem, seed);
  load_op_tensors(stream, host);
  const std::size_t ws_bytes = ref->workspace_bytes_any(problem, cpu);
  const memory::Buffer ws = memory::allocate(stream, ws_bytes);
  OpArgs args = host.op_args;
  args.workspace = ws.data();
  args.workspace_bytes = ws_bytes;
  ref->run_any(stream, problem, args);
  std::vector<std::vector<std::byte>> out(host.args.size());
  for (std::size_t i = 0; i < host.args.size(); ++i) {
    if (!host.args[i].output) continue;
    out[i].resize(host.args[i].desc.bytes());
    stream.copy_d2h(out[i].data(), host.buffers[i].data(), out[i].size());
  }
  stream.synchronize();
  return out;
}

OpVerification verify_op(runtime::Stream& stream, ProblemRef problem, const Choice& choice, OpTensors& t,
                         const std::vector<std::vector<std::byte>>& reference, double tolerance) {
  const runtime::Device& device = stream.device();
  const std::size_t ws_bytes = choice.solver->workspace_bytes_any(problem, device, choice.config.get());
  const memory::Buffer ws = memory::allocate(stream, ws_bytes);
  OpArgs args = t.op_args;
  args.workspace = ws.data();
  args.workspace_bytes = ws_bytes;
  load_op_tensors(stream, t);
  choice.solver->run_any(stream, problem, args, choice.config.get());
  OpVerification v;
  v.passed = true;
  for (std::size_t i = 0; i < t.args.size(); ++i) {
    const TensorArg& a = t.args[i];
    if (!a.output) continue;
    std::vector<std::byte> got(a.desc.bytes());
    stream.copy_d2h(got.data(), t.buffers[i].data(), got.size());
    stream.synchronize();
    std::string line;
    if (is_float(a.desc.dtype)) {
      const auto count = static_cast<std::int64_t>(got.size() / size_of(a.desc.dtype));
      const Comparison c = compare_outputs(a.desc.dtype, got.data(), reference[i].data(), count, tolerance);
      v.passed = v.passed && c.passed;
      if (std::isnan(v.max_rel_err) || std::isnan(c.max_rel_err)) {
        v.max_rel_err = NAN;
      } else {
        v.max_rel_err = std::max(v.max_rel_err, c.max_rel_err);
      }
      line = c.summary;
    } else {
      const bool same = std::memcmp(got.data(), reference[i].data(), got.size()) == 0;
      v.passed = v.passed && same;
      line = same ? "identical" : "differs from the reference";
    }
    v.summary += (v.summary.empty() ? "" : "; ") + std::string(to_string(a.id)) + ": " + line;
  }
  return v;
}

OpVerification check_against_reference(const runtime::Device& device, ProblemRef problem, const SolverBase& solver,
                                        double tolerance) {
  problem.validate();
  const Applicability a = solver.check_any(problem, device);
  if (!a) throw Error(Status::unsupported, std::string(solver.name()) + " refuses " + problem.key() + ": " + a.reason);
  const std::uint64_t seed = default_op_seed(problem);
  const auto reference = reference_op_outputs(problem, seed);
  runtime::Stream stream(device);
  OpTensors tensors = make_op_tensors(stream, problem, seed);
  return verify_op(stream, problem, {&solver, nullptr}, tensors, reference, tolerance > 0 ? tolerance : problem.tolerance());
}

}  // namespace galley::dnn
