// Every cpu.conv.* solver against the reference over the shapes it claims, plus the shapes it
// must refuse. The dnn conformance grid (tests/dnn) covers all solvers broadly; this file aims at
// each algorithm's edges: tiles that overhang the image, channel counts that are not a multiple
// of the vector width, strides and dilations that cut through the blocking.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backends/cpu/conv_base.hpp"
#include "backends/cpu/conv_isa.hpp"
#include "conv_test_util.hpp"
#include "galley/core/error.hpp"

namespace galley {
namespace {

using dnn::ConvProblem;
using dnn::Layout;

ConvProblem make(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k, std::int64_t fy,
                 std::int64_t fx, std::int64_t pad, std::int64_t stride, std::int64_t dil, std::int64_t g,
                 Layout layout = Layout::nchw, DType dtype = DType::f32) {
  return ConvProblem{.n = n, .c = c, .h = h, .w = w, .k = k, .y = fy, .x = fx, .pad_h = pad, .pad_w = pad,
                     .stride_h = stride, .stride_w = stride, .dilation_h = dil, .dilation_w = dil, .groups = g,
                     .dtype = dtype, .layout = layout};
}

// Height and width hyper-parameters that differ, so a swapped index shows.
ConvProblem asymmetric(std::int64_t c, std::int64_t k, std::int64_t g, Layout layout) {
  return ConvProblem{.n = 2, .c = c, .h = 19, .w = 26, .k = k, .y = 3, .x = 5, .pad_h = 2, .pad_w = 1,
                     .stride_h = 2, .stride_w = 1, .dilation_h = 1, .dilation_w = 2, .groups = g, .layout = layout};
}

// Runs the solver at every instruction-set level this CPU has (AVX-512, AVX2, scalar: the cap of
// conv_isa.hpp), so each kernel variant meets the reference here, not only the fastest one. A
// lower level may refuse the problem only for want of the instructions.
void expect_pass(const std::string& solver, const ConvProblem& p, std::uint64_t seed = 7) {
  using backends::cpu::CpuIsa;
  for (CpuIsa isa : {CpuIsa::avx512, CpuIsa::avx2, CpuIsa::scalar}) {
    if (isa > backends::cpu::cpu_isa_supported()) continue;
    SCOPED_TRACE(solver + " " + p.key() + " at " + std::string(backends::cpu::to_string(isa)));
    test::SolverRun r;
    {
      // Lifted again even if the run throws, so later shapes start from the top level.
      struct LiftCap {
        ~LiftCap() { backends::cpu::set_cpu_isa_cap(CpuIsa::avx512); }
      } lift;
      backends::cpu::set_cpu_isa_cap(isa);
      r = test::run_against_reference(solver, p, seed);
    }
    if (!r.applicable.ok && isa != backends::cpu::cpu_isa_supported()) {
      EXPECT_NE(r.applicable.reason.find("AVX"), std::string::npos) << r.applicable.reason;
      continue;
    }
    ASSERT_TRUE(r.applicable.ok) << r.applicable.reason;
    EXPECT_TRUE(r.comparison.passed) << r.comparison.summary;
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

TEST(CpuConvSolvers, AllRegisteredBeforeTheReferences) {
  const auto list = dnn::conv_solvers("cpu");
  std::vector<std::string> names;
  for (const auto* s : list) names.emplace_back(s->name());
  for (const char* want : {"cpu.conv.gemm_1x1", "cpu.conv.winograd_f4x3", "cpu.conv.depthwise", "cpu.conv.direct",
                           "cpu.conv.im2col_gemm"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  }
  // The list file puts the three references last, forward's first.
  ASSERT_GE(names.size(), 3u);
  EXPECT_EQ(names[names.size() - 3], "ref.conv.direct");
  EXPECT_EQ(names[names.size() - 2], "ref.conv.bwd_data");
  EXPECT_EQ(names[names.size() - 1], "ref.conv.bwd_weights");
}

TEST(CpuConvGemm1x1, MatchesReference) {
  for (Layout l : kLayouts) {
    for (DType d : kDtypes) {
      expect_pass("cpu.conv.gemm_1x1", make(2, 17, 31, 29, 23, 1, 1, 0, 1, 1, 1, l, d));
    }
    expect_pass("cpu.conv.gemm_1x1", make(1, 64, 7, 7, 96, 1, 1, 0, 1, 1, 1, l));
    expect_pass("cpu.conv.gemm_1x1", make(3, 32, 9, 5, 64, 1, 1, 0, 1, 2, 2, l));   // groups, dilation ignored
    expect_pass("cpu.conv.gemm_1x1", make(1, 3, 40, 40, 5, 1, 1, 0, 1, 1, 1, l));  // columns split
    expect_pass("cpu.conv.gemm_1x1", make(3, 40, 7, 7, 70, 1, 1, 0, 1, 1, 2, l));  // small planes side by side
    expect_pass("cpu.conv.gemm_1x1", make(9, 4096, 7, 5, 20, 1, 1, 0, 1, 1, 1, l)); // ... in two GEMMs
    // C past one 256-deep packed slice, HW past one 512-column block, K not a multiple of 6.
    expect_pass("cpu.conv.gemm_1x1", make(1, 300, 23, 29, 70, 1, 1, 0, 1, 1, 1, l));
    expect_pass("cpu.conv.gemm_1x1", make(2, 257, 17, 31, 97, 1, 1, 0, 1, 1, 1, l));
  }
}

// Batch 1 on planes too small for a column block per worker: with two or more workers the NCHW
// GEMM is also cut into row blocks of W (one column block and K prime; three column blocks;
// blocks over 128 rows; groups), each starting on a whole register tile.
TEST(CpuConvGemm1x1, SplitsRowsOfSmallBatchOnePlanes) {
  for (Layout l : kLayouts) {
    expect_pass("cpu.conv.gemm_1x1", make(1, 70, 13, 15, 97, 1, 1, 0, 1, 1, 1, l));
    expect_pass("cpu.conv.gemm_1x1", make(1, 33, 29, 27, 50, 1, 1, 0, 1, 1, 1, l));
    expect_pass("cpu.conv.gemm_1x1", make(1, 300, 11, 19, 601, 1, 1, 0, 1, 1, 1, l));
    expect_pass("cpu.conv.gemm_1x1", make(1, 42, 11, 17, 150, 1, 1, 0, 1, 1, 3, l));
  }
  for (DType d : {DType::f16, DType::bf16}) {
    expect_pass("cpu.conv.gemm_1x1", make(1, 70, 13, 15, 97, 1, 1, 0, 1, 1, 1, Layout::nchw, d));
  }
}

// Strided 1x1 (a downsample): the pixels on the stride's grid gathered, then the unit-stride paths
// on them. Odd and prime sizes whose last row or column is off the grid, strides 2 and 3 and
// unequal ones, channels not a multiple of 16 (the gather's channel blocks), groups, batch 1 (rows
// split) and past one run of gathered images, 7x7-or-smaller outputs (the side-by-side path), f16.
TEST(CpuConvGemm1x1, StridedGathersTheGrid) {
  for (Layout l : kLayouts) {
    expect_pass("cpu.conv.gemm_1x1", make(1, 37, 29, 27, 101, 1, 1, 0, 2, 1, 1, l));  // 15x14, batch 1
    expect_pass("cpu.conv.gemm_1x1", make(2, 50, 28, 28, 67, 1, 1, 0, 2, 1, 1, l));   // 14x14
    expect_pass("cpu.conv.gemm_1x1", make(3, 33, 14, 13, 70, 1, 1, 0, 2, 1, 1, l));   // 7x7: side by side
    expect_pass("cpu.conv.gemm_1x1", make(1, 64, 13, 14, 130, 1, 1, 0, 2, 1, 1, l));  // 7x7, batch 1
    expect_pass("cpu.conv.gemm_1x1", make(2, 42, 23, 19, 30, 1, 1, 0, 3, 1, 3, l));   // stride 3, groups
    expect_pass("cpu.conv.gemm_1x1", make(1, 300, 31, 17, 97, 1, 1, 0, 2, 1, 1, l));  // C past one slice
    ConvProblem unequal = make(2, 19, 17, 23, 29, 1, 1, 0, 1, 1, 1, l);
    unequal.stride_h = 3;  // rows and columns apart by different steps
    unequal.stride_w = 2;
    expect_pass("cpu.conv.gemm_1x1", unequal);
  }
  // Images past one run of gathered pixels (4 MiB): three runs of 9, 9 and 2 images.
  expect_pass("cpu.conv.gemm_1x1", make(20, 1024, 21, 19, 24, 1, 1, 0, 2, 1, 1));
  expect_pass("cpu.conv.gemm_1x1", make(20, 1024, 21, 19, 24, 1, 1, 0, 2, 1, 1, Layout::nhwc));
  for (DType d : {DType::f16, DType::bf16}) {
    expect_pass("cpu.conv.gemm_1x1", make(2, 37, 29, 27, 41, 1, 1, 0, 2, 1, 1, Layout::nchw, d));
  }
}

TEST(CpuConvSolvers, RowBlocksFillTheWorkers) {
  using backends::cpu::row_block_count;
  using backends::cpu::row_block_start;
  EXPECT_EQ(row_block_count(1, 256, 2), 4);  // one task: two row blocks per worker
  EXPECT_EQ(row_block_count(3, 128, 2), 2);  // three: six tasks, three each
  EXPECT_EQ(row_block_count(8, 128, 2), 1);  // enough already
  EXPECT_EQ(row_block_count(2, 128, 2), 1);  // even already
  EXPECT_EQ(row_block_count(1, 60, 2), 2);   // at most rows / 24 blocks
  EXPECT_EQ(row_block_count(1, 20, 2), 1);
  EXPECT_EQ(row_block_count(1, 256, 1), 1);
  for (const std::int64_t rows : {24, 97, 256, 601}) {
    for (const std::int64_t blocks : {1, 2, 3, 4, 7}) {
      if (blocks > 1 && blocks > rows / 24) continue;
      EXPECT_EQ(row_block_start(rows, 0, blocks), 0);
      EXPECT_EQ(row_block_start(rows, blocks, blocks), rows);
      for (std::int64_t b = 1; b < blocks; ++b) {
        const std::int64_t k0 = row_block_start(rows, b, blocks);
        EXPECT_EQ(k0 % 6, 0) << rows << " " << b << "/" << blocks;
        EXPECT_GT(k0, row_block_start(rows, b - 1, blocks));
        EXPECT_LT(k0, rows);
      }
    }
  }
}

TEST(CpuConvGemm1x1, RefusesWhatItCannotDo) {
  expect_refused("cpu.conv.gemm_1x1", make(1, 8, 8, 8, 8, 3, 3, 1, 1, 1, 1), "not 1x1");
  expect_refused("cpu.conv.gemm_1x1", make(1, 8, 8, 8, 8, 1, 1, 1, 1, 1, 1), "padding");
  auto p = make(1, 8, 8, 8, 8, 1, 1, 0, 1, 1, 1);
  p.dtype = DType::i8;
  expect_refused("cpu.conv.gemm_1x1", p, "dtype");
  p.dtype = DType::f32;
  p.direction = dnn::ConvDirection::backward_data;
  expect_refused("cpu.conv.gemm_1x1", p, "forward");
}

TEST(CpuConvIm2colGemm, MatchesReferenceOverShapes) {
  for (Layout l : kLayouts) {
    expect_pass("cpu.conv.im2col_gemm", make(2, 3, 31, 29, 17, 7, 7, 3, 2, 1, 1, l));
    expect_pass("cpu.conv.im2col_gemm", make(1, 17, 31, 29, 23, 3, 3, 1, 1, 1, 1, l));
    expect_pass("cpu.conv.im2col_gemm", make(2, 16, 15, 13, 32, 3, 3, 2, 1, 2, 1, l));   // dilated
    expect_pass("cpu.conv.im2col_gemm", make(1, 32, 12, 11, 32, 3, 3, 1, 2, 1, 32, l));  // depthwise
    expect_pass("cpu.conv.im2col_gemm", make(2, 64, 9, 9, 64, 3, 3, 1, 1, 1, 2, l));     // grouped
    expect_pass("cpu.conv.im2col_gemm", make(1, 23, 17, 19, 5, 5, 5, 2, 1, 1, 1, l));
    expect_pass("cpu.conv.im2col_gemm", make(1, 6, 11, 13, 4, 1, 7, 0, 1, 1, 1, l));
    expect_pass("cpu.conv.im2col_gemm", make(1, 6, 11, 13, 4, 7, 1, 3, 1, 1, 1, l));
    expect_pass("cpu.conv.im2col_gemm", make(2, 8, 9, 9, 8, 1, 1, 0, 2, 1, 1, l));       // strided 1x1
    expect_pass("cpu.conv.im2col_gemm", make(1, 4, 5, 5, 3, 3, 3, 4, 3, 2, 1, l));       // pad > filter reach
    // Stride 2 rows: dilated taps, padding past the reach, rows of several vectors, odd widths.
    expect_pass("cpu.conv.im2col_gemm", make(1, 5, 37, 41, 7, 3, 3, 3, 2, 2, 1, l));
    expect_pass("cpu.conv.im2col_gemm", make(2, 6, 23, 69, 9, 5, 5, 4, 2, 1, 1, l));
    expect_pass("cpu.conv.im2col_gemm", asymmetric(10, 20, 2, l));
    // Stride 2 rows of up to four vectors gathered whole by masks (output widths 64, 33, 17, 7):
    // pixel blocks that start and end inside a row (four images in two blocks each), dilated taps,
    // padding past the reach, a 7x7 filter.
    expect_pass("cpu.conv.im2col_gemm", make(4, 5, 57, 55, 23, 3, 3, 1, 2, 1, 1, l));
    expect_pass("cpu.conv.im2col_gemm", make(4, 3, 33, 65, 7, 3, 3, 2, 2, 2, 1, l));
    expect_pass("cpu.conv.im2col_gemm", make(1, 5, 127, 128, 6, 1, 1, 0, 2, 1, 1, l));
    expect_pass("cpu.conv.im2col_gemm", make(2, 4, 33, 33, 9, 7, 7, 3, 2, 1, 1, l));
    expect_pass("cpu.conv.im2col_gemm", make(1, 7, 13, 13, 11, 3, 3, 4, 2, 1, 1, l));
    expect_pass("cpu.conv.im2col_gemm", make(3, 24, 7, 7, 40, 3, 3, 1, 1, 1, 2, l));   // small planes side by side
    expect_pass("cpu.conv.im2col_gemm", make(5, 512, 14, 14, 24, 3, 3, 1, 2, 1, 1, l)); // ... in two GEMMs
    expect_pass("cpu.conv.im2col_gemm", make(1, 61, 29, 23, 103, 3, 3, 1, 1, 1, 1, l)); // patch 549, K prime
    // Weights packed once per call and shared by the tasks: K > 128 (B packed too), K not a
    // multiple of the 6-row tile, a patch of two 256-deep slices, two groups.
    expect_pass("cpu.conv.im2col_gemm", make(2, 40, 21, 20, 151, 3, 3, 1, 2, 1, 1, l));
    expect_pass("cpu.conv.im2col_gemm", make(1, 80, 20, 20, 298, 3, 3, 1, 2, 1, 2, l));
    // The AVX-512 gather's flat path (stride 1, Wo == W >= 16): dilated taps, rows of padding only.
    expect_pass("cpu.conv.im2col_gemm", make(1, 5, 20, 37, 7, 3, 3, 2, 1, 2, 1, l));
    expect_pass("cpu.conv.im2col_gemm", make(2, 3, 18, 40, 5, 1, 7, 3, 1, 1, 1, l));
    expect_pass("cpu.conv.im2col_gemm", make(2, 32, 17, 16, 16, 3, 3, 1, 1, 1, 8, l));  // grouped, W = 16
    expect_pass("cpu.conv.im2col_gemm", make(1, 6, 14, 14, 10, 3, 3, 1, 1, 1, 1, l));   // W = 14: two wraps
    expect_pass("cpu.conv.im2col_gemm", make(2, 5, 9, 15, 6, 3, 3, 2, 1, 2, 1, l));     // W = 15, dilated
    // ... and its implicit GEMM (<= 16 output channels per group, Ho == H): 8 + 4 channels,
    // pixel chunks starting mid-row, 5x5 with 16 per group.
    expect_pass("cpu.conv.im2col_gemm", make(1, 13, 23, 19, 12, 3, 3, 1, 1, 1, 1, l));
    expect_pass("cpu.conv.im2col_gemm", make(2, 32, 16, 17, 32, 5, 5, 2, 1, 1, 2, l));
    expect_pass("cpu.conv.im2col_gemm", make(2, 64, 28, 28, 64, 3, 3, 1, 1, 1, 32, l));  // rx50-like, 2 per group
    for (DType d : {DType::f16, DType::bf16}) {
      expect_pass("cpu.conv.im2col_gemm", make(2, 17, 31, 29, 23, 3, 3, 1, 2, 1, 1, l, d));
    }
  }
}

// Batch 1 on planes of 64 to 255 output pixels, cut into blocks of at least 64 so two or more
// workers share them: strided 3x3 with K prime, a 7x7 stem, groups, K over 128 rows (B packed), a
// strided 1x1, bf16.
TEST(CpuConvIm2colGemm, BatchOnePlanesOfOnePixelBlock) {
  for (Layout l : kLayouts) {
    expect_pass("cpu.conv.im2col_gemm", make(1, 37, 29, 27, 101, 3, 3, 1, 2, 1, 1, l));
    expect_pass("cpu.conv.im2col_gemm", make(1, 3, 29, 31, 64, 7, 7, 3, 2, 1, 1, l));
    expect_pass("cpu.conv.im2col_gemm", make(1, 30, 13, 17, 150, 3, 3, 1, 1, 1, 3, l));
    expect_pass("cpu.conv.im2col_gemm", make(1, 19, 23, 21, 601, 3, 3, 1, 2, 1, 1, l));
    expect_pass("cpu.conv.im2col_gemm", make(1, 50, 27, 29, 67, 1, 1, 0, 2, 1, 1, l));
  }
  expect_pass("cpu.conv.im2col_gemm", make(1, 37, 29, 27, 101, 3, 3, 1, 2, 1, 1, Layout::nchw, DType::bf16));
}

// The fused f32 epilogue, applied by each solver to its output tiles. In the GEMM solvers at
// AVX-512 the SGEMM applies it as it stores each tile (bias per row in NCHW, per column in NHWC);
// at the lower levels expect_pass also runs, it follows OpenBLAS tile by tile. Each activation the
// kernel takes and one it leaves to the tile pass, bias and residual apart and together, over
// shapes whose channels and pixels cut through the 6x64 register tile, the 96-row block and the
// 256-deep slices, batch 1 and 3, and the solvers' other paths (small planes side by side, groups,
// the implicit GEMM); then direct's and depthwise's tiles, rows and planes.
TEST(CpuConvSolvers, FusedEpilogueMatchesReference) {
  using dnn::Activation;
  using dnn::ConvEpilogue;
  const ConvEpilogue epilogues[] = {
      ConvEpilogue::with(Activation::relu, true, false),
      ConvEpilogue::with(Activation::relu, true, true),
      ConvEpilogue{.bias = true, .residual = true, .activation = Activation::leaky_relu, .alpha = 0.1},
      // Bounds the sums cross, not so tight that they shrink the output's largest magnitude,
      // which the comparison's tolerance is relative to, far below the sums' own.
      ConvEpilogue{.residual = true, .activation = Activation::clip, .alpha = -0.5, .beta = 2},
      ConvEpilogue{.bias = true},
      ConvEpilogue{.residual = true},
      ConvEpilogue::with(Activation::sigmoid, true, true),  // not in the kernel: the tile pass
  };
  const struct {
    const char* solver;
    ConvProblem shape;
  } cases[] = {
      {"cpu.conv.gemm_1x1", make(1, 17, 13, 11, 23, 1, 1, 0, 1, 1, 1)},      // K 23: 6+6+6+5 rows, 143 pixels
      {"cpu.conv.gemm_1x1", make(3, 29, 7, 11, 101, 1, 1, 0, 1, 1, 1)},      // K past one 96-row block
      {"cpu.conv.gemm_1x1", make(2, 300, 5, 19, 37, 1, 1, 0, 1, 1, 1)},      // C in two 256-deep slices
      {"cpu.conv.gemm_1x1", make(2, 34, 9, 9, 38, 1, 1, 0, 1, 1, 2)},        // groups of 19 channels
      {"cpu.conv.gemm_1x1", make(3, 40, 7, 7, 70, 1, 1, 0, 1, 1, 1)},        // small planes side by side
      {"cpu.conv.im2col_gemm", make(1, 29, 17, 19, 37, 3, 3, 1, 1, 1, 1)},   // patch 261: two slices
      {"cpu.conv.im2col_gemm", make(2, 5, 23, 13, 101, 3, 3, 1, 2, 1, 1)},   // strided, K 101
      {"cpu.conv.im2col_gemm", make(2, 40, 21, 20, 151, 3, 3, 1, 2, 1, 1)},  // K > 128: B packed too
      {"cpu.conv.im2col_gemm", make(3, 24, 7, 7, 40, 3, 3, 1, 1, 1, 2)},     // small planes side by side
      {"cpu.conv.im2col_gemm", make(1, 13, 23, 19, 12, 3, 3, 1, 1, 1, 1)},   // implicit GEMM
      {"cpu.conv.im2col_gemm", make(1, 37, 29, 27, 101, 3, 3, 1, 2, 1, 1)},  // batch 1: one pixel block
      {"cpu.conv.gemm_1x1", make(1, 70, 13, 15, 97, 1, 1, 0, 1, 1, 1)},      // batch 1: rows split
      {"cpu.conv.gemm_1x1", make(1, 40, 7, 7, 70, 1, 1, 0, 1, 1, 2)},        // batch 1 small plane: in place
      {"cpu.conv.gemm_1x1", make(1, 37, 29, 27, 101, 1, 1, 0, 2, 1, 1)},     // strided: rows split
      {"cpu.conv.gemm_1x1", make(3, 33, 14, 13, 70, 1, 1, 0, 2, 1, 1)},      // strided to 7x7, side by side
      {"cpu.conv.gemm_1x1", make(20, 1024, 21, 19, 24, 1, 1, 0, 2, 1, 1)},   // strided, three runs of images
      {"cpu.conv.im2col_gemm", make(1, 24, 7, 5, 82, 3, 3, 1, 1, 1, 2)},     // ... and straight into y
      {"cpu.conv.direct", make(2, 5, 12, 11, 19, 5, 3, 2, 2, 1, 1)},
      {"cpu.conv.direct", make(1, 12, 9, 13, 21, 3, 3, 1, 1, 2, 3)},       // groups of 7 outputs
      {"cpu.conv.depthwise", make(2, 19, 13, 17, 19, 3, 3, 1, 1, 1, 19)},  // planes read in place
      {"cpu.conv.depthwise", make(1, 17, 31, 29, 17, 3, 3, 1, 2, 1, 17)},  // strided: padded planes
      {"cpu.conv.depthwise", make(2, 33, 7, 7, 33, 3, 3, 1, 1, 1, 33)},    // small planes packed
      {"cpu.conv.depthwise", make(2, 17, 14, 13, 17, 3, 3, 1, 2, 1, 17)},  // stride 2: channel blocks
  };
  for (const auto& c : cases) {
    for (Layout l : kLayouts) {
      for (const ConvEpilogue& e : epilogues) {
        ConvProblem p = c.shape;
        p.layout = l;
        p.epilogue = e;
        expect_pass(c.solver, p);
      }
    }
  }
}

TEST(CpuConvDepthwise, MatchesReference) {
  for (Layout l : kLayouts) {
    for (DType d : kDtypes) expect_pass("cpu.conv.depthwise", make(2, 17, 31, 29, 17, 3, 3, 1, 1, 1, 17, l, d));
    expect_pass("cpu.conv.depthwise", make(2, 144, 14, 14, 144, 3, 3, 1, 1, 1, 144, l));
    expect_pass("cpu.conv.depthwise", make(1, 7, 56, 56, 7, 3, 3, 1, 1, 1, 7, l));        // mbv2.dw's plane
    expect_pass("cpu.conv.depthwise", make(1, 5, 37, 47, 5, 3, 3, 1, 1, 1, 5, l));        // prime plane
    expect_pass("cpu.conv.depthwise", make(1, 40, 31, 29, 40, 3, 3, 1, 2, 1, 40, l));    // stride 2
    // Stride 2 through the padded, phase-split copy: rows of several vectors, odd widths, no
    // padding and padding past the filter's reach.
    expect_pass("cpu.conv.depthwise", make(1, 11, 13, 71, 11, 3, 3, 0, 2, 1, 11, l));
    expect_pass("cpu.conv.depthwise", make(1, 7, 19, 67, 7, 5, 5, 3, 2, 1, 7, l));
    expect_pass("cpu.conv.depthwise", make(1, 23, 17, 19, 23, 5, 5, 2, 1, 1, 23, l));    // 5x5
    expect_pass("cpu.conv.depthwise", make(1, 9, 20, 21, 9, 3, 3, 2, 1, 2, 9, l));       // dilated
    expect_pass("cpu.conv.depthwise", make(1, 3, 9, 33, 3, 7, 7, 3, 3, 1, 3, l));        // stride 3, 7x7
    expect_pass("cpu.conv.depthwise", make(1, 5, 6, 7, 5, 1, 7, 0, 1, 1, 5, l));         // 1x7
    expect_pass("cpu.conv.depthwise", make(1, 5, 6, 7, 5, 7, 1, 3, 1, 1, 5, l));         // 7x1
    expect_pass("cpu.conv.depthwise", make(1, 8, 4, 4, 8, 3, 3, 3, 1, 1, 8, l));         // padding wider than reach
    expect_pass("cpu.conv.depthwise", asymmetric(12, 12, 12, l));
    expect_pass("cpu.conv.depthwise", make(2, 10, 13, 9, 10, 3, 3, 0, 1, 1, 10, l));     // 3x3 unpadded
    expect_pass("cpu.conv.depthwise", make(1, 10, 25, 20, 10, 3, 3, 2, 1, 1, 10, l));    // 3x3 padding 2
    expect_pass("cpu.conv.depthwise", make(1, 4, 6, 3, 4, 3, 3, 1, 1, 1, 4, l));         // narrower than a vector
    auto wide_stride = asymmetric(12, 12, 12, l);
    std::swap(wide_stride.stride_h, wide_stride.stride_w);  // stride 1 x 2: the padded-plane path
    expect_pass("cpu.conv.depthwise", wide_stride);
  }
}

// The small-plane loops at AVX-512 (the lower levels take the plane loops): 3x3 "same" planes read
// as packed runs (7x7, prime and oblong sizes, the narrowest width, a run ending in a full
// vector) and width stride 2 through 16-channel blocks (14 -> 7, odd and prime inputs, unpadded;
// 28 -> 14, a 40x40 input and height stride 1 take them on one worker, the plane loop on more),
// over channel counts that leave the last block part full or fill it, batch 1 and 2.
TEST(CpuConvDepthwise, SmallPlanesMatchReference) {
  for (const std::int64_t c : {3, 16, 17, 33}) {
    for (const std::int64_t n : {1, 2}) {
      expect_pass("cpu.conv.depthwise", make(n, c, 7, 7, c, 3, 3, 1, 1, 1, c));
      expect_pass("cpu.conv.depthwise", make(n, c, 14, 14, c, 3, 3, 1, 2, 1, c));
      expect_pass("cpu.conv.depthwise", make(n, c, 13, 13, c, 3, 3, 1, 2, 1, c));
    }
    expect_pass("cpu.conv.depthwise", make(1, c, 5, 5, c, 3, 3, 1, 1, 1, c));
    expect_pass("cpu.conv.depthwise", make(1, c, 9, 9, c, 3, 3, 1, 1, 1, c));
    expect_pass("cpu.conv.depthwise", make(1, c, 2, 2, c, 3, 3, 1, 1, 1, c));
    expect_pass("cpu.conv.depthwise", make(1, c, 28, 28, c, 3, 3, 1, 2, 1, c));
    expect_pass("cpu.conv.depthwise", make(1, c, 7, 7, c, 3, 3, 1, 2, 1, c));
    expect_pass("cpu.conv.depthwise", make(1, c, 3, 3, c, 3, 3, 1, 2, 1, c));
    expect_pass("cpu.conv.depthwise", make(1, c, 15, 11, c, 3, 3, 0, 2, 1, c));
  }
  for (DType d : kDtypes) {  // f16 and bf16 run the f32 loops on staged copies
    expect_pass("cpu.conv.depthwise", make(2, 17, 7, 7, 17, 3, 3, 1, 1, 1, 17, Layout::nchw, d));
    expect_pass("cpu.conv.depthwise", make(2, 17, 14, 14, 17, 3, 3, 1, 2, 1, 17, Layout::nchw, d));
  }
  auto oblong = make(2, 19, 13, 3, 19, 3, 3, 1, 1, 1, 19);
  expect_pass("cpu.conv.depthwise", oblong);
  oblong.h = 16;
  oblong.w = 4;  // 64 pixels: the last packed vector full
  expect_pass("cpu.conv.depthwise", oblong);
  expect_pass("cpu.conv.depthwise", make(1, 24, 40, 40, 24, 3, 3, 1, 2, 1, 24));
  auto height_stride_1 = make(1, 20, 9, 12, 20, 3, 3, 1, 2, 1, 20);
  height_stride_1.stride_h = 1;
  expect_pass("cpu.conv.depthwise", height_stride_1);
}

TEST(CpuConvDepthwise, RefusesNonDepthwise) {
  expect_refused("cpu.conv.depthwise", make(1, 8, 8, 8, 8, 3, 3, 1, 1, 1, 1), "not depthwise");
  expect_refused("cpu.conv.depthwise", make(1, 8, 8, 8, 8, 3, 3, 1, 1, 1, 4), "not depthwise");
  expect_refused("cpu.conv.depthwise", make(1, 8, 8, 8, 16, 3, 3, 1, 1, 1, 8), "multiplier");
}

TEST(CpuConvDirect, MatchesReferenceOverShapes) {
  for (Layout l : kLayouts) {
    for (DType d : kDtypes) expect_pass("cpu.conv.direct", make(2, 17, 31, 29, 23, 3, 3, 1, 1, 1, 1, l, d));
    expect_pass("cpu.conv.direct", make(2, 3, 31, 29, 17, 7, 7, 3, 2, 1, 1, l));     // conv1-like
    expect_pass("cpu.conv.direct", make(1, 16, 15, 13, 40, 3, 3, 2, 1, 2, 1, l));    // dilated, K tail
    expect_pass("cpu.conv.direct", make(1, 32, 12, 11, 32, 3, 3, 1, 2, 1, 32, l));   // depthwise
    expect_pass("cpu.conv.direct", make(2, 64, 9, 9, 64, 3, 3, 1, 1, 1, 8, l));      // 8 channels per group
    expect_pass("cpu.conv.direct", make(1, 46, 9, 10, 46, 3, 3, 1, 1, 1, 2, l));     // 23 per group
    expect_pass("cpu.conv.direct", make(1, 23, 17, 19, 5, 5, 5, 2, 1, 1, 1, l));
    expect_pass("cpu.conv.direct", make(1, 6, 11, 13, 4, 1, 7, 0, 1, 1, 1, l));
    expect_pass("cpu.conv.direct", make(1, 6, 11, 13, 4, 7, 1, 3, 1, 1, 1, l));
    expect_pass("cpu.conv.direct", make(2, 8, 9, 9, 24, 1, 1, 0, 2, 1, 1, l));      // strided 1x1
    expect_pass("cpu.conv.direct", make(1, 4, 5, 5, 3, 3, 3, 4, 3, 2, 1, l));        // padding past the reach
    expect_pass("cpu.conv.direct", make(1, 5, 3, 40, 33, 3, 3, 1, 1, 1, 1, l));      // long rows, ragged K
    expect_pass("cpu.conv.direct", asymmetric(10, 20, 2, l));
    expect_pass("cpu.conv.direct", make(1, 300, 5, 7, 16, 3, 3, 1, 1, 1, 1, l));     // several channel chunks
  }
}

TEST(CpuConvWinograd, MatchesReferenceOnTrickySizes) {
  const std::string wino = "cpu.conv.winograd_f4x3";
  for (Layout l : kLayouts) {
    for (DType d : kDtypes) expect_pass(wino, make(2, 17, 31, 29, 23, 3, 3, 1, 1, 1, 1, l, d));
    expect_pass(wino, make(1, 8, 4, 4, 16, 3, 3, 1, 1, 1, 1, l));      // one tile
    expect_pass(wino, make(1, 8, 5, 5, 16, 3, 3, 1, 1, 1, 1, l));      // tiles overhang by 3
    expect_pass(wino, make(1, 3, 3, 3, 5, 3, 3, 0, 1, 1, 1, l));       // 1x1 output
    expect_pass(wino, make(3, 64, 14, 14, 64, 3, 3, 1, 1, 1, 1, l));   // the transpose path
    expect_pass(wino, make(1, 24, 9, 30, 40, 3, 3, 0, 1, 1, 1, l));    // no padding, K not /16
    expect_pass(wino, make(1, 16, 7, 7, 8, 3, 3, 2, 1, 1, 1, l));      // padding 2
    expect_pass(wino, make(2, 256, 7, 7, 256, 3, 3, 1, 1, 1, 1, l));   // long reductions
    expect_pass(wino, make(2, 16, 21, 19, 24, 3, 3, 2, 1, 2, 1, l));   // dilation 2: four phases
    expect_pass(wino, make(1, 9, 17, 23, 8, 3, 3, 3, 1, 3, 1, l));     // dilation 3, phases of unequal size
    auto mixed = asymmetric(16, 16, 1, l);                            // dilation 1 x 2, padding 2 x 1
    mixed.x = 3;
    mixed.stride_h = 1;
    expect_pass(wino, mixed);
  }
}

TEST(CpuConvWinograd, ManyTilesSpanSeveralPasses) {
  // A pass holds 12 MiB of V and M, 36 x (C + K) floats per tile: with C = 1024 and K = 16 that
  // is 84 tiles, so these 4 x 25 tiles take two passes and the second starts inside image 3.
  // 1024 input channels also exercise the chunked reduction's accuracy.
  expect_pass("cpu.conv.winograd_f4x3", make(4, 1024, 20, 20, 16, 3, 3, 1, 1, 1, 1));
  expect_pass("cpu.conv.winograd_f4x3", make(4, 1024, 20, 20, 16, 3, 3, 1, 1, 1, 1, Layout::nhwc));
}

TEST(CpuConvWinograd, RefusesOtherShapes) {
  const std::string wino = "cpu.conv.winograd_f4x3";
  expect_refused(wino, make(1, 8, 8, 8, 8, 5, 5, 2, 1, 1, 1), "not 3x3");
  expect_refused(wino, make(1, 8, 8, 8, 8, 1, 3, 0, 1, 1, 1), "not 3x3");
  expect_refused(wino, make(1, 8, 8, 8, 8, 3, 3, 1, 2, 1, 1), "stride");
  expect_refused(wino, make(1, 8, 8, 8, 8, 3, 3, 1, 1, 1, 2), "groups");
}

TEST(CpuConvIm2colGemm, WorkspaceIsBoundedForLargeImages) {
  // 512 channels of 3x3 on a 64x64 image: the full column matrix would be 75 MB per image.
  const auto p = make(8, 512, 64, 64, 512, 3, 3, 2, 1, 2, 1);
  const dnn::ConvSolver* s = dnn::find_conv_solver("cpu", "cpu.conv.im2col_gemm");
  ASSERT_NE(s, nullptr);
  EXPECT_LE(s->workspace_bytes(p, runtime::device("cpu")), std::size_t{64} << 20);
}

TEST(CpuConvSolvers, RunRejectsBadArgumentsBeforeEnqueueing) {
  const auto p = make(1, 16, 9, 9, 16, 3, 3, 1, 1, 1, 1);
  const runtime::Device cpu = runtime::device("cpu");
  runtime::Stream stream(cpu);
  std::vector<float> x(16 * 81), w(16 * 16 * 9), y(16 * 81);
  for (const auto* s : dnn::conv_solvers("cpu")) {
    if (s->is_reference() || !s->check(p, cpu)) continue;
    SCOPED_TRACE(std::string(s->name()));
    const std::size_t need = s->workspace_bytes(p, cpu);
    std::vector<std::byte> ws(need + 1);
    auto expect_invalid = [&](const dnn::ConvArgs& args, const std::string& what) {
      try {
        s->run(stream, p, args);
        ADD_FAILURE() << "no error for " << what;
      } catch (const Error& e) {
        EXPECT_EQ(e.status(), Status::invalid_argument) << e.what();
        EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
      }
    };
    expect_invalid({nullptr, w.data(), y.data(), ws.data(), need}, "x is null");
    expect_invalid({x.data(), nullptr, y.data(), ws.data(), need}, "w is null");
    expect_invalid({x.data(), w.data(), nullptr, ws.data(), need}, "y is null");
    if (need > 0) {
      expect_invalid({x.data(), w.data(), y.data(), ws.data(), need - 1}, "workspace");
      expect_invalid({x.data(), w.data(), y.data(), nullptr, need}, "workspace");
    }
    // A solver asked to run a problem its check() refuses says why instead of computing garbage.
    auto refused = p;
    refused.dtype = DType::i8;
    EXPECT_THROW(s->run(stream, refused, {x.data(), w.data(), y.data(), ws.data(), need}), Error);
    stream.synchronize();
  }
}

TEST(CpuConvSolvers, WorkspaceDoesNotDependOnTheBatchBeyondABound) {
  // Per-worker buffers and tile passes keep each solver's scratch bounded as the batch grows.
  const runtime::Device cpu = runtime::device("cpu");
  for (const auto* s : dnn::conv_solvers("cpu")) {
    if (s->is_reference()) continue;
    for (auto p : {make(1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 1), make(1, 64, 56, 56, 64, 1, 1, 0, 1, 1, 1),
                   make(1, 64, 56, 56, 64, 3, 3, 1, 1, 1, 64)}) {
      if (!s->check(p, cpu)) continue;
      const std::size_t one = s->workspace_bytes(p, cpu);
      p.n = 256;
      EXPECT_LE(s->workspace_bytes(p, cpu), std::max<std::size_t>(one, std::size_t{64} << 20))
          << s->name() << " " << p.key();
    }
  }
}

TEST(CpuConvLowPrecision, StagingChunksTheBatch) {
  // Each image is 2 x 64 x 128 x 128 floats = 8 MiB, so 32 MiB of staging holds 4 of 10 images
  // and the last chunk is partial.
  const auto p = make(10, 64, 128, 128, 64, 1, 1, 0, 1, 1, 1, Layout::nchw, DType::f16);
  expect_pass("cpu.conv.gemm_1x1", p);
}

}  // namespace
}  // namespace galley
