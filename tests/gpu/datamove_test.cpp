// The single-source gpu data-movement solvers (gpu.concat.copy, gpu.split.copy,
// gpu.transpose.tiled, gpu.pad.copy, gpu.reorder.tiled) against the cpu references, bit for bit:
// every kernel path (vectorised copy, vector and scalar rows, tiled transpose, one-launch parts,
// vector and scalar pad), odd shapes, every dtype, both layouts, 49 and 96 inputs, every
// permutation of rank 4. Skips without a CUDA or HIP device.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "dnn/op_verify.hpp"
#include "galley/dnn/data_movement.hpp"
#include "galley/dnn/datamove_problem.hpp"
#include "gpu_test_util.hpp"

namespace galley::dnn {
namespace {

std::optional<runtime::Device> gpu(std::string& why) {
  std::string cuda_why, hip_why;
  if (auto d = testing::first_device("cuda", cuda_why)) return d;
  if (auto d = testing::first_device("hip", hip_why)) return d;
  why = cuda_why + "; " + hip_why;
  return std::nullopt;
}

#define REQUIRE_GPU(device)                               \
  std::string why;                                        \
  const std::optional<runtime::Device> device = gpu(why); \
  if (!device) GTEST_SKIP() << why

// Every solver of P's list that takes p against the cpu reference, bit for bit; all but the
// register transposes (".regs", same-dtype moves of whole 16-byte vectors only) take every problem.
template <class P>
void expect_gpu_exact(const runtime::Device& device, const P& p) {
  SCOPED_TRACE(p.key());
  int checked = 0;
  for (const Solver<P>* s : solvers_for<P>(device.backend())) {
    const Applicability a = s->check(p, device);
    const bool partial = s->name().ends_with(".regs");
    if (partial && !a) continue;
    ASSERT_TRUE(a) << s->name() << ": " << a.reason;
    const OpVerification v = check_against_reference(device, ProblemRef::of(p), *s);
    EXPECT_TRUE(v.passed) << s->name() << ": " << v.summary;
    EXPECT_EQ(v.max_rel_err, 0.0) << s->name() << ": " << v.summary;
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

const DType kAllDtypes[] = {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i8};
const DType kFloatDtypes[] = {DType::f32, DType::f16, DType::bf16};

TEST(GpuDataMove, ConcatAndSplit) {
  REQUIRE_GPU(device);
  for (DType t : kAllDtypes) {
    for (Layout l : {Layout::nchw, Layout::nhwc}) {
      // Odd runs (scalar units) and runs of multiples of 8 (16-byte vectors).
      for (const ConcatProblem& c :
           {ConcatProblem{t, l, {1, 43, 31, 29}, 1, {3, 17, 23}},
            ConcatProblem{t, l, {2, 64, 8, 8}, 1, {16, 32, 16}},
            ConcatProblem{t, l, {5, 3, 7, 29}, 0, {2, 3}}, ConcatProblem{t, l, {2, 3, 7, 13}, 3, {6, 7}}}) {
        expect_gpu_exact(*device, c);
        expect_gpu_exact(*device, c.backward());
      }
    }
  }
  for (int count : {49, static_cast<int>(kMaxMultiArgs)}) {
    ConcatProblem c{DType::f16, Layout::nhwc, {2, 0, 7, 7}, 1, {}};
    for (int i = 0; i < count; ++i) c.sizes.push_back(8 * (1 + i % 4));
    c.dims[1] = std::accumulate(c.sizes.begin(), c.sizes.end(), std::int64_t(0));
    expect_gpu_exact(*device, c);
    expect_gpu_exact(*device, c.backward());
  }
  expect_gpu_exact(*device, ConcatProblem{DType::f32, Layout::nchw, {3, 5, 7, 11, 2, 3}, 4, {1, 1}});
}

TEST(GpuDataMove, EveryPermutationOfRank4AndTiles) {
  REQUIRE_GPU(device);
  std::vector<int> perm{0, 1, 2, 3};
  do {
    for (DType t : kAllDtypes) expect_gpu_exact(*device, TransposeProblem{t, {3, 17, 31, 29}, perm});
  } while (std::next_permutation(perm.begin(), perm.end()));
  expect_gpu_exact(*device, TransposeProblem{DType::f32, {67, 131}, {1, 0}});
  expect_gpu_exact(*device, TransposeProblem{DType::f16, {4, 64, 56, 56}, {0, 2, 3, 1}});
  expect_gpu_exact(*device, TransposeProblem{DType::bf16, {2, 3, 5, 7, 11, 4}, {5, 3, 1, 0, 2, 4}});
  expect_gpu_exact(*device, TransposeProblem{DType::f32, {2, 3, 8, 7, 7}, {0, 2, 1, 3, 4}});
  expect_gpu_exact(*device, TransposeProblem{DType::f32, {1000003}, {0}});
  // The 16-byte tiled path: both swapped dims whole vectors for every element size (1, 2 and 4
  // bytes: 16, 8 and 4 elements) but not whole tiles (128, 64 and 32), so edge tiles are partial.
  for (DType t : kAllDtypes) {
    expect_gpu_exact(*device, TransposeProblem{t, {2, 80, 3, 48}, {0, 2, 3, 1}});
    expect_gpu_exact(*device, TransposeProblem{t, {3, 144, 80}, {0, 2, 1}});
  }
}

TEST(GpuDataMove, PadEverySideBothDirections) {
  REQUIRE_GPU(device);
  for (DType t : kFloatDtypes) {
    for (Layout l : {Layout::nchw, Layout::nhwc}) {
      for (const std::vector<std::int64_t>& dims : {std::vector<std::int64_t>{2, 3, 31, 29}, {2, 16, 8, 8}}) {
        for (std::size_t k = 0; k < 4; ++k) {
          for (bool before_side : {true, false}) {
            std::vector<std::int64_t> b(4, 0), a(4, 0);
            (before_side ? b : a)[k] = 2;
            const PadProblem p{t, l, dims, b, a, -1.5};
            expect_gpu_exact(*device, p);
            expect_gpu_exact(*device, p.backward());
          }
        }
        const PadProblem all{t, l, dims, {1, 2, 3, 1}, {2, 1, 1, 3}, -65504.0};
        expect_gpu_exact(*device, all);
        expect_gpu_exact(*device, all.backward());
      }
    }
  }
}

TEST(GpuDataMove, ReorderEveryDtypeAndLayoutPair) {
  REQUIRE_GPU(device);
  for (DType from : kFloatDtypes) {
    for (DType to : kFloatDtypes) {
      for (Layout lf : {Layout::nchw, Layout::nhwc}) {
        for (Layout lt : {Layout::nchw, Layout::nhwc}) {
          expect_gpu_exact(*device, ReorderProblem{{2, 17, 31, 29}, from, lf, to, lt});
          expect_gpu_exact(*device, ReorderProblem{{2, 64, 8, 8}, from, lf, to, lt});
        }
      }
    }
  }
  // The wide 16-byte tiles (128 x 128 halves, 64 x 64 floats), taken only where they give enough
  // blocks: 1280 and more here, with partial edge tiles on both swapped dims (136 channels, a
  // plane of 576), in both directions.
  for (DType t : kFloatDtypes) {
    expect_gpu_exact(*device, ReorderProblem{{128, 136, 24, 24}, t, Layout::nhwc, t, Layout::nchw});
    expect_gpu_exact(*device, ReorderProblem{{128, 136, 24, 24}, t, Layout::nchw, t, Layout::nhwc});
  }
}

// The register-transpose path (same dtype, both swapped dims whole 16-byte vectors): each thread
// moves an 8x8 block of halves (4x4 floats, 16x16 bytes), a warp a tile of 8 x 4 such blocks. Channels
// and planes that are and are not whole warp tiles (136 channels, a plane of 7 x 8 = 56, of 8),
// batch 1, a bf16 plane of 3136 (the figures' 56 x 56), both directions, and every element size.
TEST(GpuDataMove, ReorderRegisterTransposeEdges) {
  REQUIRE_GPU(device);
  for (DType t : kAllDtypes) {
    for (const std::vector<std::int64_t>& dims :
         {std::vector<std::int64_t>{1, 136, 7, 8}, {3, 16, 1, 8}, {2, 64, 4, 16}, {1, 40, 13, 24}}) {
      expect_gpu_exact(*device, TransposeProblem{t, dims, {0, 2, 3, 1}});
      expect_gpu_exact(*device, TransposeProblem{t, {dims[0], dims[2], dims[3], dims[1]}, {0, 3, 1, 2}});
    }
  }
  for (DType t : kFloatDtypes) {
    expect_gpu_exact(*device, ReorderProblem{{1, 136, 7, 8}, t, Layout::nhwc, t, Layout::nchw});
    expect_gpu_exact(*device, ReorderProblem{{2, 256, 56, 56}, t, Layout::nhwc, t, Layout::nchw});
    expect_gpu_exact(*device, ReorderProblem{{2, 256, 56, 56}, t, Layout::nchw, t, Layout::nhwc});
  }
}

// What the register transposes take and refuse, with the reason naming the value.
TEST(GpuDataMove, RegisterTransposeClaims) {
  REQUIRE_GPU(device);
  const auto* reorder = find_solver_for<ReorderProblem>(device->backend(), "gpu.reorder.regs");
  const auto* transpose = find_solver_for<TransposeProblem>(device->backend(), "gpu.transpose.regs");
  ASSERT_NE(reorder, nullptr);
  ASSERT_NE(transpose, nullptr);
  EXPECT_TRUE(reorder->check(
      ReorderProblem{{32, 256, 56, 56}, DType::f16, Layout::nhwc, DType::f16, Layout::nchw}, *device));
  EXPECT_TRUE(reorder->check(ReorderProblem{{2, 8, 3, 4}, DType::f32, Layout::nchw, DType::f32, Layout::nhwc},
                             *device));
  const auto refused = [&](const Applicability& a, const std::string& word) {
    EXPECT_FALSE(a);
    EXPECT_NE(a.reason.find(word), std::string::npos) << a.reason;
  };
  refused(reorder->check(ReorderProblem{{2, 64, 8, 8}, DType::f32, Layout::nhwc, DType::f16, Layout::nchw},
                         *device),
          "converts");
  refused(reorder->check(ReorderProblem{{2, 17, 8, 8}, DType::f16, Layout::nhwc, DType::f16, Layout::nchw},
                         *device),
          "17");
  refused(reorder->check(ReorderProblem{{2, 64, 8, 8}, DType::f16, Layout::nhwc, DType::f16, Layout::nhwc},
                         *device),
          "unit-stride");
  refused(transpose->check(TransposeProblem{DType::i8, {2, 64, 8, 8}, {0, 2, 3, 1}}, *device), "1 bytes");
  EXPECT_FALSE(
      reorder->check(ReorderProblem{{2, 64, 8, 8}, DType::f16, Layout::nhwc, DType::f16, Layout::nchw},
                     runtime::device("cpu")));
}

TEST(GpuDataMove, ConvertRunsOnTheDevice) {
  REQUIRE_GPU(device);
  runtime::Stream stream(*device);
  std::vector<float> host(2 * 3 * 5 * 7);
  std::iota(host.begin(), host.end(), -50.0f);
  Tensor x = Tensor::empty(stream, TensorDesc::contiguous(DType::f32, {2, 3, 5, 7}));
  x.copy_from_host(stream, host.data(), host.size() * sizeof(float));
  Tensor h = Tensor::empty(stream, TensorDesc::packed(DType::bf16, Layout::nhwc, 2, 3, 5, 7));
  Tensor back = Tensor::empty(stream, x.desc());
  convert(stream, x, h);
  reorder(stream, h, back);
  EXPECT_EQ(back.to_host<float>(stream), host);
}

}  // namespace
}  // namespace galley::dnn
