#include "galley/model/executor.hpp"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "galley/core/error.hpp"
#include "galley/core/log.hpp"
#include "dnn/dispatch.hpp"
#include "galley/memory/device_memory.hpp"
#include "memory/caching_allocator.hpp"
#include "model/lowering.hpp"

namespace galley::model {
namespace detail {

void LoweringContext::fail(const std::string& why) const {
  throw Error(Status::unsupported, node.label() + ": " + why);
}

const ValueInfo& LoweringContext::input(std::size_t i) const {
  if (!has_input(i)) fail("input " + std::to_string(i) + " is missing");
  return graph.value(node.inputs[i]);
}

const ValueInfo& LoweringContext::output(std::size_t i) const {
  if (i >= node.outputs.size() || node.outputs[i].empty()) fail("output " + std::to_string(i) + " is missing");
  return graph.value(node.outputs[i]);
}

const HostTensor* LoweringContext::constant(std::size_t i) const {
  if (!has_input(i)) return nullptr;
  const auto it = graph.constants.find(node.inputs[i]);
  return it == graph.constants.end() ? nullptr : &it->second;
}

std::optional<DType> device_dtype(ElemType type) {
  switch (type) {
    case ElemType::f32: return DType::f32;
    case ElemType::f16: return DType::f16;
    case ElemType::bf16: return DType::bf16;
    case ElemType::i32: return DType::i32;
    case ElemType::i8: return DType::i8;
    default: return std::nullopt;
  }
}

dnn::TensorDesc LoweringContext::desc(const ValueInfo& value, const std::string& name) const {
  const auto dtype = device_dtype(value.type);
  if (!dtype) fail("value '" + name + "' is " + to_string(value.type) + ", which the op layer does not store on a device");
  if (!value.shape_known) fail("value '" + name + "' has no static shape");
  if (value.shape.size() > static_cast<std::size_t>(dnn::kMaxRank)) {
    fail("value '" + name + "' has rank " + std::to_string(value.shape.size()) + "; at most " + std::to_string(dnn::kMaxRank) + " runs");
  }
  if (value.shape.empty()) return dnn::TensorDesc::contiguous(*dtype, {1});
  return dnn::TensorDesc::contiguous(*dtype, value.shape.data(), static_cast<int>(value.shape.size()));
}

namespace {
std::map<std::string, Lowering>& lowerings() {
  static std::map<std::string, Lowering> table;
  return table;
}
}  // namespace

bool register_lowering(const std::string& op_type, Lowering lowering) {
  lowerings()[op_type] = std::move(lowering);
  return true;
}

const Lowering* find_lowering(const std::string& op_type) {
  const auto it = lowerings().find(op_type);
  return it == lowerings().end() ? nullptr : &it->second;
}

}  // namespace detail

const char* to_string(RunMode mode) { return mode == RunMode::eager ? "eager" : "graph replay"; }

namespace {

/// One whole run captured in graph mode. Members die in reverse order: the graph and the fixed
/// buffers go back to the pool before the pool itself is released to the general cache.
struct CapturedRun {
  memory::PrivatePool pool;
  std::map<std::string, Tensor> inputs;   ///< fixed buffers the graph reads, by graph input
  std::map<std::string, Tensor> outputs;  ///< fixed buffers the graph writes (or constants), by graph output
  std::optional<runtime::Graph> graph;
  RunReport report;  ///< of the captured run: layers, peak
};

// `tensor` as a tensor that keeps its storage alive: itself, or for a view of `owner`'s storage (a
// Reshape's output, say) a view sharing the owner's ownership, or a copy where no view can.
Tensor owning(runtime::Stream& stream, const Tensor& tensor, const Tensor& owner) {
  if (!owner.defined() || tensor.owns_storage()) return tensor;
  const dnn::TensorDesc& d = tensor.desc();
  if (tensor.data() == owner.data() && d.is_contiguous() && owner.desc().is_contiguous()) {
    return owner.reshaped(std::vector<std::int64_t>(d.dims.begin(), d.dims.begin() + d.rank));
  }
  Tensor copy = Tensor::empty(stream, d);
  stream.copy_d2d(copy.data(), tensor.data(), d.bytes());
  return copy;
}

}  // namespace

struct Executor::Impl {
  Graph graph;
  runtime::Device device;
  ExecutorOptions options;
  std::vector<detail::LoweredNode> lowered;
  std::map<std::string, Tensor> device_constants;
  std::map<std::string, std::size_t> last_reader;  // value -> index of the last node reading it
  /// Per node: the input whose storage output 0 takes over (in place), or -1 (see plan_in_place).
  std::vector<int> inplace_input;
  int eager_runs = 0;
  std::unique_ptr<CapturedRun> captured;

