// The backward convolution solvers of the GPU backends (gpu.conv.bwd_*, cuda.conv.cudnn_bwd_*,
// cuda.conv.cudnn_graph_bwd_* with every engine config they list, cuda.conv.cublas_bwd_*)
// against the reference (src/dnn/ref_conv_backward.hpp) on seeded random data: the conformance grid
// (tests/dnn/conv_grid.hpp) run backward, plus shapes that reach the kernels' split-K, stride-phase
// and pixel-slice paths, in every dtype and layout. Each run poisons the output and the workspace
// with NaN first (every element must be written; nothing may rely on zeroed scratch) and checks
// that the inputs come back unchanged. Skips without a CUDA or HIP device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "common/scoped_env.hpp"
#include "core/config.hpp"
#include "dnn/conv_grid.hpp"
#include "dnn/ref_conv_backward.hpp"
#include "dnn/tensor_data.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/solver.hpp"
#include "galley/memory/buffer.hpp"
#include "gpu_test_util.hpp"

namespace galley::dnn {
namespace {

using galley::test::geometry;

constexpr const char* kDataSolvers[] = {"gpu.conv.bwd_data_depthwise", "gpu.conv.bwd_data_igemm",
                                        "gpu.conv.bwd_data_direct"};
constexpr const char* kWeightsSolvers[] = {"gpu.conv.bwd_weights_depthwise", "gpu.conv.bwd_weights_igemm",
                                           "gpu.conv.bwd_weights_direct"};
constexpr const char* kCudnnSolvers[] = {"cuda.conv.cudnn_bwd_data", "cuda.conv.cudnn_bwd_weights",
                                         "cuda.conv.cudnn_graph_bwd_data",
                                         "cuda.conv.cudnn_graph_bwd_weights"};
constexpr const char* kCudnnGraphSolvers[] = {"cuda.conv.cudnn_graph_bwd_data",
                                              "cuda.conv.cudnn_graph_bwd_weights"};
constexpr const char* kCublasSolvers[] = {"cuda.conv.cublas_bwd_data", "cuda.conv.cublas_bwd_weights"};

// Shapes beyond the grid's: split-K in both implicit GEMMs, stride phases without taps (stride
// larger than the filter, 1x1 stride 2), stride 3 with dilation 2, channel chunks with groups and
// phases, a depthwise reduction long enough to be sliced, and bwd-weights' 16-byte NHWC path.
std::vector<ConvProblem> extra_shapes() {
  //          n   c   h   w   k    y  x  p  q  u  v  l  j  g
  return {
      geometry(2, 64, 7, 7, 512, 3, 3, 1, 1, 1, 1, 1, 1, 1),    // bwd-data: few pixels, long k: split-K
      geometry(4, 64, 28, 28, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1),   // bwd-weights: long pixel reduction: split-K
      geometry(2, 6, 11, 12, 9, 3, 3, 1, 1, 3, 3, 2, 2, 1),     // stride 3, dilation 2
      geometry(1, 4, 17, 18, 6, 2, 2, 1, 1, 4, 4, 1, 1, 1),     // stride 4 > filter: tap-less phases
      geometry(2, 16, 10, 10, 64, 1, 1, 0, 0, 2, 2, 1, 1, 1),   // 1x1 stride 2, k a multiple of 8
      geometry(2, 32, 9, 9, 32, 3, 3, 1, 1, 2, 2, 1, 1, 2),     // channel chunks with groups and phases
      geometry(4, 24, 48, 48, 24, 3, 3, 1, 1, 1, 1, 1, 1, 24),  // depthwise, sliced reduction
      // bwd-weights' NHWC tensor-core path (channels a multiple of 8): partial tiles with stride 2,
      // groups with dilation, two channel tiles with split-K, groups packed several to a tile (all
      // of them, and 5 groups by 4 with a last tile of one).
      geometry(3, 24, 13, 11, 40, 3, 3, 1, 1, 2, 2, 1, 1, 1),
      geometry(2, 48, 9, 10, 16, 3, 3, 2, 2, 1, 1, 2, 2, 2),
      geometry(2, 64, 10, 9, 64, 3, 3, 1, 1, 1, 1, 1, 1, 8),
      geometry(2, 80, 7, 8, 40, 3, 3, 1, 1, 2, 2, 1, 1, 5),
      geometry(8, 136, 20, 20, 72, 1, 1, 0, 0, 1, 1, 1, 1, 1),
      // ... and on x padded to 8 channels: an RGB stem (7x7 stride 2), 12 channels padded to 16.
      geometry(2, 3, 23, 19, 16, 7, 7, 3, 3, 2, 2, 1, 1, 1),
      geometry(1, 12, 9, 11, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1)};
}

std::vector<ConvProblem> all_shapes() {
  std::vector<ConvProblem> shapes = test::conv_grid();
  for (const ConvProblem& p : extra_shapes()) shapes.push_back(p);
  return shapes;
}

/// The tensors of one backward problem on the host: the two inputs (seeded) and the reference output.
struct HostCase {
  std::vector<std::byte> in0, in1, want;  // bwd-data: dy, w, dx; bwd-weights: x, dy, dw
};

HostCase make_case(const ConvProblem& p, std::uint64_t seed) {
  HostCase c;
  if (p.direction == ConvDirection::backward_data) {
    c.in0 = random_tensor(p.dtype, p.y_desc().elements(), seed);
    c.in1 = random_tensor(p.dtype, p.w_desc().elements(), seed + 1);
    c.want.resize(p.x_desc().bytes());
    reference_conv_backward_data(p, c.in0.data(), c.in1.data(), c.want.data());
  } else {
    c.in0 = random_tensor(p.dtype, p.x_desc().elements(), seed);
    c.in1 = random_tensor(p.dtype, p.y_desc().elements(), seed + 1);
    c.want.resize(p.w_desc().bytes());
    reference_conv_backward_weights(p, c.in0.data(), c.in1.data(), c.want.data());
  }
  return c;
}

/// One solver run on poisoned output and workspace; returns the output bytes, and in `error` what
/// went wrong besides the numbers (an input changed). `config`: an inner choice of the solver
/// (parse_config_any), or null for its default. `misalign`: the tensors start that many bytes into
/// their allocations (as wrapped pointers may), the workspace stays aligned.
std::vector<std::byte> run_solver(const ConvSolver& s, runtime::Stream& stream, const ConvProblem& p,
                                  const HostCase& c, std::string* error, const void* config = nullptr,
                                  std::size_t misalign = 0) {
  const bool data = p.direction == ConvDirection::backward_data;
  const std::size_t out_bytes = c.want.size();
  const auto shifted = [&](const std::vector<std::byte>& v) {
    std::vector<std::byte> out(misalign, std::byte{0});
    out.insert(out.end(), v.begin(), v.end());
    return out;
  };
  const std::vector<std::byte> host0 = shifted(c.in0), host1 = shifted(c.in1);
  memory::Buffer in0 = memory::allocate(stream, host0.size()), in1 = memory::allocate(stream, host1.size());
  memory::Buffer out = memory::allocate(stream, misalign + out_bytes);
  const ProblemRef ref = ProblemRef::of(p);
  const std::size_t ws_bytes = s.workspace_bytes_any(ref, stream.device(), config);
  memory::Buffer ws = memory::allocate(stream, ws_bytes);
  memory::copy_from_host(stream, in0, host0.data(), host0.size());
  memory::copy_from_host(stream, in1, host1.data(), host1.size());
  memory::memset(stream, out, 0xff, misalign + out_bytes);  // NaN in f32, f16 and bf16
  if (ws_bytes > 0) memory::memset(stream, ws, 0xff, ws_bytes);
  void* wsp = ws_bytes > 0 ? ws.data() : nullptr;
  const auto at = [&](memory::Buffer& b) {
    return static_cast<void*>(static_cast<std::byte*>(b.data()) + misalign);
  };
  // bwd-data reads dy (in0) and w (in1), writes dx; bwd-weights reads x (in0) and dy (in1), writes dw.
  OpArgs args;
  args.set(data ? ArgId::diff_dst : ArgId::src, at(in0));
  args.set(data ? ArgId::wei : ArgId::diff_dst, at(in1));
  args.set(data ? ArgId::diff_src : ArgId::diff_wei, at(out));
  args.workspace = wsp;
  args.workspace_bytes = ws_bytes;
  s.run_any(stream, ref, args, config);
  std::vector<std::byte> got(misalign + out_bytes), back0(host0.size()), back1(host1.size());
  memory::copy_to_host(stream, got.data(), out, got.size());
  memory::copy_to_host(stream, back0.data(), in0, back0.size());
  memory::copy_to_host(stream, back1.data(), in1, back1.size());
  stream.synchronize();
  if (back0 != host0 || back1 != host1) *error = "an input tensor was modified";
  return std::vector<std::byte>(got.begin() + static_cast<std::ptrdiff_t>(misalign), got.end());
}

std::int64_t output_elements(const ConvProblem& p) {
  return p.direction == ConvDirection::backward_data ? p.x_desc().elements() : p.w_desc().elements();
}

/// Runs `s` on `p` (seeded by `seed`) with every config it lists, each against the reference; returns
/// how many ran. Each failure names the solver, the config and the problem.
int expect_every_config_matches(const ConvSolver& s, runtime::Stream& stream, const ConvProblem& p,
                                std::uint64_t seed) {
  const runtime::Device& device = stream.device();
  const ProblemRef ref = ProblemRef::of(p);
  const std::vector<std::string> texts = s.configs_any(ref, device);
  EXPECT_FALSE(texts.empty()) << s.name() << " lists no config for " << p.key();
  const HostCase c = make_case(p, seed);
  int ran = 0;
  for (const std::string& text : texts) {
    const std::optional<ConfigHandle> config = s.parse_config_any(ref, device, text);
    if (!config) {
      ADD_FAILURE() << s.name() << ": " << text << " does not parse back for " << p.key();
      continue;
    }
    std::string error;
    const auto got = run_solver(s, stream, p, c, &error, config->get());
    const Comparison cmp =
        compare_outputs(p.dtype, got.data(), c.want.data(), output_elements(p), conv_tolerance(p));
    EXPECT_TRUE(cmp.passed && error.empty()) << s.name() << " " << text << " on " << p.key() << " ("
                                             << s.detail(p, device) << "): " << cmp.summary << " " << error;
    ++ran;
  }
  return ran;
}

// The solvers a case runs: Galley's own kernels or the vendor libraries' (cuDNN, cuBLAS). Two
// groups, so a sanitizer pass over Galley's kernels need not sit through the vendor kernels too
// (racecheck makes cuDNN's backward kernels run for minutes).
enum class SolverGroup { own, vendor };

bool is_vendor(std::string_view name) {
  return name.starts_with("cuda.conv.cudnn") || name.starts_with("cuda.conv.cublas");
}

using Param = std::tuple<std::string, ConvDirection, DType, Layout, SolverGroup>;

class ConvBackwardGpu : public ::testing::TestWithParam<Param> {};

// Every solver of the backend that claims a problem of the grid in this direction, dtype and layout
// matches the reference; each of this file's solvers claims some of them.
TEST_P(ConvBackwardGpu, EverySolverMatchesTheReference) {
  const auto& [backend, direction, dtype, layout, group] = GetParam();
  std::string why;
  const auto device = galley::testing::first_device(backend, why);
  if (!device) GTEST_SKIP() << why;
  const bool vendor_group = group == SolverGroup::vendor;
  if (vendor_group && backend != "cuda") GTEST_SKIP() << backend << " has no vendor backward solvers";
  runtime::Stream stream(*device);
  struct Stats {
    int ran = 0, passed = 0;
    double worst = 0;
  };
  std::map<std::string, Stats> stats;
  const auto shapes = all_shapes();
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    ConvProblem p = shapes[i];
    p.direction = direction, p.dtype = dtype, p.layout = layout;
    std::vector<const ConvSolver*> claim;
    for (const ConvSolver* s : conv_solvers(backend)) {
      if (is_vendor(s->name()) != vendor_group) continue;
      const Applicability a = s->check(p, *device);
      if (a)
        claim.push_back(s);
      else
        EXPECT_FALSE(a.reason.empty()) << s->name() << " said no without a reason to " << p.key();
    }
    if (claim.empty()) continue;
    const HostCase c = make_case(p, 3000 + 2 * i);
    for (const ConvSolver* s : claim) {
      if (s->is_reference()) continue;
      Stats& st = stats[std::string(s->name())];
      std::string error;
      std::vector<std::byte> got;
      try {
        got = run_solver(*s, stream, p, c, &error);
      } catch (const Error& e) {  // a claimed problem that then fails is a failure, not the end of the grid
        ++st.ran;
        ADD_FAILURE() << s->name() << " on " << p.key() << " threw: " << e.what();
        continue;
      }
      const Comparison cmp =
          compare_outputs(dtype, got.data(), c.want.data(), output_elements(p), conv_tolerance(p));
      ++st.ran;
      st.worst = std::max(st.worst, cmp.max_rel_err);
      if (cmp.passed && error.empty()) {
        ++st.passed;
      } else if (st.ran - st.passed <= 3) {
        ADD_FAILURE() << s->name() << " on " << p.key() << " (" << s->detail(p, *device)
                      << "): " << cmp.summary << (error.empty() ? "" : "; " + error);
      }
    }
  }
  for (const auto& [name, st] : stats) {
    std::cout << "  " << name << ": " << st.passed << "/" << st.ran << " passed, worst max_rel_err "
              << st.worst << "\n";
    EXPECT_EQ(st.passed, st.ran) << name;
  }
  // The general solvers of this direction take every dtype and layout; each must have run.
  const bool data = direction == ConvDirection::backward_data;
  if (!vendor_group) {
    for (const char* name : data ? kDataSolvers : kWeightsSolvers)
      EXPECT_GT(stats[name].ran, 0) << name << " claimed none of the grid (" << to_string(dtype) << ", "
                                    << to_string(layout) << ")";
  } else {
    for (const char* name :
         {kCudnnSolvers[data ? 0 : 1], kCudnnSolvers[data ? 2 : 3], kCublasSolvers[data ? 0 : 1]})
      EXPECT_GT(stats[name].ran, 0) << name;
  }
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  const ConvDirection d = std::get<1>(info.param);
  return std::get<0>(info.param) + (d == ConvDirection::backward_data ? "_data_" : "_weights_") +
         to_string(std::get<2>(info.param)) + "_" + to_string(std::get<3>(info.param)) +
         (std::get<4>(info.param) == SolverGroup::vendor ? "_vendor" : "_own");
}

INSTANTIATE_TEST_SUITE_P(Backends, ConvBackwardGpu,
                         ::testing::Combine(::testing::Values("cuda", "hip"),
                                            ::testing::Values(ConvDirection::backward_data,
                                                              ConvDirection::backward_weights),
                                            ::testing::Values(DType::f32, DType::f16, DType::bf16),
                                            ::testing::Values(Layout::nchw, Layout::nhwc),
                                            ::testing::Values(SolverGroup::own, SolverGroup::vendor)),
                         param_name);

class ConvBackwardGpuCheck : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string why;
    device_ = galley::testing::first_device(GetParam(), why);
    if (!device_) GTEST_SKIP() << why;
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out(std::begin(kDataSolvers), std::end(kDataSolvers));
    out.insert(out.end(), std::begin(kWeightsSolvers), std::end(kWeightsSolvers));
    if (GetParam() == "cuda") {
      out.insert(out.end(), std::begin(kCudnnSolvers), std::end(kCudnnSolvers));
      out.insert(out.end(), std::begin(kCublasSolvers), std::end(kCublasSolvers));
    }
    return out;
  }
  const ConvSolver& solver(const std::string& name) const {
    const ConvSolver* s = find_conv_solver(GetParam(), name);
    if (s == nullptr) throw Error(Status::not_found, name + " is not registered on " + GetParam());
    return *s;
  }
  std::optional<runtime::Device> device_;
};

