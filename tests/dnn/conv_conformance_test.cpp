// The solver conformance harness: EVERY conv solver registered on each available backend (cpu
// always; cuda/hip when a device is present), over the part of the conformance grid its check()
// claims, against ref.conv.direct on seeded random data. New solvers are picked up by iterating
// conv_solvers(backend); nothing here names one.
//
// Each run: output and workspace poisoned with 0xFF bytes (NaN in f32, f16 and bf16) so every
// output element must be written and no solver may rely on zeroed workspace; guard bytes after y
// and after the workspace must survive; x and w must come back unchanged; NaN never passes.
#include <gtest/gtest.h>

#include <cstring>
#include <iostream>
#include <map>
#include <tuple>

#include "conv_grid.hpp"
#include "dnn/ref_conv_direct.hpp"
#include "dnn/tensor_data.hpp"
#include "galley/dnn/convolution.hpp"
#include "galley/dnn/conv_solver.hpp"
#include "galley/memory/buffer.hpp"
#include "galley/runtime/device.hpp"

namespace galley::dnn {
namespace {

constexpr std::size_t kGuard = 256;
constexpr std::byte kGuardByte{0x5a};
constexpr int kMaxReportsPerSolver = 5;

// The first device of `backend`, or nullopt with the reason it is missing.
std::optional<runtime::Device> first_device(const std::string& backend, std::string* why) {
  for (const runtime::Device& d : runtime::devices()) {
    if (d.backend() == backend) return d;
  }
  *why = "no " + backend + " device";
  for (const auto& r : runtime::backend_reports()) {
    if (r.name == backend && !r.reason.empty()) *why += ": " + r.reason;
  }
  return std::nullopt;
}

struct SolverStats {
  int ran = 0, passed = 0, reports = 0;
  double worst = 0;
};

// Copies host bytes to a fresh device buffer of the same size.
memory::Buffer upload(runtime::Stream& s, const std::vector<std::byte>& host) {
  memory::Buffer buf = memory::allocate(s, host.size());
  s.copy_h2d(buf.data(), host.data(), host.size());
  return buf;
}

std::vector<std::byte> download(runtime::Stream& s, const void* device, std::size_t bytes) {
  std::vector<std::byte> host(bytes);
  s.copy_d2h(host.data(), device, bytes);
  return host;
}

bool guard_intact(const std::vector<std::byte>& bytes, std::size_t from) {
  for (std::size_t i = from; i < bytes.size(); ++i) {
    if (bytes[i] != kGuardByte) return false;
  }
  return true;
}

// Runs one solver on one problem; returns an empty string on success, else what went wrong.
std::string run_one(const ConvSolver& solver, runtime::Stream& stream, const ConvProblem& p,
                    const void* x_dev, const void* w_dev, const std::vector<std::byte>& x,
                    const std::vector<std::byte>& w, const std::vector<std::byte>& ref, double* rel_err) {
  const runtime::Device& device = stream.device();
  const std::size_t y_bytes = p.y_desc().bytes();
  const std::size_t ws_bytes = solver.workspace_bytes(p, device);
  const memory::Buffer y = memory::allocate(stream, y_bytes + kGuard);
  const memory::Buffer ws = memory::allocate(stream, ws_bytes + kGuard);
  try {
    stream.memset(y.data(), 0xff, y_bytes);
    stream.memset(static_cast<std::byte*>(y.data()) + y_bytes, static_cast<int>(kGuardByte), kGuard);
    stream.memset(ws.data(), 0xff, ws_bytes);
    stream.memset(static_cast<std::byte*>(ws.data()) + ws_bytes, static_cast<int>(kGuardByte), kGuard);
    const ConvArgs args{x_dev, w_dev, y.data(), ws_bytes > 0 ? ws.data() : nullptr, ws_bytes};
    solver.run(stream, p, args);
    stream.synchronize();
  } catch (const std::exception& e) {
    return std::string("threw: ") + e.what();
  }
  const auto y_back = download(stream, y.data(), y_bytes + kGuard);
  const auto ws_back = download(stream, ws.data(), ws_bytes + kGuard);
  const auto x_back = download(stream, x_dev, x.size());
  const auto w_back = download(stream, w_dev, w.size());
  stream.synchronize();
  std::string problems;
  if (!guard_intact(y_back, y_bytes)) problems += "wrote past the end of y; ";
  if (!guard_intact(ws_back, ws_bytes))
    problems += "wrote past workspace_bytes() = " + std::to_string(ws_bytes) + "; ";
  if (x_back != x) problems += "modified x; ";
  if (w_back != w) problems += "modified w; ";
  const Comparison c =
      compare_outputs(p.dtype, y_back.data(), ref.data(), p.y_desc().elements(), conv_tolerance(p.dtype));
  *rel_err = c.max_rel_err;
  if (!c.passed) problems += c.summary;
  return problems;
}

using Param = std::tuple<std::string, DType, Layout>;

class ConvConformance : public ::testing::TestWithParam<Param> {};

TEST_P(ConvConformance, EverySolverMatchesTheReference) {
  const auto& [backend, dtype, layout] = GetParam();
  std::string why;
  const auto device = first_device(backend, &why);
  if (!device) GTEST_SKIP() << why;
  const auto solvers = conv_solvers(backend);
  ASSERT_FALSE(solvers.empty()) << "backend " << backend << " has no conv solvers";

  runtime::Stream stream(*device);
  std::map<std::string, SolverStats> stats;
  const auto grid = test::conv_grid();
  for (std::size_t i = 0; i < grid.size(); ++i) {
    ConvProblem p = grid[i];
    p.dtype = dtype, p.layout = layout;
    std::vector<const ConvSolver*> applicable;
    for (const ConvSolver* s : solvers) {
      const Applicability a = s->check(p, *device);
      if (a) {
        applicable.push_back(s);
      } else {
        EXPECT_FALSE(a.reason.empty()) << s->name() << " said no without a reason to " << p.key();
      }
    }
    if (applicable.empty()) continue;
    const auto x = random_tensor(dtype, p.x_desc().elements(), 1000 + 2 * i);
    const auto w = random_tensor(dtype, p.w_desc().elements(), 1001 + 2 * i);
    std::vector<std::byte> ref(p.y_desc().bytes());
    reference_conv_forward(p, x.data(), w.data(), ref.data());
    const auto x_dev = upload(stream, x);
    const auto w_dev = upload(stream, w);
    for (const ConvSolver* s : applicable) {
      SolverStats& st = stats[std::string(s->name())];
      double rel = 0;
      const std::string failure = run_one(*s, stream, p, x_dev.data(), w_dev.data(), x, w, ref, &rel);
      ++st.ran;
      st.worst = std::max(st.worst, rel);
      if (failure.empty()) {
        ++st.passed;
      } else if (st.reports++ < kMaxReportsPerSolver) {
        ADD_FAILURE() << s->name() << " on " << p.key() << ": " << failure
                      << "\n  repro: " << p.bench_command(*device, s->name()) << " -V 1";
      }
    }
  }
  for (const auto& [name, st] : stats) {
    std::cout << "  " << name << ": " << st.passed << "/" << st.ran << " passed, worst max_rel_err "
              << st.worst << "\n";
    EXPECT_EQ(st.passed, st.ran) << name << " failed " << st.ran - st.passed << " cases (first "
                                 << kMaxReportsPerSolver << " reported above)";
  }
}

std::string param_name(const ::testing::TestParamInfo<Param>& info) {
  return std::get<0>(info.param) + "_" + to_string(std::get<1>(info.param)) + "_" +
         to_string(std::get<2>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Backends, ConvConformance,
                         ::testing::Combine(::testing::Values("cpu", "cuda", "hip"),
                                            ::testing::Values(DType::f32, DType::f16, DType::bf16),
                                            ::testing::Values(Layout::nchw, Layout::nhwc)),
                         param_name);

class ConvCheck : public ::testing::TestWithParam<std::string> {};

// A solver that claims nothing of the grid is never tested: the grid must grow, or the solver is broken.
TEST_P(ConvCheck, EverySolverClaimsPartOfTheGrid) {
  std::string why;
  const auto device = first_device(GetParam(), &why);
  if (!device) GTEST_SKIP() << why;
  const auto grid = test::conv_grid();
  for (const ConvSolver* s : conv_solvers(GetParam())) {
    int claimed = 0;
    for (ConvProblem p : grid) {
      for (DType d : {DType::f32, DType::f16, DType::bf16}) {
        for (Layout l : {Layout::nchw, Layout::nhwc}) {
          for (ConvDirection dir :
               {ConvDirection::forward, ConvDirection::backward_data, ConvDirection::backward_weights}) {
            p.dtype = d, p.layout = l, p.direction = dir;
            claimed += s->check(p, *device) ? 1 : 0;
            // The unfused sequence takes fused problems only (conv_epilogue_test checks them all).
            if (dir == ConvDirection::forward) {
              ConvProblem fused = p;
              fused.epilogue = ConvEpilogue::with(Activation::relu, true, true);
              claimed += s->name().ends_with(".conv.unfused") && s->check_any(ProblemRef::of(fused), *device) ? 1 : 0;
            }
          }
        }
      }
    }
    EXPECT_GT(claimed, 0) << s->name() << " accepts none of the " << grid.size() * 18 << " grid problems";
    std::cout << "  " << s->name() << " claims " << claimed << " of " << grid.size() * 18 << "\n";
  }
}

// "No" is tested as much as "yes": every solver does one direction and refuses the other two with a
// reason, and refuses devices of another backend.
TEST_P(ConvCheck, EverySolverRefusesWithAReason) {
  std::string why;
  const auto device = first_device(GetParam(), &why);
  if (!device) GTEST_SKIP() << why;
  const ConvProblem base = test::geometry(1, 17, 31, 29, 23, 3, 3, 1, 1, 1, 1, 1, 1, 1);
  for (const ConvSolver* s : conv_solvers(GetParam())) {
    int directions = 0;
    for (ConvDirection dir :
         {ConvDirection::forward, ConvDirection::backward_data, ConvDirection::backward_weights}) {
      ConvProblem p = base;
      p.direction = dir;
      const Applicability a = s->check(p, *device);
      directions += a ? 1 : 0;
      if (!a) EXPECT_FALSE(a.reason.empty()) << s->name();
    }
    EXPECT_LE(directions, 1) << s->name() << " claims " << directions << " directions of " << base.key();
    for (const runtime::Device& other : runtime::devices()) {
      if (other.backend() == device->backend()) continue;
      const Applicability a = s->check(base, other);
      EXPECT_FALSE(a) << s->name() << " (backend " << GetParam() << ") claims device " << other.name();
      EXPECT_FALSE(a.reason.empty()) << s->name();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, ConvCheck, ::testing::Values("cpu", "cuda", "hip"));

// The harness must catch each way a solver can be wrong; these deliberately broken (unregistered)
// solvers prove that run_one fails them.
enum class Fault { none, skip_last, past_y, past_workspace, off_by_tolerance, modify_x };

class BrokenSolver final : public ConvSolver {
 public:
  explicit BrokenSolver(Fault fault) : fault_(fault) {}
  std::string_view name() const override { return "test.conv.broken"; }
  Applicability check(const ConvProblem&, const runtime::Device&) const override {
    return Applicability::yes();
  }
  std::size_t workspace_bytes(const ConvProblem&, const runtime::Device&) const override { return 64; }
  void run(runtime::Stream& stream, const ConvProblem& p, const ConvArgs& a) const override {
    stream.host_task([p, a, fault = fault_] {
      const std::size_t bytes = p.y_desc().bytes();
      std::vector<std::byte> tmp(bytes);
      reference_conv_forward(p, a.x, a.w, tmp.data());
      auto* y = static_cast<std::byte*>(a.y);
      std::memcpy(y, tmp.data(), fault == Fault::skip_last ? bytes - size_of(p.dtype) : bytes);
      if (fault == Fault::past_y) y[bytes] = std::byte{0};
      if (fault == Fault::past_workspace)
        static_cast<std::byte*>(a.workspace)[a.workspace_bytes] = std::byte{0};
      if (fault == Fault::modify_x)
        const_cast<std::byte*>(static_cast<const std::byte*>(a.x))[0] ^= std::byte{1};
      if (fault == Fault::off_by_tolerance) {
        float v;
        std::memcpy(&v, y, 4);
        v += 1e-3f;  // the output's inf-norm is about 14 here: 7e-5 relative, over 1e-5
        std::memcpy(y, &v, 4);
      }
    });
  }

 private:
  Fault fault_;
};

TEST(ConvHarness, CatchesEveryKindOfFault) {
  runtime::Stream stream(runtime::device("cpu"));
  const ConvProblem p = test::geometry(1, 17, 9, 7, 23, 3, 3, 1, 1, 1, 1, 1, 1, 1);
  const auto x = random_tensor(p.dtype, p.x_desc().elements(), 1);
  const auto w = random_tensor(p.dtype, p.w_desc().elements(), 2);
  std::vector<std::byte> ref(p.y_desc().bytes());
  reference_conv_forward(p, x.data(), w.data(), ref.data());
  const std::pair<Fault, std::string> cases[] = {
      {Fault::none, ""},
      {Fault::skip_last, "NaN"},
      {Fault::past_y, "past the end of y"},
      {Fault::past_workspace, "past workspace_bytes()"},
      {Fault::off_by_tolerance, "max_rel_err"},
      {Fault::modify_x, "modified x"},
  };
  for (const auto& [fault, expect] : cases) {
    const auto x_dev = upload(stream, x);
    const auto w_dev = upload(stream, w);
    double rel = 0;
    const std::string failure =
        run_one(BrokenSolver(fault), stream, p, x_dev.data(), w_dev.data(), x, w, ref, &rel);
    if (expect.empty()) {
      EXPECT_EQ(failure, "");
    } else {
      EXPECT_NE(failure.find(expect), std::string::npos)
          << "fault " << static_cast<int>(fault) << ": '" << failure << "'";
    }
  }
}

}  // namespace
}  // namespace galley::dnn
