#include "run_passes.hpp"

#include <cstdio>

#include "galley/core/dtype.hpp"
#include "galley/core/error.hpp"
#include "table.hpp"

namespace galley::cli {

void add_pass_flags(CLI::App& cmd, PassFlags& flags) {
  std::string names;
  for (const std::string& n : model::pass_names()) names += (names.empty() ? "" : ", ") + n;
  cmd.add_option("--dtype", flags.dtype,
                 "compute in f32, f16 or bf16 (inputs and outputs stay f32; default f32)");
  cmd.add_option("--layout", flags.layout, "auto (NHWC for f16/bf16 on a GPU), nchw or nhwc (default auto)");
  cmd.add_option("--no-pass", flags.disabled, "turn a graph pass off (repeatable): " + names);
}

model::PassOptions pass_options(const PassFlags& flags, const runtime::Device& device) {
  model::PassOptions o;
  for (const std::string& name : flags.disabled) {
    model::check_pass_name(name);
    o.disabled.insert(name);
  }
  const DType dtype = parse_dtype(flags.dtype);
  if (dtype == DType::f16) {
    o.dtype = model::ElemType::f16;
  } else if (dtype == DType::bf16) {
    o.dtype = model::ElemType::bf16;
  } else if (dtype != DType::f32) {
    throw Error(Status::invalid_argument, "--dtype " + flags.dtype + " (valid: f32, f16, bf16)");
  }
  if (flags.layout == "auto") {
    o.layout = model::LayoutChoice::automatic;
  } else if (flags.layout == "nchw") {
    o.layout = model::LayoutChoice::nchw;
  } else if (flags.layout == "nhwc") {
    o.layout = model::LayoutChoice::nhwc;
  } else {
    throw Error(Status::invalid_argument, "--layout " + flags.layout + " (valid: auto, nchw, nhwc)");
  }
  o.gpu = !device.is_cpu();
  return o;
}

double check_tolerance(const model::PassOptions& options, model::ElemType data_type) {
  double tol = data_type == model::ElemType::f32 ? 1e-4 : 1e-2;
  const bool converted = options.disabled.count("dtype-conversion") == 0 && options.dtype.has_value();
  if (converted && *options.dtype == model::ElemType::f16) tol = std::max(tol, 1e-2);
  if (converted && *options.dtype == model::ElemType::bf16) tol = std::max(tol, 5e-2);
  return tol;
}

nlohmann::json passes_json(const model::PassReport& report) {
  nlohmann::json out = nlohmann::json::array();
  for (const model::PassRecord& r : report.passes) {
    nlohmann::json j = {{"pass", r.name},
                        {"ran", r.ran},
                        {"rewrites", r.rewrites},
                        {"nodes_before", r.nodes_before},
                        {"nodes_after", r.nodes_after},
                        {"constants_before", r.constants_before},
                        {"constants_after", r.constants_after}};
    if (!r.note.empty()) j["note"] = r.note;
    out.push_back(j);
  }
  return out;
}

void print_passes(const model::PassReport& report) {
  Table table({"pass", "ran", "rewrites", "nodes", "constants"});
  for (const model::PassRecord& r : report.passes) {
    table.add({r.name, r.ran ? "yes" : "no: " + r.note, std::to_string(r.rewrites),
               std::to_string(r.nodes_before) + " -> " + std::to_string(r.nodes_after),
               std::to_string(r.constants_before) + " -> " + std::to_string(r.constants_after)});
  }
  table.print();
}

}  // namespace galley::cli
