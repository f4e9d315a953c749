// Everything a Galley user needs, in one include: devices and streams, device memory,
// tensors, the ops, and the tuner.
#pragma once

#include "galley/core/dtype.hpp"
#include "galley/core/error.hpp"
#include "galley/core/version.hpp"
#include "galley/dnn/conv_problem.hpp"
#include "galley/dnn/convolution.hpp"
#include "galley/memory/buffer.hpp"
#include "galley/memory/device_memory.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"
#include "galley/tensor.hpp"
#include "galley/tuning/tuner.hpp"
