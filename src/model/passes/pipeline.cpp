// The pass pipeline: names, order, what turns each on, and the record of what each changed.
#include <functional>

#include "galley/core/error.hpp"
#include "galley/model/passes.hpp"
#include "model/passes/graph_edit.hpp"

namespace galley::model {
namespace {

struct Pass {
  const char* name;
  /// Why the pass does not apply under these options, or "" when it runs.
  std::function<std::string(const PassOptions&)> skip;
  std::function<int(Graph&, const PassOptions&)> run;
};

bool converts(const PassOptions& o) { return o.dtype && *o.dtype != ElemType::f32; }

bool wants_nhwc(const PassOptions& o) {
  if (o.layout == LayoutChoice::automatic) return o.gpu && converts(o);
  return o.layout == LayoutChoice::nhwc;
}

const std::vector<Pass>& pipeline() {
  static const std::vector<Pass> passes = {
      {"constant-folding", nullptr, [](Graph& g, const PassOptions&) { return fold_constants(g); }},
      {"batch-norm-folding", nullptr, [](Graph& g, const PassOptions&) { return fold_batch_norm(g); }},
      {"conv-fusion", nullptr, [](Graph& g, const PassOptions&) { return fuse_conv_epilogues(g); }},
      {"dead-node-removal", nullptr, [](Graph& g, const PassOptions&) { return remove_dead_nodes(g); }},
      {"dtype-conversion", [](const PassOptions& o) { return converts(o) ? "" : "no dtype asked (f32)"; },
       [](Graph& g, const PassOptions& o) { return convert_dtype(g, *o.dtype); }},
      {"layout",
       [](const PassOptions& o) { return wants_nhwc(o) ? "" : "NCHW here (NHWC is for f16/bf16 on a GPU)"; },
       [](Graph& g, const PassOptions&) { return use_nhwc(g); }},
  };
  return passes;
}

std::string valid_names() {
  std::string out;
  for (const Pass& p : pipeline()) out += (out.empty() ? "" : ", ") + std::string(p.name);
  return out;
}

}  // namespace

std::vector<std::string> pass_names() {
  std::vector<std::string> out;
  for (const Pass& p : pipeline()) out.emplace_back(p.name);
  return out;
}

void check_pass_name(const std::string& name) {
  for (const Pass& p : pipeline()) {
    if (name == p.name) return;
  }
  throw Error(Status::invalid_argument, "unknown pass '" + name + "' (valid: " + valid_names() + ")");
}

PassReport run_passes(Graph& graph, const PassOptions& options) {
  for (const std::string& name : options.disabled) check_pass_name(name);
  if (options.dtype && *options.dtype != ElemType::f32 && *options.dtype != ElemType::f16 &&
      *options.dtype != ElemType::bf16) {
    throw Error(Status::invalid_argument,
                std::string("pass dtype ") + to_string(*options.dtype) + " (valid: f32, f16, bf16)");
  }
  PassReport report;
  for (const Pass& pass : pipeline()) {
    PassRecord r;
    r.name = pass.name;
    r.nodes_before = r.nodes_after = graph.nodes.size();
    r.constants_before = r.constants_after = graph.constants.size();
    if (options.disabled.count(pass.name) != 0) {
      r.note = "turned off";
    } else if (const std::string why = pass.skip ? pass.skip(options) : ""; !why.empty()) {
      r.note = why;
    } else {
      r.ran = true;
      r.rewrites = pass.run(graph, options);
      r.nodes_after = graph.nodes.size();
      r.constants_after = graph.constants.size();
    }
    report.passes.push_back(std::move(r));
  }
  passes::refresh(graph);
  return report;
}

}  // namespace galley::model
