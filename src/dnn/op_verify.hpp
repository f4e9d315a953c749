// Checking any op's solver against the cpu backend's reference solver of that op, on seeded random
// inputs with poisoned outputs: the one judge that `galley bench <op> -V 1` and the solver tests
// share. Internal to libgalley, its tests and the CLI.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "galley/dnn/problem.hpp"
#include "galley/dnn/solver.hpp"
#include "galley/memory/buffer.hpp"
#include "galley/runtime/stream.hpp"

namespace galley::dnn {

/// A problem's tensors on one device, by role, with the host data of its inputs (and of outputs
/// the call also reads); pure outputs have no host data.
struct OpTensors {
  std::vector<TensorArg> args;
  std::vector<memory::Buffer> buffers;
  std::vector<std::vector<std::byte>> host;
  OpArgs op_args;
};

/// Allocates the tensors on `stream`'s device and makes their host data from `seed` onwards, one
/// seed per tensor, by each tensor's Fill (integer tensors are zeros). The same problem and seed
/// give the same bytes on every device.
OpTensors make_op_tensors(runtime::Stream& stream, ProblemRef problem, std::uint64_t seed);
/// The seed bench and tests use: the hash of the problem's key.
std::uint64_t default_op_seed(ProblemRef problem);

/// Enqueues the copy of the host data to the device and poisons the pure outputs with 0xFF bytes
/// (NaN in f32, f16 and bf16), so an element a solver leaves unwritten fails the comparison.
void load_op_tensors(runtime::Stream& stream, OpTensors& tensors);

/// What the cpu backend's first reference solver that accepts `problem` writes into each tensor,
/// by index into problem.tensors() (empty for inputs). Throws Error(unsupported) naming the op when
/// no reference accepts it.
std::vector<std::vector<std::byte>> reference_op_outputs(ProblemRef problem, std::uint64_t seed);

/// The verdict over every output of one call.
struct OpVerification {
  bool passed = false;
  double max_rel_err = 0;  ///< the worst float output's (NaN when one held NaN)
  std::string summary;     ///< "dst: max_rel_err 1e-07 ...; indices: identical"
};

/// Loads the tensors, runs `choice` once (workspace from the caching allocator), reads every output
/// back and compares it with `reference`: floats by compare_outputs() against `tolerance`, integers
/// exactly.
OpVerification verify_op(runtime::Stream& stream, ProblemRef problem, const Choice& choice, OpTensors& tensors,
                         const std::vector<std::vector<std::byte>>& reference, double tolerance);

/// The whole check for a test: tensors on `device`, the reference, one verified run.
/// `tolerance` <= 0: problem.tolerance().
OpVerification check_against_reference(const runtime::Device& device, ProblemRef problem, const SolverBase& solver,
                                        double tolerance = 0);

}  // namespace galley::dnn
