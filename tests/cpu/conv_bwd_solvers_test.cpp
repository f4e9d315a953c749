// Every cpu backward-convolution solver against the backward references: over the conformance
// grid (groups, depthwise, dilation, stride, padding, 1x1, prime sizes, batch 1, channels 3/17/23)
// in every dtype and layout, over shapes aimed at each algorithm's plans (channel blocks, pixel
// blocks, the two weight-gradient strategies, the f16/bf16 chunking), at every instruction-set
// level the CPU has, and over what each must refuse.
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "backends/cpu/conv_isa.hpp"
#include "conv_bwd_test_util.hpp"
#include "dnn/conv_grid.hpp"
#include "galley/core/error.hpp"

namespace galley {
namespace {

using dnn::ConvDirection;
using dnn::ConvProblem;
using dnn::Layout;

constexpr const char* kDataGemm = "cpu.conv.bwd_data_gemm";
constexpr const char* kWeightsGemm = "cpu.conv.bwd_weights_gemm";
constexpr const char* kDataDepthwise = "cpu.conv.bwd_data_depthwise";
constexpr const char* kWeightsDepthwise = "cpu.conv.bwd_weights_depthwise";

ConvDirection direction_of(const std::string& solver) {
  return solver.find("bwd_data") != std::string::npos ? ConvDirection::backward_data
                                                      : ConvDirection::backward_weights;
}

ConvProblem make(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k,
                 std::int64_t fy, std::int64_t fx, std::int64_t pad, std::int64_t stride, std::int64_t dil,
                 std::int64_t g, Layout layout = Layout::nchw, DType dtype = DType::f32) {
  return ConvProblem{.n = n,
                     .c = c,
                     .h = h,
                     .w = w,
                     .k = k,
                     .y = fy,
                     .x = fx,
                     .pad_h = pad,
                     .pad_w = pad,
                     .stride_h = stride,
                     .stride_w = stride,
                     .dilation_h = dil,
                     .dilation_w = dil,
                     .groups = g,
                     .dtype = dtype,
                     .layout = layout};
}

// Height and width hyper-parameters that differ, so a swapped index shows.
ConvProblem asymmetric(std::int64_t c, std::int64_t k, std::int64_t g, Layout layout) {
  return ConvProblem{.n = 2,
                     .c = c,
                     .h = 19,
                     .w = 26,
                     .k = k,
                     .y = 3,
                     .x = 5,
                     .pad_h = 2,
                     .pad_w = 1,
                     .stride_h = 2,
                     .stride_w = 1,
                     .dilation_h = 1,
                     .dilation_w = 2,
                     .groups = g,
                     .layout = layout};
}

// One run at the CPU's own instruction-set level; `p`'s direction is set from the solver name.
void expect_matches(const std::string& solver, ConvProblem p, test::Prefill prefill = test::Prefill::nan,
                    std::uint64_t seed = 7) {
  p.direction = direction_of(solver);
  SCOPED_TRACE(solver + " " + p.key());
  const test::BwdSolverRun r = test::run_bwd_against_reference(solver, p, seed, prefill);
  ASSERT_TRUE(r.applicable.ok) << r.applicable.reason;
  EXPECT_TRUE(r.comparison.passed) << r.comparison.summary;
}

// At every instruction-set level this CPU has (AVX-512 GEMM and gathers, AVX2 / OpenBLAS, scalar).
void expect_matches_at_every_isa(const std::string& solver, const ConvProblem& p) {
  using backends::cpu::CpuIsa;
  for (CpuIsa isa : {CpuIsa::avx512, CpuIsa::avx2, CpuIsa::scalar}) {
    if (isa > backends::cpu::cpu_isa_supported()) continue;
    SCOPED_TRACE(std::string("at ") + std::string(backends::cpu::to_string(isa)));
    struct LiftCap {
      ~LiftCap() { backends::cpu::set_cpu_isa_cap(CpuIsa::avx512); }
    } lift;
    backends::cpu::set_cpu_isa_cap(isa);
    expect_matches(solver, p);
  }
}

void expect_refused(const std::string& solver, const ConvProblem& p, const std::string& reason_part) {
  SCOPED_TRACE(solver + " " + p.key());
  const dnn::ConvSolver* s = dnn::find_conv_solver("cpu", solver);
  ASSERT_NE(s, nullptr);
  const auto a = s->check(p, runtime::device("cpu"));
  EXPECT_FALSE(a.ok);
  EXPECT_NE(a.reason.find(reason_part), std::string::npos) << "reason: " << a.reason;
}

const std::vector<Layout> kLayouts = {Layout::nchw, Layout::nhwc};
const std::vector<DType> kDtypes = {DType::f32, DType::f16, DType::bf16};
const std::vector<std::string> kSolvers = {kDataGemm, kWeightsGemm, kDataDepthwise, kWeightsDepthwise};

TEST(CpuConvBwdSolvers, RegisteredOnCpuWithTheReferencesLast) {
  const auto list = dnn::conv_solvers("cpu");
  std::vector<std::string> names;
  for (const auto* s : list) names.emplace_back(s->name());
  for (const std::string& want : kSolvers) {
    const auto it = std::find(names.begin(), names.end(), want);
    ASSERT_NE(it, names.end()) << want;
    EXPECT_FALSE(list[static_cast<std::size_t>(it - names.begin())]->is_reference());
  }
  for (const char* ref : {dnn::kRefConvBackwardDataName, dnn::kRefConvBackwardWeightsName}) {
    const auto it = std::find(names.begin(), names.end(), ref);
    ASSERT_NE(it, names.end()) << ref;
    // Nothing but references after a reference.
    for (auto later = it; later != names.end(); ++later) {
      EXPECT_TRUE(list[static_cast<std::size_t>(later - names.begin())]->is_reference()) << *later;
    }
  }
}

// The whole conformance grid, each geometry in every dtype and layout, for the solvers that claim it.
TEST(CpuConvBwdSolvers, MatchReferenceOverTheConformanceGrid) {
  const runtime::Device cpu = runtime::device("cpu");
  const auto grid = test::conv_grid();
  for (const std::string& solver : kSolvers) {
    int ran = 0;
    for (std::size_t i = 0; i < grid.size(); ++i) {
      for (Layout l : kLayouts) {
        for (DType d : kDtypes) {
          ConvProblem p = grid[i];
          p.layout = l, p.dtype = d, p.direction = direction_of(solver);
          if (!dnn::find_conv_solver("cpu", solver)->check(p, cpu)) continue;
          expect_matches(solver, p, test::Prefill::nan, 100 + i);
          ++ran;
        }
      }
    }
    std::cout << "  " << solver << ": " << ran << " grid problems\n";
    EXPECT_GT(ran, 0) << solver << " claims none of the grid";
  }
}

TEST(CpuConvBwdDataGemm, MatchesReferenceOverShapes) {
  for (Layout l : kLayouts) {
    expect_matches(kDataGemm, make(2, 3, 31, 29, 17, 7, 7, 3, 2, 1, 1, l));  // conv1-like, 3 channels
    expect_matches(kDataGemm, make(1, 4, 5, 5, 3, 3, 3, 4, 3, 2, 1, l));     // padding past the reach
    expect_matches(kDataGemm, make(2, 8, 10, 11, 8, 1, 1, 0, 3, 1, 1, l));   // stride > filter: unread pixels
    expect_matches(kDataGemm, make(2, 8, 9, 9, 24, 1, 1, 1, 1, 1, 1, l));    // padded 1x1: not the plain path
    expect_matches(kDataGemm, make(3, 40, 7, 7, 70, 1, 1, 0, 1, 1, 2, l));   // plain 1x1, groups
    expect_matches(kDataGemm, make(1, 300, 23, 29, 70, 1, 1, 0, 1, 1, 1, l));  // plain 1x1, split pixels
    expect_matches(kDataGemm, make(1, 61, 29, 23, 103, 3, 3, 1, 1, 1, 1, l));  // channel blocks of a prime C
    expect_matches(kDataGemm, make(1, 20, 64, 70, 8, 5, 5, 2, 1, 1, 1, l));    // several pixel blocks
    expect_matches(kDataGemm, make(2, 64, 9, 9, 64, 3, 3, 1, 1, 1, 32, l));    // 2 channels per group
    expect_matches(kDataGemm, make(2, 96, 16, 16, 80, 3, 3, 1, 1, 1, 1, l));  // NCHW plane of 256: transposed
    expect_matches(kDataGemm, make(2, 96, 17, 16, 80, 3, 3, 1, 1, 1, 1, l));  // ... and of 272: not
    expect_matches(kDataGemm, make(1, 17, 31, 29, 23, 1, 7, 0, 1, 1, 1, l));
    expect_matches(kDataGemm, asymmetric(10, 20, 2, l));
    expect_matches(kDataGemm, make(1, 17, 15, 13, 23, 3, 3, 1, 1, 1, 1, l), test::Prefill::garbage);
  }
}

TEST(CpuConvBwdWeightsGemm, MatchesReferenceOverShapes) {
  for (Layout l : kLayouts) {
    expect_matches(kWeightsGemm, make(2, 3, 31, 29, 17, 7, 7, 3, 2, 1, 1, l));
    expect_matches(kWeightsGemm, make(1, 4, 5, 5, 3, 3, 3, 4, 3, 2, 1, l));
    expect_matches(kWeightsGemm, make(2, 8, 10, 11, 8, 1, 1, 0, 3, 1, 1, l));
    expect_matches(kWeightsGemm, make(3, 40, 7, 7, 70, 1, 1, 0, 1, 1, 2, l));    // plain 1x1, groups
    expect_matches(kWeightsGemm, make(2, 16, 40, 40, 24, 1, 1, 0, 1, 1, 1, l));  // plain 1x1, pixel blocks
    // Late-layer shapes (large weights, few pixels): NHWC sums by output-channel blocks, NCHW puts
    // images side by side (in two GEMMs for the 12 images).
    expect_matches(kWeightsGemm, make(2, 128, 7, 7, 128, 3, 3, 1, 1, 1, 1, l));
    expect_matches(kWeightsGemm, make(2, 256, 4, 4, 96, 1, 1, 0, 1, 1, 1, l));
    expect_matches(kWeightsGemm, make(12, 512, 14, 14, 8, 3, 3, 1, 1, 1, 1, l));
    // Early-layer shape (many pixels): NHWC per-worker copies reduced at the end.
    expect_matches(kWeightsGemm, make(2, 8, 45, 47, 12, 3, 3, 1, 1, 1, 1, l));
    expect_matches(kWeightsGemm, make(1, 20, 64, 70, 8, 5, 5, 2, 1, 1, 1, l));
    expect_matches(kWeightsGemm, make(2, 64, 9, 9, 64, 3, 3, 1, 1, 1, 32, l));
    expect_matches(kWeightsGemm, asymmetric(10, 20, 2, l));
    for (const ConvProblem& p :
         {make(2, 128, 7, 7, 128, 3, 3, 1, 1, 1, 1, l), make(2, 8, 45, 47, 12, 3, 3, 1, 1, 1, 1, l)}) {
      expect_matches(kWeightsGemm, p, test::Prefill::garbage);
    }
  }
}

TEST(CpuConvBwdDepthwise, MatchReferenceOverShapes) {
  for (const char* solver : {kDataDepthwise, kWeightsDepthwise}) {
    for (Layout l : kLayouts) {
      expect_matches(solver, make(2, 144, 14, 14, 144, 3, 3, 1, 1, 1, 144, l));
      expect_matches(solver, make(1, 5, 37, 47, 5, 3, 3, 1, 1, 1, 5, l));     // prime plane
      expect_matches(solver, make(1, 40, 31, 29, 40, 3, 3, 1, 2, 1, 40, l));  // stride 2
      expect_matches(solver, make(1, 9, 20, 21, 9, 3, 3, 2, 1, 2, 9, l));     // dilated
      expect_matches(solver, make(1, 3, 9, 33, 3, 7, 7, 3, 3, 1, 3, l));      // stride 3, 7x7
      expect_matches(solver, make(1, 8, 4, 4, 8, 3, 3, 3, 1, 1, 8, l));       // padding wider than reach
      expect_matches(solver, make(1, 6, 10, 11, 6, 1, 1, 0, 3, 1, 6, l));     // stride > filter
      expect_matches(solver, make(3, 17, 40, 37, 17, 5, 5, 2, 1, 1, 17, l));  // rows past 16 lanes
      expect_matches(solver, make(2, 4, 20, 21, 4, 9, 9, 4, 1, 1, 4, l));     // 81 taps: the row kernel
      expect_matches(solver, make(2, 6, 13, 12, 6, 3, 3, 0, 1, 1, 6, l));     // unpadded
      expect_matches(solver, asymmetric(12, 12, 12, l));
      expect_matches(solver, make(2, 23, 9, 7, 23, 3, 3, 1, 1, 1, 23, l), test::Prefill::garbage);
    }
  }
}

TEST(CpuConvBwdSolvers, MatchReferenceAtEveryIsaLevel) {
  for (Layout l : kLayouts) {
    for (const ConvProblem& p :
         {make(2, 17, 15, 13, 23, 3, 3, 1, 2, 1, 1, l), make(1, 46, 9, 10, 46, 3, 3, 1, 1, 2, 2, l),
          make(2, 32, 9, 8, 48, 1, 1, 0, 1, 1, 1, l)}) {
      expect_matches_at_every_isa(kDataGemm, p);
      expect_matches_at_every_isa(kWeightsGemm, p);
    }
    expect_matches_at_every_isa(kDataDepthwise, make(2, 17, 31, 29, 17, 3, 3, 1, 1, 1, 17, l));
    expect_matches_at_every_isa(kWeightsDepthwise, make(2, 17, 31, 29, 17, 3, 3, 1, 1, 1, 17, l));
  }
}

// f16/bf16 stage whole images through f32 in chunks of kLowPrecisionChunkBytes; images of 33 MB
// of f32 make one image per chunk, so the weight gradient is summed over two chunks.
TEST(CpuConvBwdSolvers, LowPrecisionOverSeveralChunks) {
  for (DType d : {DType::f16, DType::bf16}) {
    expect_matches(kWeightsGemm, make(2, 16, 512, 512, 16, 1, 1, 0, 1, 1, 1, Layout::nhwc, d),
                   test::Prefill::garbage);
    expect_matches(kDataGemm, make(2, 16, 512, 512, 16, 1, 1, 0, 1, 1, 1, Layout::nchw, d));
  }
  expect_matches(kWeightsDepthwise, make(2, 32, 512, 260, 32, 3, 3, 1, 1, 1, 32, Layout::nchw, DType::bf16));
}

TEST(CpuConvBwdSolvers, RefuseOtherDirectionsAndDtypes) {
  for (const std::string& solver : kSolvers) {
    ConvProblem p = make(1, 8, 8, 8, 8, 3, 3, 1, 1, 1, 8);
    const ConvDirection mine = direction_of(solver);
    for (ConvDirection d :
         {ConvDirection::forward, ConvDirection::backward_data, ConvDirection::backward_weights}) {
      if (d == mine) continue;
      p.direction = d;
      expect_refused(solver, p, std::string("not ") + dnn::to_string(d));
    }
    p.direction = mine;
    p.dtype = DType::i8;
    expect_refused(solver, p, "dtype");
  }
}

TEST(CpuConvBwdDepthwise, RefusesNonDepthwise) {
  for (const char* solver : {kDataDepthwise, kWeightsDepthwise}) {
    for (ConvProblem p : {make(1, 8, 8, 8, 8, 3, 3, 1, 1, 1, 1), make(1, 8, 8, 8, 8, 3, 3, 1, 1, 1, 4)}) {
      p.direction = direction_of(solver);
      expect_refused(solver, p, "not depthwise");
    }
    ConvProblem p = make(1, 8, 8, 8, 16, 3, 3, 1, 1, 1, 8);
    p.direction = direction_of(solver);
    expect_refused(solver, p, "multiplier");
  }
}

template <typename Fn>
void expect_error(Status status, Fn&& fn, const std::string& fragment) {
  try {
    fn();
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), status) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(CpuConvBwdSolvers, RunRejectsBadArguments) {
  const runtime::Device cpu = runtime::device("cpu");
  runtime::Stream stream(cpu);
  std::vector<float> a(4096), b(4096), c(4096), ws(1 << 20);
  ConvProblem p = make(1, 8, 8, 8, 8, 3, 3, 1, 1, 1, 1);
  p.direction = ConvDirection::backward_data;
  const auto* data = dnn::find_conv_solver("cpu", kDataGemm);
  const std::size_t need = data->workspace_bytes(p, cpu);
  ASSERT_GT(need, 0u);
  expect_error(
      Status::invalid_argument,
      [&] {
        data->run(stream, p,
                  dnn::conv_args(dnn::BackwardDataArgs{a.data(), b.data(), nullptr}, ws.data(), need));
      },
      "dx is null");
  expect_error(
      Status::invalid_argument,
      [&] {
        data->run(stream, p,
                  dnn::conv_args(dnn::BackwardDataArgs{nullptr, b.data(), c.data()}, ws.data(), need));
      },
      "dy is null");
  expect_error(
      Status::invalid_argument,
      [&] {
        data->run(stream, p,
                  dnn::conv_args(dnn::BackwardDataArgs{a.data(), b.data(), c.data()}, ws.data(), need - 1));
      },
      "workspace");
  p.direction = ConvDirection::backward_weights;
  const auto* weights = dnn::find_conv_solver("cpu", kWeightsGemm);
  expect_error(
      Status::invalid_argument,
      [&] {
        weights->run(stream, p,
                     dnn::conv_args(dnn::BackwardWeightsArgs{a.data(), b.data(), nullptr}, ws.data(),
                                    ws.size() * sizeof(float)));
      },
      "dw is null");
  p.direction = ConvDirection::forward;
  expect_error(
      Status::unsupported,
      [&] {
        weights->run(stream, p,
                     dnn::ConvArgs{a.data(), b.data(), c.data(), ws.data(), ws.size() * sizeof(float)});
      },
      "not forward");
  stream.synchronize();
}

}  // namespace
}  // namespace galley