// Each solver refuses the directions it does not do, dtypes it does not take and (depthwise) grouped
// problems that are not depthwise, always with a reason naming why.
TEST_P(ConvBackwardGpuCheck, RefusesWithAReason) {
  const ConvProblem depthwise = geometry(2, 16, 9, 11, 16, 3, 3, 1, 1, 1, 1, 1, 1, 16);
  const ConvProblem ungrouped = geometry(2, 16, 9, 11, 16, 3, 3, 1, 1, 1, 1, 1, 1, 1);
  for (const std::string& name : names()) {
    const ConvSolver& s = solver(name);
    const bool data = name.find("bwd_data") != std::string::npos;
    const bool cublas = name.find("cublas") != std::string::npos;
    ConvProblem p = cublas ? ungrouped : depthwise;
    p.direction = data ? ConvDirection::backward_data : ConvDirection::backward_weights;
    ASSERT_TRUE(s.check(p, *device_)) << name << ": " << s.check(p, *device_).reason;
    for (ConvDirection other :
         {ConvDirection::forward, data ? ConvDirection::backward_weights : ConvDirection::backward_data}) {
      ConvProblem q = p;
      q.direction = other;
      const Applicability a = s.check(q, *device_);
      EXPECT_FALSE(a) << name << " claims " << q.key();
      EXPECT_NE(a.reason.find(to_string(other)), std::string::npos) << name << ": " << a.reason;
    }
    ConvProblem q = p;
    q.dtype = DType::i8;
    const Applicability a = s.check(q, *device_);
    EXPECT_FALSE(a) << name << " claims " << q.key();
    EXPECT_NE(a.reason.find("dtype"), std::string::npos) << name << ": " << a.reason;
    if (name.find("depthwise") != std::string::npos || cublas) {
      q = p;
      q.groups = 2;
      const Applicability b = s.check(q, *device_);
      EXPECT_FALSE(b) << name << " claims " << q.key();
      EXPECT_NE(b.reason.find(cublas ? "groups" : "depthwise"), std::string::npos)
          << name << ": " << b.reason;
    }
    EXPECT_FALSE(s.detail(p, *device_).empty()) << name;
  }
}

