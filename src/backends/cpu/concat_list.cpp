// The cpu backend's concat list: the threaded copy, then the reference. The order lives here alone.
#include "backends/cpu/datamove_solvers.hpp"
#include "dnn/ref_datamove.hpp"

namespace galley::backends::cpu {
namespace {

const bool kRegistered = [] {
  std::vector<std::unique_ptr<dnn::SolverBase>> list;
  list.push_back(make_concat_copy());
  list.push_back(dnn::make_ref_concat());
  dnn::register_solvers("cpu", dnn::OpKind::concat, std::move(list));
  return true;
}();

}  // namespace
}  // namespace galley::backends::cpu
