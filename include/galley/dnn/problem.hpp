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
/// that parse_key() reads back exactly, a hash of every field, and the tensors a call needs.
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

/// The operations of the kind a key names; throws Error(invalid_argument) for an unknown kind.
const ProblemOps& problem_ops_for(OpKind kind);
/// Parses any problem key ("conv-F-..."), dispatching on its kind; throws Error(invalid_argument)
/// naming the key when malformed.
AnyProblem parse_problem_key(std::string_view key);

}  // namespace galley::dnn
