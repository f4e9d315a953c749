#include "bench_conv_run.hpp"

#include <algorithm>
#include <deque>
#include <exception>
#include <memory>

#include "bench_stats.hpp"
#include "dnn/ref_conv_backward.hpp"
#include "dnn/ref_conv_direct.hpp"
#include "dnn/tensor_data.hpp"
#include "galley/core/error.hpp"
#include "galley/core/hash.hpp"
#include "galley/dnn/prepared_weights.hpp"
#include "galley/memory/buffer.hpp"
#include "memory_budget.hpp"

namespace galley::cli {
namespace {

// The problem's tensors on the device, by role, and which one the call writes.
struct DeviceData {
  std::vector<memory::Buffer> buffers;
  dnn::OpArgs args;
  dnn::TensorArg output;
  void* output_ptr = nullptr;
};

// The host reference for the problem's direction: `inputs` holds the host copy of each input
// tensor by role, `out` receives the output.
void reference(const dnn::ConvProblem& p, const std::vector<std::vector<std::byte>>& inputs,
               const std::vector<dnn::TensorArg>& tensors, std::vector<std::byte>& out) {
  auto input = [&](dnn::ArgId id) -> const void* {
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      if (tensors[i].id == id) return inputs[i].data();
    }
    throw Error(Status::internal, std::string("bench conv: no input tensor ") + dnn::to_string(id));
  };
  switch (p.direction) {
    case dnn::ConvDirection::forward:
      dnn::reference_conv_forward(p, input(dnn::ArgId::src), input(dnn::ArgId::wei), out.data(),
                                  p.epilogue.bias ? input(dnn::ArgId::bias) : nullptr,
                                  p.epilogue.residual ? input(dnn::ArgId::src1) : nullptr);
      return;
    case dnn::ConvDirection::backward_data:
      dnn::reference_conv_backward_data(p, input(dnn::ArgId::diff_dst), input(dnn::ArgId::wei), out.data());
      return;
    case dnn::ConvDirection::backward_weights:
      dnn::reference_conv_backward_weights(p, input(dnn::ArgId::src), input(dnn::ArgId::diff_dst), out.data());
      return;
  }
  throw Error(Status::internal, "bench conv: unknown direction");
}

// Runs, verifies and times one solver. Throws whatever the solver or the runtime throws.
void measure(runtime::Stream& stream, const dnn::ConvProblem& p, const dnn::ConvSolver& solver,
             DeviceData& data, const std::vector<std::byte>* ref, const ConvBenchOptions& options,
             ConvBenchResult& result) {
  const runtime::Device& device = stream.device();
  result.workspace_bytes = solver.workspace_bytes(p, device);
  result.detail = solver.detail(p, device);
  MemoryBudget(device)
      .device("workspace of " + result.solver, result.workspace_bytes)
      .check("problem " + p.key());
  const memory::Buffer ws = memory::allocate(stream, result.workspace_bytes);
  dnn::ConvArgs args = dnn::ConvArgs::from(data.args);
  args.workspace = ws.data();
  args.workspace_bytes = result.workspace_bytes;
  if (options.prepared && p.direction == dnn::ConvDirection::forward) {
    args.prepared = std::make_shared<dnn::PreparedWeights>();
  }
  const std::size_t out_bytes = data.output.desc.bytes();

  if (ref != nullptr) {
    // 0xFF bytes are NaN in f32, f16 and bf16: an element the solver does not write fails.
    stream.memset(data.output_ptr, 0xff, out_bytes);
    solver.run(stream, p, args);
    std::vector<std::byte> got(out_bytes);
    stream.copy_d2h(got.data(), data.output_ptr, out_bytes);
    stream.synchronize();
    const dnn::Comparison c =
        dnn::compare_outputs(p.dtype, got.data(), ref->data(), data.output.desc.elements(),
                             options.tolerance > 0 ? options.tolerance : dnn::conv_tolerance(p));
    result.verified = c.passed;
    result.max_rel_err = c.max_rel_err;
    result.verify_summary = c.summary;
  }

  for (int i = 0; i < options.warmup; ++i) solver.run(stream, p, args);
  // One warm call sizes the samples: each is a batch of back-to-back calls (~1 ms) divided by its
  // size, as the PyTorch peer (bench/peer_conv.py) and the tuner time.
  runtime::Event sizing_start(device), sizing_stop(device);
  sizing_start.record(stream);
  solver.run(stream, p, args);
  sizing_stop.record(stream);
  sizing_stop.synchronize();
  result.batch = batch_for(sizing_stop.elapsed_ms_since(sizing_start));
  // At most kPending samples are in flight: the oldest is read before another is queued, so the
  // events held (and the memory) stay bounded however many iterations are asked for.
  constexpr std::size_t kPending = 64;
  std::deque<std::pair<runtime::Event, runtime::Event>> pending;  // deque: events never move once recorded
  std::vector<double> times;
  auto read_oldest = [&] {
    auto& [start, stop] = pending.front();
    stop.synchronize();
    times.push_back(stop.elapsed_ms_since(start) / result.batch);
    pending.pop_front();
  };
  for (int i = 0; i < options.iterations; ++i) {
    if (pending.size() == kPending) read_oldest();
    auto& [start, stop] = pending.emplace_back(runtime::Event(device), runtime::Event(device));
    start.record(stream);
    for (int b = 0; b < result.batch; ++b) solver.run(stream, p, args);
    stop.record(stream);
  }
  while (!pending.empty()) read_oldest();
  stream.synchronize();
  result.ms = median(times);
  const double seconds = result.ms * 1e-3;
  result.tflops = seconds > 0 ? p.flops() / seconds / 1e12 : 0;
  result.gbps = seconds > 0 ? p.min_bytes() / seconds / 1e9 : 0;
}

}  // namespace