// The split reductions add their fp32 partials in a fixed order: two runs give the same bits.
TEST_P(ConvBackwardGpuCheck, SplitReductionsAreReproducible) {
  struct Case {
    const char* solver;
    ConvProblem p;
  };
  const auto extra = extra_shapes();
  std::vector<Case> cases = {{"gpu.conv.bwd_data_igemm", extra[0]},
                             {"gpu.conv.bwd_weights_igemm", extra[1]},
                             {"gpu.conv.bwd_weights_depthwise", extra[6]}};
  runtime::Stream stream(*device_);
  for (Case& c : cases) {
    c.p.direction = std::string(c.solver).find("bwd_data") != std::string::npos
                        ? ConvDirection::backward_data
                        : ConvDirection::backward_weights;
    for (Layout layout : {Layout::nchw, Layout::nhwc}) {
      c.p.layout = layout;
      const ConvSolver& s = solver(c.solver);
      ASSERT_TRUE(s.check(c.p, *device_)) << c.solver << ": " << s.check(c.p, *device_).reason;
      EXPECT_GT(s.workspace_bytes(c.p, *device_), 0u)
          << c.solver << " did not split " << c.p.key() << " (" << s.detail(c.p, *device_) << ")";
      const HostCase host = make_case(c.p, 77);
      std::string error;
      const auto first = run_solver(s, stream, c.p, host, &error);
      const auto second = run_solver(s, stream, c.p, host, &error);
      EXPECT_TRUE(error.empty()) << c.solver << ": " << error;
      EXPECT_TRUE(first == second) << c.solver << " on " << c.p.key() << " differs between two runs";
      const Comparison cmp = compare_outputs(c.p.dtype, first.data(), host.want.data(), output_elements(c.p),
                                             conv_tolerance(c.p));
      EXPECT_TRUE(cmp.passed) << c.solver << " on " << c.p.key() << ": " << cmp.summary;
    }
  }
}

// A workspace smaller than workspace_bytes() is the caller's error, named, not an overrun.
TEST_P(ConvBackwardGpuCheck, ShortWorkspaceIsAnError) {
  ConvProblem p = extra_shapes()[1];
  p.direction = ConvDirection::backward_weights;
  const ConvSolver& s = solver("gpu.conv.bwd_weights_igemm");
  const std::size_t needed = s.workspace_bytes(p, *device_);
  ASSERT_GT(needed, 0u);
  runtime::Stream stream(*device_);
  memory::Buffer x = memory::allocate(stream, p.x_desc().bytes()),
                 dy = memory::allocate(stream, p.y_desc().bytes());
  memory::Buffer dw = memory::allocate(stream, p.w_desc().bytes()), ws = memory::allocate(stream, needed);
  try {
    s.run(stream, p, ConvArgs{x.data(), dw.data(), dy.data(), ws.data(), needed - 1});
    FAIL() << "a short workspace was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument);
    EXPECT_NE(std::string(e.what()).find(std::to_string(needed)), std::string::npos) << e.what();
  }
  stream.synchronize();
}

INSTANTIATE_TEST_SUITE_P(Backends, ConvBackwardGpuCheck, ::testing::Values("cuda", "hip"));

// The depthwise backward solvers on the shapes that pick each of their paths. Backward-data runs the
// forward depthwise kernels on a flipped filter when the stride is 1, the multiplier 1 and
// pad <= (filter - 1) * dilation, and gathers otherwise; backward-weights runs the row-strip kernel
// for 3x3 and 5x5 filters with multiplier 1 and the general kernel otherwise. Channel counts that
// are not multiples of 8 (or even), prime sizes, batches of 1 and 3, and a 144-channel layer whose
// nhwc half reaches the forward tile and staged-rows kernels with every padding they are handed.
struct DepthwiseCase {
  ConvProblem p;
  bool flipped;  // backward-data on the forward kernels
  bool strips;   // backward-weights on the row-strip kernel
};