  /// Fills inplace_input: node i writes output 0 into the storage of an input the lowering allows
  /// (LoweredNode::inplace_inputs) when nothing reads that storage after node i under any name (the
  /// value itself, a view of it, a value an earlier in-place node wrote into it), the storage is
  /// neither a graph input's nor a constant's, no graph output lives in it, no other input of the
  /// node reads it under another name, and the input's descriptor is output 0's exactly.
  void plan_in_place();
  /// The input's descriptor as the graph declares it; Error naming a missing, extra or mismatched
  /// input (and, when `exact`, one whose strides differ: a replay copies the bytes as they are).
  void check_inputs(const std::map<std::string, Tensor>& inputs, bool exact) const;
  /// Enqueues every node on `stream` and returns the graph's outputs. While `capturing`, nothing
  /// may wait for the stream: no timing, no constant outputs (the caller makes them), and a node
  /// that fails is named as the one that could not be captured.
  std::map<std::string, Tensor> run_nodes(runtime::Stream& stream, const std::map<std::string, Tensor>& inputs,
                                          const RunOptions& options, RunReport* report, bool capturing);
  std::map<std::string, Tensor> run_eager(runtime::Stream& stream, const std::map<std::string, Tensor>& inputs,
                                          const RunOptions& options, RunReport* report);
  void capture(runtime::Stream& stream, const RunOptions& options);
  std::map<std::string, Tensor> replay(runtime::Stream& stream, const std::map<std::string, Tensor>& inputs,
                                       RunReport* report);
};



Tensor to_device(runtime::Stream& stream, const HostTensor& host) {
  const auto dtype = detail::device_dtype(host.type);
  if (!dtype) throw Error(Status::unsupported, std::string("a ") + to_string(host.type) + " tensor has no device storage");
  const dnn::TensorDesc desc = host.shape.empty()
                                   ? dnn::TensorDesc::contiguous(*dtype, {1})
                                   : dnn::TensorDesc::contiguous(*dtype, host.shape.data(), static_cast<int>(host.shape.size()));
  Tensor t = Tensor::empty(stream, desc);
  t.copy_from_host(stream, host.data.data(), host.data.size());
  return t;
}

HostTensor to_host(runtime::Stream& stream, const Tensor& tensor) {
  HostTensor h;
  switch (tensor.dtype()) {
    case DType::f32: h.type = ElemType::f32; break;
    case DType::f16: h.type = ElemType::f16; break;
    case DType::bf16: h.type = ElemType::bf16; break;
    case DType::i32: h.type = ElemType::i32; break;
    case DType::i8: h.type = ElemType::i8; break;
  }
  const dnn::TensorDesc& d = tensor.desc();
  h.shape.assign(d.dims.begin(), d.dims.begin() + d.rank);
  h.data.resize(d.bytes());
  tensor.copy_to_host(stream, h.data.data(), h.data.size());
  return h;
}

Executor::Executor(Graph graph, const runtime::Device& device, ExecutorOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->graph = std::move(graph);
  impl_->device = device;
  impl_->options = options;
  Impl& m = *impl_;
  runtime::Stream stream(device);
  // Graph inputs and outputs must have device storage (a bool or int64 input cannot be fed).
  const detail::LoweringContext graph_ctx{m.graph, Node{"graph", "inputs/outputs", {}, {}, {}}, m.device};
  // A value no device could hold (a file may declare any shape) is refused here, before anything
  // is allocated or tuned.
  const std::size_t device_bytes = device.memory_info().total;
  const auto check_fits = [&](const dnn::TensorDesc& desc, const std::string& what) {
    if (device_bytes != 0 && desc.bytes() > device_bytes) {
      throw Error(Status::out_of_memory, what + " " + desc.to_string() + " needs " + std::to_string(desc.bytes()) +
                                             " bytes; " + device.name() + " has " + std::to_string(device_bytes));
    }
  };
  for (const std::string& name : m.graph.inputs) check_fits(graph_ctx.desc(m.graph.value(name), name), "graph input '" + name + "'");
  for (const std::string& name : m.graph.outputs) graph_ctx.desc(m.graph.value(name), name);
  for (std::size_t i = 0; i < m.graph.nodes.size(); ++i) {
    const Node& node = m.graph.nodes[i];
    // Nodes folded into constants by infer_shapes() do not run.
    bool folded = !node.outputs.empty();
    for (const std::string& out : node.outputs) folded = folded && (out.empty() || m.graph.is_constant(out));
    if (folded) {
      m.lowered.emplace_back();
      continue;
    }
    const detail::Lowering* lowering = detail::find_lowering(node.op_type);
    if (lowering == nullptr) {
      throw Error(Status::unsupported, node.label() + ": op '" + node.op_type + "' has no lowering to the op layer");
    }
    const detail::LoweringContext ctx{m.graph, node, m.device};
    try {
      m.lowered.push_back((*lowering)(ctx));
    } catch (const Error& e) {
      // An op-layer problem's validation names its field, not the node it came from.
      const std::string what = e.what();
      if (what.find(node.label()) != std::string::npos) throw;
      throw Error(e.status(), node.label() + ": " + what);
    }
    for (std::size_t o = 0; o < m.lowered.back().output_descs.size() && o < node.outputs.size(); ++o) {
      check_fits(m.lowered.back().output_descs[o], node.label() + ": output '" + node.outputs[o] + "'");
    }
    for (const std::string& in : node.inputs) {
      if (in.empty()) continue;
      m.last_reader[in] = i;
      const auto c = m.graph.constants.find(in);
      if (c != m.graph.constants.end() && m.device_constants.count(in) == 0 && detail::device_dtype(c->second.type)) {
        m.device_constants.emplace(in, to_device(stream, c->second));
      }
    }
  }
  stream.synchronize();
  m.plan_in_place();
}

void Executor::Impl::plan_in_place() {
  inplace_input.assign(graph.nodes.size(), -1);
  if (!options.in_place) return;
  const std::set<std::string> graph_outputs(graph.outputs.begin(), graph.outputs.end());
  // Every value's storage, named by the value that allocated it; its facts as the plan goes.
  struct Storage {
    std::size_t last_read = 0;  // the last node reading any value that lives in it
    bool read = false;
    bool pinned = false;  // a graph input's or a graph output's: never overwritten
  };
  std::map<std::string, std::string> root;
  std::map<std::string, Storage> storage;
  std::map<std::string, dnn::TensorDesc> descs;
  const auto live_in = [&](const std::string& value, const std::string& r) {
    root[value] = r;
    Storage& s = storage[r];
    if (const auto last = last_reader.find(value); last != last_reader.end()) {
      s.last_read = s.read ? std::max(s.last_read, last->second) : last->second;
      s.read = true;
    }
    s.pinned = s.pinned || graph_outputs.count(value) != 0;
  };
  for (const std::string& name : graph.inputs) {
    live_in(name, name);
    storage[name].pinned = true;
  }
  for (std::size_t i = 0; i < graph.nodes.size(); ++i) {
    const Node& node = graph.nodes[i];
    const detail::LoweredNode& low = lowered[i];
    if (!low.run && low.alias_input < 0) continue;  // folded
    if (low.alias_input >= 0) {
      const std::string& src = node.inputs[static_cast<std::size_t>(low.alias_input)];
      const auto r = root.find(src);
      // A view of a constant lives in the constant, which is never overwritten.
      live_in(node.outputs[0], r != root.end() ? r->second : src);
      if (r == root.end()) storage[src].pinned = true;
      descs[node.outputs[0]] = low.output_descs.at(0);
      continue;
    }
    for (const int k : low.inplace_inputs) {
      const std::string& x = node.inputs.at(static_cast<std::size_t>(k));
      const auto r = root.find(x);
      if (x.empty() || r == root.end() || graph.is_constant(x)) continue;
      const Storage& s = storage.at(r->second);
      if (s.pinned || !s.read || s.last_read != i) continue;
      const auto d = descs.find(x);
      if (d == descs.end() || low.output_descs.empty() || d->second != low.output_descs[0]) continue;
      bool shared = false;
      for (const std::string& other : node.inputs) {
        const auto o = root.find(other);
        shared = shared || (other != x && o != root.end() && o->second == r->second);
      }
      if (shared) continue;
      inplace_input[i] = k;
      break;
    }
    for (std::size_t o = 0; o < node.outputs.size(); ++o) {
      if (node.outputs[o].empty()) continue;
      live_in(node.outputs[o], o == 0 && inplace_input[i] >= 0 ? root.at(node.inputs[static_cast<std::size_t>(inplace_input[i])])
                                                              : node.outputs[o]);
      if (o < low.output_descs.size()) descs[node.outputs[o]] = low.output_descs[o];
    }
  }
}

Executor::~Executor() = default;

const Graph& Executor::graph() const { return impl_->graph; }
const runtime::Device& Executor::device() const { return impl_->device; }

void Executor::Impl::check_inputs(const std::map<std::string, Tensor>& inputs, bool exact) const {
  for (const std::string& name : graph.inputs) {
    const auto it = inputs.find(name);
    if (it == inputs.end()) throw Error(Status::invalid_argument, "graph input '" + name + "' was not given");
    const detail::LoweringContext ctx{graph, Node{}, device};
    const dnn::TensorDesc want = ctx.desc(graph.value(name), name);
    const dnn::TensorDesc& got = it->second.desc();
    if (got.dtype != want.dtype || got.dims != want.dims || got.rank != want.rank) {
      throw Error(Status::invalid_argument, "graph input '" + name + "' must be " + want.to_string() + ", got " + it->second.to_string());
    }
    if (exact && got != want) {
      throw Error(Status::invalid_argument, "graph input '" + name + "' must be row-major " + want.to_string() +
                                                " to be copied into the captured graph's input, got " + it->second.to_string());
    }
    if (it->second.device() != device) {
      throw Error(Status::invalid_argument, "graph input '" + name + "' is on " + it->second.device().name() + ", not " + device.name());
    }
  }
  for (const auto& [name, tensor] : inputs) {
    if (std::find(graph.inputs.begin(), graph.inputs.end(), name) == graph.inputs.end()) {
      throw Error(Status::invalid_argument, "'" + name + "' is not an input of the graph");
    }
  }
}

std::map<std::string, Tensor> Executor::Impl::run_nodes(runtime::Stream& stream, const std::map<std::string, Tensor>& inputs,
                                                         const RunOptions& options, RunReport* report, bool capturing) {
  Impl& m = *this;
  // A value's tensor and, for a view, the tensor whose storage it shares (kept alive with it).
  struct Held {
    Tensor tensor;
    Tensor owner;
  };
  std::map<std::string, Held> values;
  for (const std::string& name : m.graph.inputs) values[name] = {inputs.at(name), {}};
  const std::set<std::string> outputs(m.graph.outputs.begin(), m.graph.outputs.end());
  std::optional<dnn::detail::ReferenceSolversOnly> reference;
  if (m.options.reference) reference.emplace();
  std::size_t runnable = 0, done = 0;
  for (const auto& low : m.lowered) runnable += low.run ? 1 : 0;
  for (std::size_t i = 0; i < m.graph.nodes.size(); ++i) {
    const Node& node = m.graph.nodes[i];
    detail::LoweredNode& low = m.lowered[i];
    if (!low.run && low.alias_input < 0) continue;  // folded
    detail::RunContext ctx{stream, {}, {}, {}};

    for (const std::string& in : node.inputs) {
      if (in.empty()) {
        ctx.inputs.push_back(nullptr);
      } else if (const auto v = values.find(in); v != values.end()) {
        ctx.inputs.push_back(&v->second.tensor);
      } else if (const auto c = m.device_constants.find(in); c != m.device_constants.end()) {
        ctx.inputs.push_back(&c->second);
      } else {
        ctx.inputs.push_back(nullptr);  // a host-only constant, read by the lowering already
      }
    }
    std::vector<Tensor> produced(node.outputs.size());
    if (low.alias_input >= 0) {
      const Tensor* src = ctx.inputs.at(static_cast<std::size_t>(low.alias_input));
      if (src == nullptr) throw Error(Status::internal, node.label() + ": aliased input has no tensor");
      produced[0] = Tensor::wrap(m.device, low.output_descs.at(0), src->data(), src->storage_bytes());
      const auto owner = values.find(node.inputs[static_cast<std::size_t>(low.alias_input)]);
      values[node.outputs[0]] = {produced[0], owner != values.end() ? (owner->second.owner.defined() ? owner->second.owner : owner->second.tensor)
                                                                     : *src};
    } else {
      Tensor inplace_owner;
      for (std::size_t o = 0; o < node.outputs.size(); ++o) {
        if (node.outputs[o].empty() || o >= low.output_descs.size()) continue;
        if (o == 0 && m.inplace_input[i] >= 0) {
          const Held& x = values.at(node.inputs[static_cast<std::size_t>(m.inplace_input[i])]);
          if (x.tensor.desc() == low.output_descs[0] && x.tensor.storage_bytes() >= low.output_descs[0].bytes()) {
            produced[0] = x.tensor;
            inplace_owner = x.owner;
            continue;
          }
        }
        produced[o] = Tensor::empty(stream, low.output_descs[o]);
      }
      for (Tensor& t : produced) ctx.outputs.push_back(&t);
      std::optional<runtime::Event> start, stop;
      if (options.time_layers && !capturing) {
        start.emplace(m.device);
        stop.emplace(m.device);
        start->record(stream);
      }
      if (capturing) {
        try {
          low.run(ctx);
        } catch (const Error& e) {
          throw Error(e.status(), node.label() + " (" + node.op_type + ") cannot be captured into a graph: " + e.what());
        }
      } else {
        low.run(ctx);
      }
      if (report != nullptr) {
        double ms = 0;
        if (start) {
          stop->record(stream);
          stop->synchronize();
          ms = stop->elapsed_ms_since(*start);
        }
        const dnn::CallReport& r = ctx.report;
        report->layers.push_back({node.name, node.op_type, r.solver, r.source, r.tuner_hit, ms});
        report->tuned += r.source == "tuned" ? 1 : 0;
        report->hits += r.tuner_hit ? 1 : 0;
      }
      if (options.on_node) options.on_node(++done, runnable, node);
      for (std::size_t o = 0; o < node.outputs.size(); ++o) {
        if (node.outputs[o].empty()) continue;
        // An output nobody reads goes back to the allocator now, not at the end of the run.
        if (m.last_reader.count(node.outputs[o]) == 0 && outputs.count(node.outputs[o]) == 0) continue;
        values[node.outputs[o]] = {produced[o], o == 0 ? inplace_owner : Tensor{}};
      }
    }
    // Values whose last reader this was go back to the caching allocator (stream-ordered).
    for (const std::string& in : node.inputs) {
      const auto last = m.last_reader.find(in);
      if (!in.empty() && last != m.last_reader.end() && last->second == i && outputs.count(in) == 0) values.erase(in);
    }
  }
  std::map<std::string, Tensor> out;
  for (const std::string& name : m.graph.outputs) {
    if (const auto v = values.find(name); v != values.end()) {
      bool in_an_input = false;
      for (const auto& [input_name, tensor] : inputs) in_an_input = in_an_input || tensor.data() == v->second.tensor.data();
      if (in_an_input) {
        // An output that is an input, or a view of one: the caller's outputs never alias its inputs.
        const Tensor& in = v->second.tensor;
        Tensor copy = Tensor::empty(stream, in.desc());
        stream.copy_d2d(copy.data(), in.data(), in.desc().bytes());
        out[name] = copy;
      } else {
        out[name] = owning(stream, v->second.tensor, v->second.owner);
      }
    } else if (const auto c = m.graph.constants.find(name); c != m.graph.constants.end()) {
      if (!capturing) out[name] = to_device(stream, c->second);
    } else {
      throw Error(Status::internal, "graph output '" + name + "' was not produced");
    }
  }
  return out;
}

std::map<std::string, Tensor> Executor::Impl::run_eager(runtime::Stream& stream, const std::map<std::string, Tensor>& inputs,
                                                        const RunOptions& options, RunReport* report) {
  if (report != nullptr) {
    *report = {};
    stream.synchronize();
    memory::reset_peak_memory_stats(device);
  }
  auto out = run_nodes(stream, inputs, options, report, false);
  stream.synchronize();
  if (report != nullptr) report->peak_bytes = static_cast<std::size_t>(memory::memory_stats(device).allocated_bytes.all.peak);
  ++eager_runs;
  return out;
}

void Executor::Impl::capture(runtime::Stream& stream, const RunOptions& options) {
  auto c = std::make_unique<CapturedRun>();
  const detail::LoweringContext ctx{graph, Node{}, device};
  try {
    c->pool = memory::PrivatePool(memory::allocator_for(device));
  } catch (const Error& e) {
    throw Error(e.status(), std::string("graph mode on ") + device.name() + ": " + e.what());
  }
  // The captured run's peak is what the graph's memory amounts to; measured as an eager run's.
  stream.synchronize();
  memory::reset_peak_memory_stats(device);
  {
    memory::PrivatePoolScope scope(c->pool, stream);
    for (const std::string& name : graph.inputs) c->inputs[name] = Tensor::empty(stream, ctx.desc(graph.value(name), name));
    RunOptions quiet;
    quiet.on_node = options.on_node;
    stream.begin_capture();
    std::map<std::string, Tensor> outputs;
    try {
      outputs = run_nodes(stream, c->inputs, quiet, &c->report, true);
    } catch (...) {
      try {
        (void)stream.end_capture();  // discarded: nothing of it ran
      } catch (const std::exception& e) {
        log::debug(std::string("executor: ending the failed capture: ") + e.what());
      }
      throw;
    }
    try {
      c->graph.emplace(stream.end_capture());
    } catch (const Error& e) {
      throw Error(e.status(), "graph capture of " + std::to_string(graph.nodes.size()) +
                                  " nodes failed when it ended (an op's work broke the capture): " + e.what());
    }
    c->outputs = std::move(outputs);
  }
  for (const std::string& name : graph.outputs) {
    if (c->outputs.count(name) == 0) c->outputs[name] = to_device(stream, graph.constants.at(name));
  }
  stream.synchronize();
  c->report.peak_bytes = static_cast<std::size_t>(memory::memory_stats(device).allocated_bytes.all.peak);
  c->report.mode = RunMode::graph_replay;
  c->report.graph_nodes = c->graph->node_count();
  c->report.graph_pool_bytes = c->pool.reserved_bytes();
  captured = std::move(c);
}

std::map<std::string, Tensor> Executor::Impl::replay(runtime::Stream& stream, const std::map<std::string, Tensor>& inputs,
                                                     RunReport* report) {
  CapturedRun& c = *captured;
  // On every path out, an error included, the replay has finished with the graph's memory before
  // the pool can be released.
  const runtime::SynchronizeOnExit finished(stream);
  if (report != nullptr) {
    stream.synchronize();
    memory::reset_peak_memory_stats(device);
  }
  for (const std::string& name : graph.inputs) {
    Tensor& fixed = c.inputs.at(name);
    stream.copy_d2d(fixed.data(), inputs.at(name).data(), fixed.desc().bytes());
  }
  c.graph->replay(stream);
  std::map<std::string, Tensor> out;
  for (const auto& [name, fixed] : c.outputs) {
    Tensor t = Tensor::empty(stream, fixed.desc());
    stream.copy_d2d(t.data(), fixed.data(), fixed.desc().bytes());
    out[name] = std::move(t);
  }
  stream.synchronize();
  if (report != nullptr) {
    const auto peak = static_cast<std::size_t>(memory::memory_stats(device).allocated_bytes.all.peak);
    *report = c.report;
    report->peak_bytes = std::max(c.report.peak_bytes, peak);
  }
  return out;
}

std::map<std::string, Tensor> Executor::run(runtime::Stream& stream, const std::map<std::string, Tensor>& inputs,
                                            const RunOptions& options, RunReport* report) {
  Impl& m = *impl_;
  if (stream.device() != m.device) {
    throw Error(Status::invalid_argument, "stream of " + stream.device().name() + " given to an executor of " + m.device.name());
  }
  const bool graph_mode = m.options.capture && !options.time_layers;
  m.check_inputs(inputs, graph_mode);
  if (!graph_mode || (m.eager_runs == 0 && !m.captured)) {
    auto out = m.run_eager(stream, inputs, options, report);
    if (report != nullptr && m.options.capture) {
      report->note = options.time_layers ? "eager: per-layer times need an eager run" : "eager: the first run tunes before the capture";
    }
    return out;
  }
  if (!m.captured) m.capture(stream, options);
  return m.replay(stream, inputs, report);
}

}  // namespace galley::model