void check_conv_bench_memory(const runtime::Device& device, const dnn::ConvProblem& p,
                             const ConvBenchOptions& options) {
  const std::size_t x_bytes = p.x_desc().bytes(), w_bytes = p.w_desc().bytes(), y_bytes = p.y_desc().bytes();
  MemoryBudget budget(device);
  budget.conv_tensors(p).host("host x", x_bytes).host("host w", w_bytes);
  if (options.verify) budget.host("reference y", y_bytes).host("y read back", y_bytes);
  budget.check("problem " + p.key());
}

ConvBenchProblem bench_conv_problem(runtime::Stream& stream, const dnn::ConvProblem& p, std::string tag,
                                    const std::vector<const dnn::ConvSolver*>& solvers,
                                    const ConvBenchOptions& options) {
  if (options.iterations < 1) {
    throw Error(Status::invalid_argument,
                "-i " + std::to_string(options.iterations) + ": need at least 1 iteration");
  }
  p.validate();
  ConvBenchProblem out{p, std::move(tag), {}, {}};
  const runtime::Device& device = stream.device();
  std::vector<const dnn::ConvSolver*> runnable;
  for (const dnn::ConvSolver* s : solvers) {
    // check_any: it also refuses a fused epilogue for the solvers that do not implement one.
    const dnn::Applicability a = s->check_any(dnn::ProblemRef::of(p), device);
    if (a) {
      runnable.push_back(s);
    } else {
      out.skipped.push_back({std::string(s->name()), a.reason});
    }
  }
  if (runnable.empty()) return out;

  check_conv_bench_memory(device, p, options);
  std::uint64_t seed = fnv1a64(p.key());
  const std::vector<dnn::TensorArg> tensors = p.tensors();
  std::vector<std::vector<std::byte>> inputs(tensors.size());
  DeviceData data;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const dnn::TensorArg& t = tensors[i];
    data.buffers.push_back(memory::allocate(stream, t.desc.bytes()));
    data.args.set(t.id, data.buffers.back().data());
    if (t.output) {
      data.output = t;
      data.output_ptr = data.buffers.back().data();
    } else {
      inputs[i] = dnn::random_tensor(p.dtype, t.desc.elements(), seed++);
      stream.copy_h2d(data.buffers.back().data(), inputs[i].data(), inputs[i].size());
    }
  }
  std::vector<std::byte> ref;
  if (options.verify) {
    ref.resize(data.output.desc.bytes());
    reference(p, inputs, tensors, ref);
  }
  stream.synchronize();  // the host inputs may go out of scope on an error path below

  for (const dnn::ConvSolver* s : runnable) {
    ConvBenchResult result;
    result.solver = std::string(s->name());
    try {
      measure(stream, p, *s, data, options.verify ? &ref : nullptr, options, result);
    } catch (const std::exception& e) {
      result.error = e.what();
      try {
        stream.synchronize();  // let the next solver start from a quiet stream
      } catch (const std::exception&) {
        // Already reported as this solver's error.
      }
    }
    out.results.push_back(std::move(result));
  }
  return out;
}

}  // namespace galley::cli
