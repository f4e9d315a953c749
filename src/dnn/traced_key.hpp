// The problem key a trace records for an op span and a tuner pick, formatted once per problem.
#pragma once

#include "galley/dnn/problem.hpp"
#include "profile/tracer.hpp"

namespace galley::dnn {

/// problem.key(), from a per-thread cache of the problems traced lately: a network calls the same
/// few dozen problems over and over, and formatting a key costs about as much as the rest of an
/// op's trace records together. Only called while tracing is on.
profile::Text traced_key(ProblemRef problem);

}  // namespace galley::dnn
