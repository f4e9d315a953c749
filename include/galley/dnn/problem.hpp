// What every op problem is (the OpProblem concept), and its type-erased form, through which the
// registry, the dispatcher, the tuner and the find-db handle every op kind with one piece of code.
#pragma once

#include <concepts>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "galley/dnn/op.hpp"
#include "galley/runtime/device.hpp"

namespace galley::dnn {

/// An op problem: a value type with a kind, validation that names the bad field, a canonical key
/// that parse_key() reads back exactly, a hash of every field, the tensors a call needs, the
/// largest relative error (against the reference, as compare_outputs measures it) a correct solver
/// may have, and its arithmetic (flops) and the bytes that must move (every input read once, every
/// output written once), which benchmarks turn into TFLOP/s and GB/s.
/// `P::Args` is what its solvers' run() takes, built from the role-keyed OpArgs.
template <class P>
concept OpProblem = std::regular<P> && requires(const P& p, std::string_view text, const OpArgs& args,
                                                const runtime::Device& device) {
  { P::kKind } -> std::convertible_to<OpKind>;
  typename P::Args;
  { P::Args::from(args) } -> std::same_as<typename P::Args>;
  p.validate();
  { p.key() } -> std::same_as<std::string>;
  { P::parse_key(text) } -> std::same_as<P>;
  { p.hash() } -> std::same_as<std::size_t>;
  { p.tensors() } -> std::same_as<std::vector<TensorArg>>;
  { p.bench_command(device, text) } -> std::same_as<std::string>;
  { p.tolerance() } -> std::same_as<double>;
  { p.flops() } -> std::same_as<double>;
  { p.min_bytes() } -> std::same_as<double>;
};

/// The operations on a problem of one kind, as plain function pointers over `const void*`.
struct ProblemOps {
  OpKind kind;
  std::string (*key)(const void* p);
  std::size_t (*hash)(const void* p);
  bool (*equal)(const void* a, const void* b);
  void (*validate)(const void* p);
  std::vector<TensorArg> (*tensors)(const void* p);
  std::string (*bench_command)(const void* p, const runtime::Device& device, std::string_view solver);
  std::shared_ptr<const void> (*clone)(const void* p);
  std::shared_ptr<const void> (*parse_key)(std::string_view key);
  double (*tolerance)(const void* p);
  double (*flops)(const void* p);
  double (*min_bytes)(const void* p);
};

template <OpProblem P>
const ProblemOps& problem_ops() {
  static const ProblemOps ops{
      P::kKind,
      [](const void* p) { return static_cast<const P*>(p)->key(); },
      [](const void* p) { return static_cast<const P*>(p)->hash(); },
      [](const void* a, const void* b) { return *static_cast<const P*>(a) == *static_cast<const P*>(b); },
      [](const void* p) { static_cast<const P*>(p)->validate(); },
      [](const void* p) { return static_cast<const P*>(p)->tensors(); },
      [](const void* p, const runtime::Device& d, std::string_view s) {
        return static_cast<const P*>(p)->bench_command(d, s);
      },
      [](const void* p) -> std::shared_ptr<const void> { return std::make_shared<const P>(*static_cast<const P*>(p)); },
      [](std::string_view key) -> std::shared_ptr<const void> { return std::make_shared<const P>(P::parse_key(key)); },
      [](const void* p) { return static_cast<const P*>(p)->tolerance(); },
      [](const void* p) { return static_cast<const P*>(p)->flops(); },
      [](const void* p) { return static_cast<const P*>(p)->min_bytes(); },
  };
  return ops;
}

/// A non-owning, type-erased reference to a problem of any kind.
struct ProblemRef {
  const void* problem = nullptr;
  const ProblemOps* ops = nullptr;

  template <OpProblem P>
  static ProblemRef of(const P& p) {
    return {&p, &problem_ops<P>()};
  }
  OpKind kind() const { return ops->kind; }
  std::string key() const { return ops->key(problem); }
  std::size_t hash() const { return ops->hash(problem); }
  void validate() const { ops->validate(problem); }
  std::vector<TensorArg> tensors() const { return ops->tensors(problem); }
  double tolerance() const { return ops->tolerance(problem); }
  double flops() const { return ops->flops(problem); }
  double min_bytes() const { return ops->min_bytes(problem); }
  std::string bench_command(const runtime::Device& device, std::string_view solver) const {
    return ops->bench_command(problem, device, solver);
  }
  template <OpProblem P>
  const P& as() const {
    return *static_cast<const P*>(problem);
  }
};

/// An owned problem of any kind (what a cache or a parsed find-db key holds).
struct AnyProblem {
  std::shared_ptr<const void> problem;
  const ProblemOps* ops = nullptr;

  static AnyProblem copy_of(ProblemRef ref) { return {ref.ops->clone(ref.problem), ref.ops}; }
  ProblemRef ref() const { return {problem.get(), ops}; }
};

/// The operations of problems of `kind`; throws Error(unsupported) for a kind whose problem type
/// is not in this build.
const ProblemOps& problem_ops_for(OpKind kind);
/// Makes problem_ops_for(P::kKind) answer problem_ops<P>(). Each problem type calls it once, from a
/// static initialiser in its own source file; returns true.
bool register_problem_ops(const ProblemOps& ops);
/// Parses any problem key ("conv-F-..."), dispatching on its kind; throws Error(invalid_argument)
/// naming the key when malformed.
AnyProblem parse_problem_key(std::string_view key);

}  // namespace galley::dnn
