#include "galley/model/executor.hpp"

#include <map>
#include <optional>
#include <set>

#include "galley/core/error.hpp"
#include "dnn/dispatch.hpp"
#include "galley/memory/device_memory.hpp"
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

struct Executor::Impl {
  Graph graph;
  runtime::Device device;
  ExecutorOptions options;
  std::vector<detail::LoweredNode> lowered;
  std::map<std::string, Tensor> device_constants;
  std::map<std::string, std::size_t> last_reader;  // value -> index of the last node reading it
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
  for (const std::string& name : m.graph.inputs) graph_ctx.desc(m.graph.value(name), name);
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
    m.lowered.push_back((*lowering)(ctx));
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
}

Executor::~Executor() = default;

const Graph& Executor::graph() const { return impl_->graph; }
const runtime::Device& Executor::device() const { return impl_->device; }

std::map<std::string, Tensor> Executor::run(runtime::Stream& stream, const std::map<std::string, Tensor>& inputs,
                                             const RunOptions& options, RunReport* report) {
  Impl& m = *impl_;
  if (stream.device() != m.device) {
    throw Error(Status::invalid_argument, "stream of " + stream.device().name() + " given to an executor of " + m.device.name());
  }
  // A value's tensor and, for a view, the tensor whose storage it shares (kept alive with it).
  struct Held {
    Tensor tensor;
    Tensor owner;
  };
  std::map<std::string, Held> values;
  for (const std::string& name : m.graph.inputs) {
    const auto it = inputs.find(name);
    if (it == inputs.end()) throw Error(Status::invalid_argument, "graph input '" + name + "' was not given");
    const detail::LoweringContext ctx{m.graph, Node{}, m.device};
    const dnn::TensorDesc want = ctx.desc(m.graph.value(name), name);
    if (it->second.desc().dtype != want.dtype || it->second.desc().dims != want.dims || it->second.desc().rank != want.rank) {
      throw Error(Status::invalid_argument, "graph input '" + name + "' must be " + want.to_string() + ", got " + it->second.to_string());
    }
    if (it->second.device() != m.device) {
      throw Error(Status::invalid_argument, "graph input '" + name + "' is on " + it->second.device().name() + ", not " + m.device.name());
    }
    values[name] = {it->second, {}};
  }
  for (const auto& [name, tensor] : inputs) {
    if (values.count(name) == 0) throw Error(Status::invalid_argument, "'" + name + "' is not an input of the graph");
  }
  const std::set<std::string> outputs(m.graph.outputs.begin(), m.graph.outputs.end());
  std::optional<dnn::detail::ReferenceSolversOnly> reference;
  if (m.options.reference) reference.emplace();
  std::size_t runnable = 0, done = 0;
  for (const auto& low : m.lowered) runnable += low.run ? 1 : 0;
  if (report != nullptr) {
    *report = {};
    stream.synchronize();
    memory::reset_peak_memory_stats(m.device);
  }
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
      for (std::size_t o = 0; o < node.outputs.size(); ++o) {
        if (node.outputs[o].empty() || o >= low.output_descs.size()) continue;
        produced[o] = Tensor::empty(stream, low.output_descs[o]);
      }
      for (Tensor& t : produced) ctx.outputs.push_back(&t);
      std::optional<runtime::Event> start, stop;
      if (options.time_layers) {
        start.emplace(m.device);
        stop.emplace(m.device);
        start->record(stream);
      }
      low.run(ctx);
      if (report != nullptr) {
        double ms = 0;
        if (options.time_layers) {
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
        if (!node.outputs[o].empty()) values[node.outputs[o]] = {produced[o], {}};
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
      out[name] = v->second.tensor;
    } else if (const auto c = m.graph.constants.find(name); c != m.graph.constants.end()) {
      out[name] = to_device(stream, c->second);
    } else {
      throw Error(Status::internal, "graph output '" + name + "' was not produced");
    }
  }
  stream.synchronize();
  if (report != nullptr) report->peak_bytes = static_cast<std::size_t>(memory::memory_stats(m.device).allocated_bytes.all.peak);
  return out;
}

}  // namespace galley::model