std::vector<DepthwiseCase> depthwise_cases() {
  //                   n   c    h   w   k    y  x  p  q  u  v  l  j  g
  return {{geometry(1, 3, 13, 7, 3, 3, 3, 0, 0, 1, 1, 1, 1, 3), true, true},         // pad 0: pad' 2
          {geometry(3, 17, 13, 7, 17, 3, 3, 1, 1, 1, 1, 1, 1, 17), true, true},      // pad 1
          {geometry(1, 17, 13, 7, 17, 3, 3, 2, 2, 1, 1, 1, 1, 17), true, true},      // pad 2: pad' 0
          {geometry(3, 2, 13, 7, 2, 3, 3, 1, 1, 1, 1, 1, 1, 2), true, true},         // two channels
          {geometry(3, 17, 13, 11, 17, 3, 3, 2, 2, 1, 1, 2, 2, 17), true, true},     // dilation 2
          {geometry(2, 6, 13, 9, 6, 3, 3, 1, 0, 1, 1, 2, 1, 6), true, true},         // dilation 2 x 1
          {geometry(3, 8, 13, 7, 8, 3, 3, 0, 2, 1, 1, 1, 1, 8), true, true},         // pads 0 x 2
          {geometry(3, 3, 13, 7, 3, 5, 5, 2, 2, 1, 1, 1, 1, 3), true, true},         // 5x5 pad 2
          {geometry(1, 144, 13, 7, 144, 5, 5, 1, 1, 1, 1, 1, 1, 144), true, true},   // 5x5 pad 1
          {geometry(2, 144, 13, 7, 144, 3, 3, 0, 0, 1, 1, 1, 1, 144), true, true},   // 144 channels, pad' 2
          {geometry(1, 144, 13, 7, 144, 3, 3, 1, 1, 1, 1, 1, 1, 144), true, true},   // 144 channels, pad 1
          {geometry(3, 144, 28, 28, 144, 3, 3, 1, 1, 1, 1, 1, 1, 144), true, true},  // many slices
          {geometry(6, 144, 56, 56, 144, 3, 3, 1, 1, 1, 1, 1, 1, 144), true, true},  // bands of rows
          {geometry(3, 16, 14, 14, 16, 3, 3, 2, 2, 1, 1, 1, 1, 16), true, true},     // 16 channels, pad' 0
          {geometry(2, 8, 13, 7, 8, 7, 7, 3, 3, 1, 1, 1, 1, 8), true, false},        // 7x7: general weights
          {geometry(3, 17, 13, 7, 17, 3, 3, 1, 1, 2, 2, 1, 1, 17), false, true},     // stride 2
          {geometry(2, 6, 13, 9, 6, 3, 3, 1, 1, 1, 2, 1, 1, 6), false, true},        // stride 1 x 2
          {geometry(2, 6, 13, 11, 6, 3, 3, 1, 1, 3, 3, 1, 1, 6), false, true},       // stride 3
          {geometry(2, 8, 13, 11, 8, 3, 3, 2, 2, 2, 2, 2, 2, 8), false, true},       // stride 2, dilation 2
          {geometry(3, 3, 13, 7, 3, 5, 5, 2, 2, 2, 2, 1, 1, 3), false, true},        // 5x5 stride 2
          {geometry(1, 8, 13, 7, 8, 3, 3, 3, 3, 1, 1, 1, 1, 8), false, true},        // pad 3 > 2
          {geometry(3, 8, 13, 7, 16, 3, 3, 1, 1, 1, 1, 1, 1, 8), false, false},      // multiplier 2
          {geometry(2, 3, 13, 7, 6, 3, 3, 1, 1, 2, 2, 1, 1, 3), false, false}};      // multiplier 2, stride 2
}

using DepthwiseParam = std::tuple<std::string, DType, Layout>;

class ConvBackwardDepthwiseGpu : public ::testing::TestWithParam<DepthwiseParam> {};

// Each case takes the path it is meant to (by the solver's detail()) and matches the reference, on
// NaN-poisoned output and workspace, with the inputs left unchanged.
TEST_P(ConvBackwardDepthwiseGpu, EveryPathMatchesTheReference) {
  const auto& [backend, dtype, layout] = GetParam();
  std::string why;
  const auto device = galley::testing::first_device(backend, why);
  if (!device) GTEST_SKIP() << why;
  runtime::Stream stream(*device);
  const auto cases = depthwise_cases();
  for (std::size_t i = 0; i < cases.size(); ++i) {
    for (ConvDirection direction : {ConvDirection::backward_data, ConvDirection::backward_weights}) {
      const bool data = direction == ConvDirection::backward_data;
      ConvProblem p = cases[i].p;
      p.direction = direction, p.dtype = dtype, p.layout = layout;
      const char* name = data ? kDataSolvers[0] : kWeightsSolvers[0];
      const ConvSolver* s = find_conv_solver(backend, name);
      ASSERT_NE(s, nullptr) << name;
      const Applicability a = s->check(p, *device);
      ASSERT_TRUE(a) << name << " refused " << p.key() << ": " << a.reason;
      const std::string detail = s->detail(p, *device);
      const bool fast = detail.find(data ? "flipped filter" : "column strips") != std::string::npos;
      EXPECT_EQ(fast, data ? cases[i].flipped : cases[i].strips)
          << name << " on " << p.key() << ": " << detail;
      const HostCase c = make_case(p, 9000 + 2 * i);
      std::string error;
      std::vector<std::byte> got;
      try {
        got = run_solver(*s, stream, p, c, &error);
      } catch (const Error& e) {
        ADD_FAILURE() << name << " on " << p.key() << " threw: " << e.what();
        continue;
      }
      const Comparison cmp =
          compare_outputs(dtype, got.data(), c.want.data(), output_elements(p), conv_tolerance(p));
      EXPECT_TRUE(cmp.passed && error.empty())
          << name << " on " << p.key() << " (" << detail << "): " << cmp.summary << " " << error;
    }
  }
}

