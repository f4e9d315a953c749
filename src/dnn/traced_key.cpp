// A per-thread cache of problem keys for the trace, keyed by the problem's hash and checked for
// equality, so two problems of one hash never share a key.
#include "dnn/traced_key.hpp"

#include <cstddef>
#include <unordered_map>
#include <utility>

namespace galley::dnn {
namespace {

// Distinct problems kept per thread; past this the cache starts over (a model has tens to hundreds).
constexpr std::size_t kKeysKept = 4096;

struct CachedKey {
  AnyProblem problem;
  profile::Text key;
};

}  // namespace

profile::Text traced_key(ProblemRef problem) {
  thread_local std::unordered_map<std::size_t, CachedKey> cache;
  const std::size_t hash = problem.hash();
  if (const auto it = cache.find(hash); it != cache.end()) {
    const AnyProblem& cached = it->second.problem;
    if (cached.ops == problem.ops && problem.ops->equal(cached.problem.get(), problem.problem))
      return it->second.key;
  }
  const profile::Text key = profile::Text::interned(problem.key());
  if (cache.size() >= kKeysKept) cache.clear();
  cache.insert_or_assign(hash, CachedKey{AnyProblem::copy_of(problem), key});
  return key;
}

}  // namespace galley::dnn
