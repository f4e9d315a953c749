// Plain C++ in a .cu file: the cuda and hip plugins both compile src/backends/gpu/*.cu.
#include <vector>

#include "backends/gpu/op_lists.hpp"

namespace galley::backends::gpu {
namespace {

std::vector<ListRegistrar>& registrars() {
  static std::vector<ListRegistrar> list;
  return list;
}

}  // namespace

bool add_list_registrar(ListRegistrar registrar) {
  registrars().push_back(registrar);
  return true;
}

void register_op_lists() {
  for (ListRegistrar r : registrars()) r();
}

}  // namespace galley::backends::gpu