std::string depthwise_param_name(const ::testing::TestParamInfo<DepthwiseParam>& info) {
  return std::get<0>(info.param) + "_" + to_string(std::get<1>(info.param)) + "_" +
         to_string(std::get<2>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Backends, ConvBackwardDepthwiseGpu,
                         ::testing::Combine(::testing::Values("cuda", "hip"),
                                            ::testing::Values(DType::f32, DType::f16, DType::bf16),
                                            ::testing::Values(Layout::nchw, Layout::nhwc)),
                         depthwise_param_name);

// cuDNN's graph API backward: every engine config the solver lists for the tuner (not only the
// default the grid above runs) matches the reference, in the formats its forward counterpart is
// checked in.
TEST(CudnnGraphBackward, EveryListedConfigMatchesTheReference) {
  std::string why;
  const auto device = galley::testing::first_device("cuda", why);
  if (!device) GTEST_SKIP() << "no CUDA device: " << why;
  runtime::Stream stream(*device);
  //                   n   c   h   w   k  y  x  p  q  u  v  l  j  g
  const ConvProblem shapes[] = {geometry(2, 24, 17, 13, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1),  // odd sizes
                                geometry(1, 7, 11, 11, 5, 3, 3, 2, 2, 1, 1, 2, 2, 1),   // dilated, 7 channels
                                geometry(2, 32, 9, 9, 32, 3, 3, 1, 1, 2, 2, 1, 1, 2)};  // strided, grouped
  for (const char* name : kCudnnGraphSolvers) {
    const ConvSolver* s = find_conv_solver("cuda", name);
    ASSERT_NE(s, nullptr) << name;
    const ConvDirection direction = std::string_view(name).ends_with("bwd_data")
                                        ? ConvDirection::backward_data
                                        : ConvDirection::backward_weights;
    int configs_run = 0;
    for (const auto& [dtype, layout] :
         {std::pair{DType::f16, Layout::nhwc}, std::pair{DType::bf16, Layout::nhwc},
          std::pair{DType::f32, Layout::nchw}}) {
      for (std::size_t i = 0; i < std::size(shapes); ++i) {
        ConvProblem p = shapes[i];
        p.direction = direction, p.dtype = dtype, p.layout = layout;
        const ProblemRef ref = ProblemRef::of(p);
        if (const Applicability a = s->check(p, *device); !a) {
          // cuDNN may have no engine for some shape or for bf16; it says why. The plain odd-sized
          // layer in f16 or f32 is one its engines take.
          EXPECT_FALSE(a.reason.empty()) << name << " " << p.key();
          EXPECT_FALSE(i == 0 && dtype != DType::bf16) << name << " refused " << p.key() << ": " << a.reason;
          std::printf("[ info ] %s refused %s: %s\n", name, p.key().c_str(), a.reason.c_str());
          continue;
        }
        EXPECT_LE(s->configs_any(ref, *device).size(), 14u) << name << " " << p.key();
        configs_run += expect_every_config_matches(*s, stream, p, 500 + 2 * i);
      }
    }
    std::printf("[ info ] %s: %d configs run against the reference\n", name, configs_run);
    EXPECT_GT(configs_run, 0) << name;
  }
}

// gpu.conv.bwd_data_via_*: backward-data run by a forward solver on dy with the flipped filter. Each
// takes what its forward solver takes of the views (unit stride, 1x1 filters with a stride, dy spread
// onto the stride grid for other strided filters, grouped layers with k and c swapped per group), every
// config it lists (the forward solver's tile plans) matches the reference, and what cannot be viewed
// as a forward convolution is refused naming why.
TEST(BwdDataAsForward, EveryConfigOfEveryViewMatchesTheReference) {
  std::string why;
  const auto device = galley::testing::first_device("cuda", why);
  if (!device) GTEST_SKIP() << "no CUDA device: " << why;
  std::vector<const ConvSolver*> solvers;
  for (const ConvSolver* s : conv_solvers("cuda"))
    if (std::string_view(s->name()).starts_with("gpu.conv.bwd_data_via_")) solvers.push_back(s);
  ASSERT_GE(solvers.size(), 6u);
  runtime::Stream stream(*device);
  //                   n   c   h   w   k  y  x  p  q  u  v  l  j  g
  const ConvProblem shapes[] = {
      geometry(2, 24, 17, 13, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1),  // odd sizes, 3x3
      geometry(1, 7, 11, 11, 5, 3, 3, 2, 2, 1, 1, 2, 2, 1),    // dilated; channels not a multiple of 8
      geometry(3, 17, 13, 7, 23, 1, 1, 0, 0, 1, 1, 1, 1, 1),   // 1x1, odd channels, batch 3
      geometry(2, 32, 13, 11, 64, 1, 1, 0, 0, 2, 2, 1, 1, 1),  // 1x1 stride 2, odd plane
      geometry(1, 16, 10, 9, 24, 1, 1, 0, 0, 3, 2, 1, 1, 1),   // 1x1 strides 3 x 2
      geometry(1, 8, 9, 11, 16, 5, 5, 1, 2, 1, 1, 1, 1, 1),    // 5x5, pads below the extent
      geometry(1, 16, 1, 1, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1),     // a 1x1 plane under a 3x3 filter
      geometry(2, 64, 7, 7, 512, 3, 3, 1, 1, 1, 1, 1, 1, 1),   // long k: split-K plans
      geometry(1, 32, 14, 14, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1),  // a ResNet-like 3x3 (winograd's)
      geometry(2, 24, 17, 13, 40, 3, 3, 1, 1, 2, 2, 1, 1, 1),  // 3x3 stride 2, odd plane: dy spread
      geometry(1, 32, 14, 14, 64, 3, 3, 1, 1, 2, 2, 1, 1, 1),  // a ResNet-like 3x3 stride 2
      geometry(1, 8, 23, 19, 16, 7, 7, 3, 3, 2, 2, 1, 1, 1),   // 7x7 stride 2 (a stem)
      geometry(1, 8, 15, 16, 8, 3, 3, 2, 1, 3, 2, 2, 1, 1),    // strides 3 x 2, dilated rows
      // Grouped: the flipped filter swaps k and c within each group.
      geometry(2, 32, 9, 11, 64, 3, 3, 1, 1, 1, 1, 1, 1, 4),   // 8 channels in, 16 out per group
      geometry(2, 64, 7, 9, 64, 3, 3, 1, 1, 1, 1, 1, 1, 8),    // ResNeXt-like: 8 in, 8 out per group
      geometry(1, 24, 11, 13, 36, 3, 3, 1, 1, 2, 2, 1, 1, 3),  // grouped stride 2: phases
      geometry(2, 12, 9, 9, 18, 1, 1, 0, 0, 2, 2, 1, 1, 3)};   // grouped 1x1 stride 2, 4 in and 6 out
  const std::pair<DType, Layout> formats[] = {{DType::f16, Layout::nhwc},
                                              {DType::bf16, Layout::nhwc},
                                              {DType::f16, Layout::nchw},
                                              {DType::f32, Layout::nchw},
                                              {DType::f32, Layout::nhwc}};
  std::map<std::string, int> runs;
  for (const ConvSolver* s : solvers) {
    for (const auto& [dtype, layout] : formats) {
      for (std::size_t i = 0; i < std::size(shapes); ++i) {
        ConvProblem p = shapes[i];
        p.direction = ConvDirection::backward_data, p.dtype = dtype, p.layout = layout;
        const Applicability a = s->check(p, *device);
        if (!a) {
          EXPECT_FALSE(a.reason.empty()) << s->name() << " " << p.key();
          continue;
        }
        runs[std::string(s->name())] += expect_every_config_matches(*s, stream, p, 700 + 2 * i);
      }
    }
  }
  for (const ConvSolver* s : solvers) {
    std::printf("[ info ] %s: %d configs run against the reference\n", std::string(s->name()).c_str(),
                runs[std::string(s->name())]);
  }
  // The tensor-core and f32 1x1 paths must have taken part of the grid.
  for (const char* name :
       {"gpu.conv.bwd_data_via_igemm_tc", "gpu.conv.bwd_data_via_gemm_1x1", "gpu.conv.bwd_data_via_grouped"})
    EXPECT_GT(runs[name], 0) << name;

  const ConvSolver* s = find_conv_solver("cuda", "gpu.conv.bwd_data_via_igemm_tc");
  ASSERT_NE(s, nullptr);
  ConvProblem base = geometry(2, 16, 9, 11, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1);
  base.direction = ConvDirection::backward_data, base.dtype = DType::f16, base.layout = Layout::nhwc;
  ASSERT_TRUE(s->check(base, *device)) << s->check(base, *device).reason;
  ConvProblem forward = base, weights = base, nchw = base, strided = base, padded = base;
  forward.direction = ConvDirection::forward;
  weights.direction = ConvDirection::backward_weights;
  nchw.layout = Layout::nchw;
  strided.stride_h = strided.stride_w = 2;
  padded.y = padded.x = 1;  // 1x1 with padding 1: beyond the filter's extent
  strided.pad_h = 3;        // stride 2 and a pad past the 3x3 filter's extent
  const std::pair<ConvProblem, const char*> refusals[] = {{forward, "forward"},
                                                          {weights, "backward_weights"},
                                                          {nchw, "nhwc"},
                                                          {strided, "padding"},
                                                          {padded, "padding"}};
  for (const auto& [problem, names] : refusals) {
    const Applicability a = s->check(problem, *device);
    EXPECT_FALSE(a) << "claims " << problem.key();
    EXPECT_NE(a.reason.find(names), std::string::npos) << problem.key() << ": " << a.reason;
  }
}

// Backward-data through gpu.conv.igemm_tc's view lists every wgmma tile of the forward solver on a
// device that runs them, the warp-specialized ones (plan tiles 13-16) included, and each config
// matches the reference (NaN-poisoned output): a unit-stride 3x3 (kred = 360, not a multiple of 64;
// 72 output channels, not a multiple of the tiles' N), a long reduction (split-K plans) and a 1x1
// stride 2 (the compact product), in f16 and bf16.
TEST(BwdDataAsForward, RunsTheWgmmaTilesOfTheForwardSolver) {
  std::string why;
  const auto device = galley::testing::first_device("cuda", why);
  if (!device) GTEST_SKIP() << "no CUDA device: " << why;
  const ConvSolver* forward = find_conv_solver("cuda", "gpu.conv.igemm_tc");
  const ConvSolver* s = find_conv_solver("cuda", "gpu.conv.bwd_data_via_igemm_tc");
  ASSERT_NE(forward, nullptr);
  ASSERT_NE(s, nullptr);
  ConvProblem probe = geometry(1, 8, 5, 5, 8, 1, 1, 0, 0, 1, 1, 1, 1, 1);
  probe.dtype = DType::f16, probe.layout = Layout::nhwc;
  if (!forward->parse_config_any(ProblemRef::of(probe), *device, "tile=9,splits=1"))
    GTEST_SKIP() << "no wgmma on " << device->name() << " (needs compute capability 9.0)";
  runtime::Stream stream(*device);
  //                   n   c   h   w   k  y  x  p  q  u  v  l  j  g
  const ConvProblem shapes[] = {geometry(2, 72, 15, 17, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1),
                                geometry(2, 64, 7, 7, 512, 3, 3, 1, 1, 1, 1, 1, 1, 1),
                                geometry(2, 32, 13, 11, 64, 1, 1, 0, 0, 2, 2, 1, 1, 1)};
  for (const DType dtype : {DType::f16, DType::bf16}) {
    for (std::size_t i = 0; i < std::size(shapes); ++i) {
      ConvProblem p = shapes[i];
      p.direction = ConvDirection::backward_data, p.dtype = dtype, p.layout = Layout::nhwc;
      ASSERT_TRUE(s->check(p, *device)) << p.key() << ": " << s->check(p, *device).reason;
      const std::vector<std::string> texts = s->configs_any(ProblemRef::of(p), *device);
      for (int tile = 9; tile <= 16; ++tile) {
        const std::string plan = "tile=" + std::to_string(tile) + ",splits=1";
        EXPECT_TRUE(std::any_of(texts.begin(), texts.end(),
                                [&](const std::string& t) { return t.find(plan) != std::string::npos; }))
            << plan << " not listed for " << p.key();
      }
      EXPECT_EQ(expect_every_config_matches(*s, stream, p, 900 + 2 * i), int(texts.size())) << p.key();
    }
  }
}

// Strided backward-data through the forward solvers as stride phases (GALLEY_DEBUG_BWD_DATA_PHASES=1):
// every phase a unit-stride forward convolution of dy with its taps, scattered onto its pixels.
// Odd planes (phases of unequal size), phases without a tap (2x2 stride 3), asymmetric strides and
// pads, the stem's 7x7, every format the via solvers take.
TEST(BwdDataPhases, StridedShapesMatchTheReference) {
  const galley::testing::ScopedEnv phases("GALLEY_DEBUG_BWD_DATA_PHASES", "1");
  std::string why;
  const auto device = galley::testing::first_device("cuda", why);
  if (!device) GTEST_SKIP() << "no CUDA device: " << why;
  std::vector<const ConvSolver*> solvers;
  for (const ConvSolver* s : conv_solvers("cuda"))
    if (std::string_view(s->name()).starts_with("gpu.conv.bwd_data_via_")) solvers.push_back(s);
  runtime::Stream stream(*device);
  //                   n   c   h   w   k  y  x  p  q  u  v  l  j  g
  const ConvProblem shapes[] = {
      geometry(2, 24, 17, 13, 40, 3, 3, 1, 1, 2, 2, 1, 1, 1),  // 3x3 stride 2, odd plane
      geometry(1, 32, 14, 14, 64, 3, 3, 1, 1, 2, 2, 1, 1, 1),  // a ResNet-like 3x3 stride 2
      geometry(1, 8, 23, 19, 16, 7, 7, 3, 3, 2, 2, 1, 1, 1),   // 7x7 stride 2 (a stem)
      geometry(2, 16, 13, 11, 24, 2, 2, 0, 0, 3, 3, 1, 1, 1),  // 2x2 stride 3: phases without a tap
      geometry(1, 8, 15, 16, 8, 3, 5, 1, 2, 3, 2, 1, 1, 1),    // strides 3 x 2, 3x5
      geometry(3, 40, 9, 10, 8, 5, 5, 2, 1, 2, 2, 1, 1, 1)};   // 5x5 stride 2, unequal pads
  const std::pair<DType, Layout> formats[] = {{DType::f16, Layout::nhwc},
                                              {DType::bf16, Layout::nhwc},
                                              {DType::f16, Layout::nchw},
                                              {DType::f32, Layout::nchw}};
  std::map<std::string, int> runs;
  for (const ConvSolver* s : solvers) {
    for (const auto& [dtype, layout] : formats) {
      for (std::size_t i = 0; i < std::size(shapes); ++i) {
        ConvProblem p = shapes[i];
        p.direction = ConvDirection::backward_data, p.dtype = dtype, p.layout = layout;
        if (!s->check(p, *device)) continue;
        EXPECT_NE(s->detail(p, *device).find("stride phases"), std::string::npos) << s->detail(p, *device);
        runs[std::string(s->name())] += expect_every_config_matches(*s, stream, p, 800 + 2 * i);
      }
    }
  }
  for (const auto& [name, count] : runs) std::printf("[ info ] %s: %d phase runs\n", name.c_str(), count);
  EXPECT_GT(runs["gpu.conv.bwd_data_via_igemm_tc"], 0);
  // Off, the same problem spreads dy.
  const galley::testing::ScopedEnv off("GALLEY_DEBUG_BWD_DATA_PHASES", "0");
  ConvProblem p = shapes[1];
  p.direction = ConvDirection::backward_data, p.dtype = DType::f16, p.layout = Layout::nhwc;
  const ConvSolver* tc = find_conv_solver("cuda", "gpu.conv.bwd_data_via_igemm_tc");
  ASSERT_NE(tc, nullptr);
  EXPECT_NE(tc->detail(p, *device).find("dy spread"), std::string::npos) << tc->detail(p, *device);
}

// gpu.conv.bwd_weights_via_igemm_tc: backward-weights as one forward product over x and dy with the
// batch innermost. Every plan it lists (the large split-K counts included) matches the reference in
// both layouts; strides, dilations, groups and f32 are refused naming why.
TEST(BwdWeightsViaIgemmTc, EveryConfigMatchesTheReference) {
  std::string why;
  const auto device = galley::testing::first_device("cuda", why);
  if (!device) GTEST_SKIP() << "no CUDA device: " << why;
  const ConvSolver* s = find_conv_solver("cuda", "gpu.conv.bwd_weights_via_igemm_tc");
  ASSERT_NE(s, nullptr);
  runtime::Stream stream(*device);
  //                   n   c   h   w   k  y  x  p  q  u  v  l  j  g
  const ConvProblem shapes[] = {
      geometry(2, 24, 17, 13, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1),  // odd plane, 3x3
      geometry(3, 17, 13, 7, 23, 1, 1, 0, 0, 1, 1, 1, 1, 1),   // 1x1, odd channels, batch 3
      geometry(1, 8, 9, 11, 16, 5, 5, 2, 1, 1, 1, 1, 1, 1),    // 5x5, uneven pads, batch 1
      geometry(8, 32, 28, 28, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1),  // long reduction: the large split-K plans
      geometry(2, 16, 1, 1, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1)};    // a 1x1 plane under a 3x3 filter
  int configs_run = 0;
  for (DType dtype : {DType::f16, DType::bf16}) {
    for (Layout layout : {Layout::nhwc, Layout::nchw}) {
      for (std::size_t i = 0; i < std::size(shapes); ++i) {
        ConvProblem p = shapes[i];
        p.direction = ConvDirection::backward_weights, p.dtype = dtype, p.layout = layout;
        const Applicability a = s->check(p, *device);
        ASSERT_TRUE(a) << p.key() << ": " << a.reason;
        configs_run += expect_every_config_matches(*s, stream, p, 900 + 2 * i);
      }
    }
  }
  std::printf("[ info ] gpu.conv.bwd_weights_via_igemm_tc: %d configs run against the reference\n",
              configs_run);

  ConvProblem base = geometry(2, 16, 9, 11, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1);
  base.direction = ConvDirection::backward_weights, base.dtype = DType::f16, base.layout = Layout::nhwc;
  ConvProblem data = base, strided = base, dilated = base, grouped = base, f32 = base;
  data.direction = ConvDirection::backward_data;
  strided.stride_h = 2;
  dilated.dilation_w = 2;
  grouped.groups = 2;
  f32.dtype = DType::f32;
  const std::pair<ConvProblem, const char*> refusals[] = {{data, "backward_data"},
                                                          {strided, "stride"},
                                                          {dilated, "dilation"},
                                                          {grouped, "groups"},
                                                          {f32, "f16 or bf16"}};
  for (const auto& [problem, names] : refusals) {
    const Applicability a = s->check(problem, *device);
    EXPECT_FALSE(a) << "claims " << problem.key();
    EXPECT_NE(a.reason.find(names), std::string::npos) << problem.key() << ": " << a.reason;
  }
}

// gpu.conv.bwd_weights_igemm's plans as tuner configs: on its NHWC tensor-core path every tile and
// split count it lists (packed groups included) matches the reference; text naming a plan it does not
// list (a tile past the table, no splits) is refused.
TEST(BwdWeightsIgemmConfigs, EveryListedPlanMatchesTheReference) {
  const galley::testing::ScopedEnv wgmma("GALLEY_DEBUG_BWD_WEIGHTS_WGMMA", "1");
  std::string why;
  const auto device = galley::testing::first_device("cuda", why);
  if (!device) GTEST_SKIP() << "no CUDA device: " << why;
  const ConvSolver* s = find_conv_solver("cuda", "gpu.conv.bwd_weights_igemm");
  ASSERT_NE(s, nullptr);
  runtime::Stream stream(*device);
  //                   n   c   h   w   k  y  x  p  q  u  v  l  j  g
  const ConvProblem shapes[] = {
      geometry(4, 64, 20, 18, 136, 3, 3, 1, 1, 1, 1, 1, 1, 1),  // two k tiles, long reduction: many splits
      geometry(3, 40, 11, 13, 24, 1, 1, 0, 0, 2, 2, 1, 1, 1),   // 1x1 stride 2, partial tiles
      geometry(2, 64, 10, 9, 64, 3, 3, 1, 1, 1, 1, 1, 1, 8),    // packed groups
      geometry(2, 136, 15, 17, 72, 3, 3, 1, 1, 2, 2, 1, 1, 1),  // 136 = two 64-channel slabs + 8
      geometry(2, 16, 13, 11, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1),   // taps packed, the last pack partial
      geometry(1, 24, 9, 10, 16, 5, 5, 2, 2, 1, 1, 1, 1, 1),    // 24 channels: packs leave columns idle
      geometry(2, 3, 23, 19, 16, 7, 7, 3, 3, 2, 2, 1, 1, 1)};   // RGB stem: padded to 8, 8+ taps a tile
  int configs_run = 0;
  for (DType dtype : {DType::f16, DType::bf16}) {
    for (std::size_t i = 0; i < std::size(shapes); ++i) {
      ConvProblem p = shapes[i];
      p.direction = ConvDirection::backward_weights, p.dtype = dtype, p.layout = Layout::nhwc;
      ASSERT_TRUE(s->check(p, *device)) << p.key();
      EXPECT_GT(s->configs_any(ProblemRef::of(p), *device).size(), 1u) << p.key();
      configs_run += expect_every_config_matches(*s, stream, p, 700 + 2 * i);
    }
  }
  std::printf("[ info ] gpu.conv.bwd_weights_igemm: %d configs run against the reference\n", configs_run);
  ConvProblem stem = shapes[std::size(shapes) - 1];
  stem.direction = ConvDirection::backward_weights, stem.dtype = DType::f16, stem.layout = Layout::nhwc;
  EXPECT_NE(s->detail(stem, *device).find("taps a tile"), std::string::npos) << s->detail(stem, *device);

  ConvProblem p = shapes[0];
  p.direction = ConvDirection::backward_weights, p.dtype = DType::f16, p.layout = Layout::nhwc;
  const ProblemRef ref = ProblemRef::of(p);
  for (const char* text : {"tile=99,splits=1", "tile=0,splits=0", "tile=0", "default", ""})
    EXPECT_FALSE(s->parse_config_any(ref, *device, text)) << text;

  // Hopper (compute capability 9.0) lists its wgmma tiles, and the model plans a large layer on one;
  // without GALLEY_DEBUG_BWD_WEIGHTS_WGMMA=1 no device does.
  ConvProblem large = geometry(32, 256, 14, 14, 256, 3, 3, 1, 1, 1, 1, 1, 1, 1);
  large.direction = ConvDirection::backward_weights, large.dtype = DType::bf16, large.layout = Layout::nhwc;
  const bool hopper = device->properties().arch == "sm_90";
  EXPECT_EQ(s->detail(large, *device).find("wgmma") != std::string::npos, hopper)
      << s->detail(large, *device);
  const galley::testing::ScopedEnv off("GALLEY_DEBUG_BWD_WEIGHTS_WGMMA", "0");
  EXPECT_EQ(s->detail(large, *device).find("wgmma"), std::string::npos) << s->detail(large, *device);
}

// f32 backward implicit GEMMs on tensor cores as 3xTF32 (GALLEY_DEBUG_3XTF32 on): fp32's
// tolerance on odd shapes of both directions and layouts, and the detail names the main loop.
TEST(BwdIgemm3xTf32, DataAndWeightsMatchTheReference) {
  const galley::testing::ScopedEnv tf32("GALLEY_DEBUG_3XTF32", "1");
  std::string why;
  const auto device = galley::testing::first_device("cuda", why);
  if (!device) GTEST_SKIP() << "no CUDA device: " << why;
  runtime::Stream stream(*device);
  //                   n   c   h   w   k  y  x  p  q  u  v  l  j  g
  const ConvProblem shapes[] = {
      geometry(2, 64, 20, 18, 136, 3, 3, 1, 1, 1, 1, 1, 1, 1),  // two k tiles, long reduction
      geometry(1, 13, 17, 11, 7, 3, 3, 1, 1, 2, 2, 1, 1, 1),    // primes, batch 1, stride 2
      geometry(3, 40, 11, 13, 24, 1, 1, 0, 0, 2, 2, 1, 1, 1),   // 1x1 stride 2
      geometry(2, 24, 12, 10, 36, 3, 3, 2, 2, 1, 1, 2, 2, 3),   // groups with dilation
      geometry(4, 256, 7, 7, 128, 3, 3, 1, 1, 1, 1, 1, 1, 1),   // split-K
      geometry(16, 8, 64, 64, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1)};   // weights reduce over 65536 pixels
  int run = 0;
  for (const char* name : {"gpu.conv.bwd_data_igemm", "gpu.conv.bwd_weights_igemm"}) {
    const ConvSolver* s = find_conv_solver("cuda", name);
    ASSERT_NE(s, nullptr) << name;
    const bool data = std::string_view(name).find("data") != std::string_view::npos;
    for (Layout layout : {Layout::nchw, Layout::nhwc}) {
      for (std::size_t i = 0; i < std::size(shapes); ++i) {
        ConvProblem p = shapes[i];
        p.direction = data ? ConvDirection::backward_data : ConvDirection::backward_weights;
        p.dtype = DType::f32, p.layout = layout;
        if (!s->check(p, *device)) continue;
        EXPECT_NE(s->detail(p, *device).find("3xTF32"), std::string::npos) << s->detail(p, *device);
        const HostCase c = make_case(p, 900 + i);
        std::string error;
        const std::vector<std::byte> got = run_solver(*s, stream, p, c, &error);
        const Comparison cmp =
            compare_outputs(p.dtype, got.data(), c.want.data(), output_elements(p), conv_tolerance(p));
        EXPECT_TRUE(cmp.passed && error.empty())
            << name << " " << p.key() << ": " << cmp.summary << " " << error;
        ++run;
      }
    }
  }
  EXPECT_GE(run, 16);
  const galley::testing::ScopedEnv off("GALLEY_DEBUG_3XTF32", "0");
  ConvProblem p = shapes[0];
  p.direction = ConvDirection::backward_weights, p.dtype = DType::f32, p.layout = Layout::nchw;
  EXPECT_NE(find_conv_solver("cuda", "gpu.conv.bwd_weights_igemm")->detail(p, *device).find("fp32 SIMT"),
            std::string::npos);
}

// gpu.conv.bwd_weights_winograd on both layouts against the reference (fp32's tolerance with the
// Winograd allowance) on odd shapes: primes, batch 1, channels not a multiple of 8, padding 0 and 2,
// output sizes not a multiple of the 4x4 tile, reductions long enough to be split; and what it refuses.
TEST(BwdWeightsWinograd, MatchesTheReferenceAndRefusesWithAReason) {
  int run = 0;
  for (const char* backend : {"cuda", "hip"}) {
    std::string why;
    const auto device = galley::testing::first_device(backend, why);
    if (!device) continue;
    const ConvSolver* s = find_conv_solver(backend, "gpu.conv.bwd_weights_winograd");
    ASSERT_NE(s, nullptr) << backend;
    runtime::Stream stream(*device);
    //                   n   c   h   w   k  y  x  p  q  u  v  l  j  g
    const ConvProblem shapes[] = {
        geometry(2, 64, 20, 18, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1),
        geometry(1, 13, 17, 11, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1),   // primes, batch 1
        geometry(3, 5, 9, 10, 6, 3, 3, 0, 0, 1, 1, 1, 1, 1),     // no padding
        geometry(2, 24, 7, 7, 40, 3, 3, 2, 2, 1, 1, 1, 1, 1),    // padding 2: 9x9 outputs
        geometry(8, 32, 28, 28, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1),  // 392 tiles: split sums
        geometry(16, 8, 64, 64, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1)};  // 4096 tiles
    for (Layout layout : {Layout::nchw, Layout::nhwc}) {
      for (std::size_t i = 0; i < std::size(shapes); ++i) {
        ConvProblem p = shapes[i];
        p.direction = ConvDirection::backward_weights, p.dtype = DType::f32, p.layout = layout;
        ASSERT_TRUE(s->check(p, *device)) << p.key() << ": " << s->check(p, *device).reason;
        const HostCase c = make_case(p, 1100 + i);
        std::string error;
        const std::vector<std::byte> got = run_solver(*s, stream, p, c, &error);
        const Comparison cmp =
            compare_outputs(p.dtype, got.data(), c.want.data(), output_elements(p), conv_tolerance(p));
        EXPECT_TRUE(cmp.passed && error.empty()) << backend << " " << p.key() << " (" << s->detail(p, *device)
                                                 << "): " << cmp.summary << " " << error;
        ++run;
      }
    }
    ConvProblem base = shapes[0];
    base.direction = ConvDirection::backward_weights, base.dtype = DType::f32, base.layout = Layout::nchw;
    ConvProblem strided = base, k5 = base, grouped = base, half = base, data = base;
    strided.stride_h = 2;
    k5.y = k5.x = 5, k5.pad_h = k5.pad_w = 2;
    grouped.groups = 2;
    half.dtype = DType::f16;
    data.direction = ConvDirection::backward_data;
    const std::pair<ConvProblem, const char*> refusals[] = {
        {strided, "stride"}, {k5, "3x3"}, {grouped, "groups"}, {half, "f32"}, {data, "backward_data"}};
    for (const auto& [problem, names] : refusals) {
      const Applicability a = s->check(problem, *device);
      EXPECT_FALSE(a) << "claims " << problem.key();
      EXPECT_NE(a.reason.find(names), std::string::npos) << problem.key() << ": " << a.reason;
    }
  }
  if (run == 0) GTEST_SKIP() << "no GPU device";
}

// Tensors off 16-byte alignment (wrapped pointers) send the NHWC tensor-core path's problems to the
// general kernel, within the workspace the planned path asked for: still the reference's result.
TEST(BwdWeightsIgemmConfigs, MisalignedTensorsTakeTheGeneralKernel) {
  std::string why;
  const auto device = galley::testing::first_device("cuda", why);
  if (!device) GTEST_SKIP() << "no CUDA device: " << why;
  const ConvSolver* s = find_conv_solver("cuda", "gpu.conv.bwd_weights_igemm");
  ASSERT_NE(s, nullptr);
  runtime::Stream stream(*device);
  //                   n   c   h   w   k  y  x  p  q  u  v  l  j  g
  for (ConvProblem p : {geometry(2, 16, 9, 8, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1),       // no split
                        geometry(8, 32, 28, 28, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1)}) {  // split-K planned
    p.direction = ConvDirection::backward_weights, p.dtype = DType::f16, p.layout = Layout::nhwc;
    EXPECT_NE(s->detail(p, *device).find("nhwc 16-byte loads"), std::string::npos) << s->detail(p, *device);
    const HostCase c = make_case(p, 31);
    for (std::size_t misalign : {std::size_t{2}, std::size_t{8}}) {
      std::string error;
      const std::vector<std::byte> got = run_solver(*s, stream, p, c, &error, nullptr, misalign);
      const Comparison cmp =
          compare_outputs(p.dtype, got.data(), c.want.data(), output_elements(p), conv_tolerance(p));
      EXPECT_TRUE(cmp.passed && error.empty())
          << p.key() << " misaligned by " << misalign << ": " << cmp.summary << " " << error;
    }
  }
}

}  // namespace
}  // namespace galley::dnn
