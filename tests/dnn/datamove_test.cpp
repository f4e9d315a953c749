// The data-movement ops on the cpu backend: keys, validation naming the field, the references on
// hand-computed cases, every cpu solver against the reference (bit-exact) over odd shapes, every
// dtype and both layouts, backward as the adjoint of forward, and the Tensor entry points.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "dnn/op_verify.hpp"
#include "dnn/ref_datamove.hpp"
#include "dnn/tensor_data.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/data_movement.hpp"
#include "galley/dnn/datamove_problem.hpp"
#include "galley/runtime/device.hpp"

namespace galley::dnn {
namespace {

runtime::Device cpu() { return runtime::device("cpu"); }

// The message of the Error `f` throws, or "" when it throws none.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Every non-reference cpu solver of P's kind must reproduce the reference exactly.
template <class P>
void expect_cpu_solvers_exact(const P& p) {
  SCOPED_TRACE(p.key());
  int checked = 0;
  for (const Solver<P>* s : solvers_for<P>("cpu")) {
    if (s->is_reference()) continue;
    ASSERT_TRUE(s->check(p, cpu())) << s->name();
    const OpVerification v = check_against_reference(cpu(), ProblemRef::of(p), *s);
    EXPECT_TRUE(v.passed) << s->name() << ": " << v.summary;
    EXPECT_EQ(v.max_rel_err, 0.0) << s->name() << ": " << v.summary;
    ++checked;
  }
  EXPECT_GT(checked, 0);
}

const DType kAllDtypes[] = {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i8};
const DType kFloatDtypes[] = {DType::f32, DType::f16, DType::bf16};

// ---- keys ----

TEST(DataMoveKeys, RoundTripEveryKind) {
  ConcatProblem c{DType::f16, Layout::nhwc, {2, 43, 31, 29}, 1, {3, 17, 23}};
  EXPECT_EQ(c.key(), "concat-f16-nhwc-a1-d2x43x31x29-s3.17.23");
  EXPECT_EQ(ConcatProblem::parse_key(c.key()), c);
  SplitProblem s = c.backward();
  EXPECT_EQ(s.key(), "split-f16-nhwc-a1-d2x43x31x29-s3.17.23");
  EXPECT_EQ(SplitProblem::parse_key(s.key()), s);
  TransposeProblem t{DType::bf16, {2, 3, 5, 7, 11}, {4, 0, 3, 1, 2}};
  EXPECT_EQ(t.key(), "transpose-bf16-d2x3x5x7x11-p4.0.3.1.2");
  EXPECT_EQ(TransposeProblem::parse_key(t.key()), t);
  for (double v : {0.0, -0.0, 1.5, -1.5, 1e-5, -3e30, double(INFINITY), -double(INFINITY)}) {
    PadProblem p{DType::f32, Layout::nchw, {2, 3}, {0, 1}, {4, 0}, v, PadDirection::backward};
    SCOPED_TRACE(p.key());
    EXPECT_EQ(p.key().find('-', p.key().find("-v") + 1), std::string::npos);
    EXPECT_EQ(PadProblem::parse_key(p.key()), p);
    EXPECT_EQ(PadProblem::parse_key(p.key()).key(), p.key());
  }
  ReorderProblem r{{2, 3, 31, 29}, DType::f32, Layout::nchw, DType::bf16, Layout::nhwc};
  EXPECT_EQ(r.key(), "reorder-f32-nchw-bf16-nhwc-d2x3x31x29");
  EXPECT_EQ(ReorderProblem::parse_key(r.key()), r);
  // Through the generic parser too (the find-db's way).
  for (const std::string& key : {c.key(), s.key(), t.key(), r.key()})
    EXPECT_EQ(parse_problem_key(key).ref().key(), key);
}

TEST(DataMoveKeys, ManyInputsEncodeEverySize) {
  ConcatProblem c{DType::f32, Layout::nchw, {1, 0, 7, 7}, 1, {}};
  for (int i = 0; i < 49; ++i) c.sizes.push_back(32 + (i % 5));
  c.dims[1] = std::accumulate(c.sizes.begin(), c.sizes.end(), std::int64_t(0));
  const ConcatProblem back = ConcatProblem::parse_key(c.key());
  EXPECT_EQ(back, c);
  EXPECT_EQ(back.sizes.size(), 49u);
}

TEST(DataMoveKeys, MalformedKeysAreErrors) {
  for (const char* key :
       {"concat-f32-nchw-a1-d2x3-s1.1", "concat-f32-nchw-a01-d2x3-s1.2", "concat-f32-xyz-a1-d2x3-s1.2",
        "transpose-f32-d2x3-p0.0", "transpose-f32-d2x3", "pad-X-f32-nchw-d2-b0-e0-v0",
        "pad-F-f32-nchw-d2-b0-e0-vabc", "reorder-f32-nchw-i32-nchw-d2", "split-f32-nchw-a0-d4-s2.2-x"}) {
    SCOPED_TRACE(key);
    EXPECT_THROW(parse_problem_key(key), Error);
  }
}

// ---- validation ----

TEST(DataMoveValidation, ErrorsNameTheField) {
  EXPECT_NE(error_of([] {
              ConcatProblem{DType::f32, Layout::nchw, {2, 3}, 2, {1, 2}}.validate();
            }).find("axis 2 is out of range"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              ConcatProblem{DType::f32, Layout::nchw, {2, 3}, -1, {1, 2}}.validate();
            }).find("axis -1"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              ConcatProblem{DType::f32, Layout::nchw, {2, 4}, 1, {1, 2}}.validate();
            }).find("sum to 3"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              ConcatProblem{DType::f32, Layout::nchw, {2, 3}, 1, {1, 0, 2}}.validate();
            }).find("sizes[1]"),
            std::string::npos);
  EXPECT_NE(
      error_of([] {
        ConcatProblem{DType::f32, Layout::nchw, {2, 97}, 1, std::vector<std::int64_t>(97, 1)}.validate();
      }).find("97 inputs"),
      std::string::npos);
  EXPECT_NE(error_of([] {
              SplitProblem{DType::f32, Layout::nchw, {2, 3}, 1, {}}.validate();
            }).find("0 outputs"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              ConcatProblem{DType::f32, Layout::nhwc, {2, 3, 4}, 1, {3}}.validate();
            }).find("nhwc"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              ConcatProblem{DType::f32, Layout::nchw, {2, 0}, 0, {2}}.validate();
            }).find("dims[1] = 0"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              ConcatProblem{DType::f32, Layout::nchw, {1, 1, 1, 1, 1, 1, 1}, 0, {1}}.validate();
            }).find("rank 7"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              TransposeProblem{DType::f32, {2, 3, 4}, {0, 1}}.validate();
            }).find("perm has 2 entries"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              TransposeProblem{DType::f32, {2, 3, 4}, {0, 3, 1}}.validate();
            }).find("perm[1] = 3"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              TransposeProblem{DType::f32, {2, 3, 4}, {0, 1, 1}}.validate();
            }).find("repeats"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              PadProblem{DType::f32, Layout::nchw, {2, 3}, {0, -1}, {0, 0}}.validate();
            }).find("before[1] = -1"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              PadProblem{DType::f32, Layout::nchw, {2, 3}, {0}, {0, 0}}.validate();
            }).find("before has 1"),
            std::string::npos);
  EXPECT_NE(error_of([] { PadProblem{DType::f32, Layout::nchw, {2}, {0}, {0}, NAN}.validate(); }).find("NaN"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              PadProblem{DType::i32, Layout::nchw, {2}, {0}, {0}}.validate();
            }).find("dtype i32"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              ReorderProblem{{2, 3}, DType::f32, Layout::nchw, DType::i8, Layout::nchw}.validate();
            }).find("dst dtype i8"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              ReorderProblem{{2, 3}, DType::f32, Layout::nchw, DType::f32, Layout::nhwc}.validate();
            }).find("nhwc"),
            std::string::npos);
}

TEST(DataMoveValidation, BytesFlopsTolerance) {
  const ConcatProblem c{DType::f16, Layout::nchw, {2, 5}, 1, {2, 3}};
  EXPECT_EQ(c.min_bytes(), 2.0 * 10 * 2);
  EXPECT_EQ(c.flops(), 0.0);
  EXPECT_EQ(c.tolerance(), 0.0);
  const PadProblem p{DType::f32, Layout::nchw, {2, 3}, {1, 1}, {0, 2}};
  EXPECT_EQ(p.min_bytes(), (6.0 + 3 * 6) * 4);
  EXPECT_EQ(p.backward().min_bytes(), 2 * 6.0 * 4);
  EXPECT_EQ((ReorderProblem{{4}, DType::f32, Layout::nchw, DType::f16, Layout::nchw}.min_bytes()),
            4 * 4 + 4 * 2.0);
  EXPECT_EQ((ReorderProblem{{4}, DType::f16, Layout::nchw, DType::f32, Layout::nchw}.tolerance()), 0.0);
  EXPECT_GT((ReorderProblem{{4}, DType::f32, Layout::nchw, DType::bf16, Layout::nchw}.tolerance()), 0.0);
}

// ---- references, hand-computed ----

TEST(DataMoveReference, SmallCasesByHand) {
  {
    const float a[] = {1, 2}, b[] = {3, 4, 5, 6};  // [2,1] and [2,2]
    float y[6] = {};
    DataMoveArgs args;
    args.multi[0] = const_cast<float*>(a);
    args.multi[1] = const_cast<float*>(b);
    args.dst = y;
    reference_concat({DType::f32, Layout::nchw, {2, 3}, 1, {1, 2}}, args);
    EXPECT_EQ(std::vector<float>(y, y + 6), (std::vector<float>{1, 3, 4, 2, 5, 6}));
  }
  {
    const float x[] = {1, 2, 3, 4, 5, 6};  // [2,3]
    float y[6] = {};
    DataMoveArgs args;
    args.src = x;
    args.dst = y;
    reference_transpose({DType::f32, {2, 3}, {1, 0}}, args);
    EXPECT_EQ(std::vector<float>(y, y + 6), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  }
  {
    const float x[] = {1, 2};
    float y[5] = {};
    DataMoveArgs args;
    args.src = x;
    args.dst = y;
    reference_pad({DType::f32, Layout::nchw, {2}, {1}, {2}, 9}, args);
    EXPECT_EQ(std::vector<float>(y, y + 5), (std::vector<float>{9, 1, 2, 9, 9}));
    float back[2] = {};
    args.src = y;
    args.dst = back;
    reference_pad({DType::f32, Layout::nchw, {2}, {1}, {2}, 9, PadDirection::backward}, args);
    EXPECT_EQ(std::vector<float>(back, back + 2), (std::vector<float>{1, 2}));
  }
  {
    // NCHW [1,2,1,3] -> NHWC: channels innermost.
    const float x[] = {1, 2, 3, 4, 5, 6};
    std::uint16_t y[6] = {};
    DataMoveArgs args;
    args.src = x;
    args.dst = y;
    reference_reorder({{1, 2, 1, 3}, DType::f32, Layout::nchw, DType::f16, Layout::nhwc}, args);
    const float want[] = {1, 4, 2, 5, 3, 6};
    for (int i = 0; i < 6; ++i) EXPECT_EQ(half_to_float(y[i]), want[i]);
  }
}

// ---- cpu solvers against the reference ----

TEST(DataMoveCpu, ConcatOddShapesEveryDtypeBothLayouts) {
  for (DType t : kAllDtypes) {
    for (Layout l : {Layout::nchw, Layout::nhwc}) {
      expect_cpu_solvers_exact(ConcatProblem{t, l, {1, 43, 31, 29}, 1, {3, 17, 23}});
      expect_cpu_solvers_exact(ConcatProblem{t, l, {3, 17, 31, 29}, 2, {1, 30}});
      expect_cpu_solvers_exact(ConcatProblem{t, l, {5, 3, 7, 29}, 0, {2, 3}});
      expect_cpu_solvers_exact(ConcatProblem{t, l, {2, 3, 7, 13}, 3, {6, 7}});
    }
  }
  for (int rank = 1; rank <= kMaxRank; ++rank) {
    std::vector<std::int64_t> dims(static_cast<std::size_t>(rank), 3);
    for (int axis = 0; axis < rank; ++axis) {
      dims[static_cast<std::size_t>(axis)] = 5;
      expect_cpu_solvers_exact(ConcatProblem{DType::f32, Layout::nchw, dims, axis, {2, 1, 2}});
      dims[static_cast<std::size_t>(axis)] = 3;
    }
  }
}

TEST(DataMoveCpu, ConcatAndSplitManyInputs) {
  for (int count : {49, static_cast<int>(kMaxMultiArgs)}) {
    ConcatProblem c{DType::f16, Layout::nchw, {2, 0, 7, 7}, 1, {}};
    for (int i = 0; i < count; ++i) c.sizes.push_back(1 + (i * 7) % 5);
    c.dims[1] = std::accumulate(c.sizes.begin(), c.sizes.end(), std::int64_t(0));
    expect_cpu_solvers_exact(c);
    expect_cpu_solvers_exact(c.backward());
    c.layout = Layout::nhwc;
    expect_cpu_solvers_exact(c);
    expect_cpu_solvers_exact(c.backward());
  }
}

TEST(DataMoveCpu, SplitOddShapes) {
  for (DType t : kAllDtypes) {
    for (Layout l : {Layout::nchw, Layout::nhwc}) {
      expect_cpu_solvers_exact(SplitProblem{t, l, {1, 43, 31, 29}, 1, {3, 17, 23}});
      expect_cpu_solvers_exact(SplitProblem{t, l, {3, 17, 31, 29}, 3, {28, 1}});
    }
  }
  // Wide runs: each part's rows cut into several pool tasks.
  expect_cpu_solvers_exact(SplitProblem{DType::f32, Layout::nchw, {2, 100000}, 1, {33333, 66667}});
}

TEST(DataMoveCpu, EveryPermutationOfRank4) {
  std::vector<int> perm{0, 1, 2, 3};
  int count = 0;
  do {
    for (DType t : kAllDtypes) expect_cpu_solvers_exact(TransposeProblem{t, {3, 17, 31, 29}, perm});
    ++count;
  } while (std::next_permutation(perm.begin(), perm.end()));
  EXPECT_EQ(count, 24);
}

TEST(DataMoveCpu, TransposeOtherRanksAndTiles) {
  expect_cpu_solvers_exact(TransposeProblem{DType::f32, {67, 131}, {1, 0}});
  expect_cpu_solvers_exact(TransposeProblem{DType::f16, {1, 1}, {1, 0}});
  expect_cpu_solvers_exact(TransposeProblem{DType::f32, {5}, {0}});
  expect_cpu_solvers_exact(TransposeProblem{DType::bf16, {2, 3, 5, 7, 11, 4}, {5, 3, 1, 0, 2, 4}});
  expect_cpu_solvers_exact(TransposeProblem{DType::i8, {4, 1, 3, 1, 33}, {4, 3, 2, 0, 1}});
  // ShuffleNet's channel shuffle: [n, g, c/g, h, w] -> [n, c/g, g, h, w].
  expect_cpu_solvers_exact(TransposeProblem{DType::f32, {2, 3, 8, 7, 7}, {0, 2, 1, 3, 4}});
  // NCHW <-> NHWC with whole 16 x 16 register blocks, and whole blocks beside partial ones.
  expect_cpu_solvers_exact(TransposeProblem{DType::f32, {1, 80, 56, 56}, {0, 2, 3, 1}});
  expect_cpu_solvers_exact(TransposeProblem{DType::f32, {1, 56, 56, 80}, {0, 3, 1, 2}});
  expect_cpu_solvers_exact(TransposeProblem{DType::f32, {2, 48, 5, 13}, {0, 2, 3, 1}});
  expect_cpu_solvers_exact(TransposeProblem{DType::f32, {1, 33, 47}, {0, 2, 1}});
}

TEST(DataMoveCpu, PadEverySideBothDirections) {
  const std::vector<std::int64_t> dims{2, 3, 31, 29};
  for (DType t : kFloatDtypes) {
    for (Layout l : {Layout::nchw, Layout::nhwc}) {
      for (std::size_t k = 0; k < 4; ++k) {
        for (bool before_side : {true, false}) {
          std::vector<std::int64_t> b(4, 0), a(4, 0);
          (before_side ? b : a)[k] = 2;
          const PadProblem p{t, l, dims, b, a, -1.5};
          expect_cpu_solvers_exact(p);
          expect_cpu_solvers_exact(p.backward());
        }
      }
      // The verifier fails any infinite output, so the largest finite f16 stands in for max
      // pooling's -inf (PadInfinity checks that one bit by bit).
      const PadProblem all{t, l, dims, {1, 2, 3, 1}, {2, 1, 1, 3}, -65504.0};
      expect_cpu_solvers_exact(all);
      expect_cpu_solvers_exact(all.backward());
      expect_cpu_solvers_exact(PadProblem{t, l, dims, {0, 0, 0, 0}, {0, 0, 0, 0}, 0});
    }
  }
  expect_cpu_solvers_exact(PadProblem{DType::f32, Layout::nchw, {5, 7, 3}, {1, 0, 2}, {0, 3, 1}, 2});
}

TEST(DataMoveCpu, ReorderEveryDtypeAndLayoutPair) {
  for (DType from : kFloatDtypes) {
    for (DType to : kFloatDtypes) {
      for (Layout lf : {Layout::nchw, Layout::nhwc}) {
        for (Layout lt : {Layout::nchw, Layout::nhwc}) {
          expect_cpu_solvers_exact(ReorderProblem{{2, 17, 31, 29}, from, lf, to, lt});
          expect_cpu_solvers_exact(ReorderProblem{{1, 3, 1, 1}, from, lf, to, lt});
        }
      }
      expect_cpu_solvers_exact(ReorderProblem{{3, 5, 7, 11, 13}, from, Layout::nchw, to, Layout::nchw});
    }
  }
}

// ---- backward ----

// Random host data of a desc's storage.
std::vector<std::byte> random_of(const TensorDesc& d, std::uint64_t seed) {
  return random_tensor(d.dtype, d.elements(), seed);
}

double dot(DType t, const std::vector<std::byte>& a, const std::vector<std::byte>& b) {
  const std::size_t n = a.size() / size_of(t);
  std::vector<float> fa(n), fb(n);
  to_float(t, a.data(), fa.data(), static_cast<std::int64_t>(n));
  to_float(t, b.data(), fb.data(), static_cast<std::int64_t>(n));
  double s = 0;
  for (std::size_t i = 0; i < n; ++i) s += static_cast<double>(fa[i]) * fb[i];
  return s;
}

// The backward of a linear op L is its adjoint: <dy, L x> == <L^T dy, x> for any x, dy (what
// central differences of the loss <dy, L x> in double measure, exactly, for a linear L).
TEST(DataMoveBackward, AdjointOfForward) {
  {
    const PadProblem p{DType::f32, Layout::nhwc, {2, 3, 5, 4}, {0, 1, 2, 1}, {1, 0, 1, 2}, 0};
    const auto x = random_of(p.small_desc(), 1), dy = random_of(p.padded_desc(), 2);
    std::vector<std::byte> y(dy.size()), dx(x.size());
    DataMoveArgs f;
    f.src = x.data();
    f.dst = y.data();
    reference_pad(p, f);
    DataMoveArgs b;
    b.src = dy.data();
    b.dst = dx.data();
    reference_pad(p.backward(), b);
    EXPECT_NEAR(dot(DType::f32, dy, y), dot(DType::f32, dx, x), 1e-9);
  }
  {
    const TransposeProblem p{DType::f32, {3, 4, 5}, {2, 0, 1}};
    EXPECT_EQ(p.backward().dims, p.dst_dims());
    EXPECT_EQ(p.backward().dst_dims(), p.dims);
    const auto x = random_of(p.src_desc(), 3), dy = random_of(p.dst_desc(), 4);
    std::vector<std::byte> y(dy.size()), dx(x.size());
    DataMoveArgs f;
    f.src = x.data();
    f.dst = y.data();
    reference_transpose(p, f);
    DataMoveArgs b;
    b.src = dy.data();
    b.dst = dx.data();
    reference_transpose(p.backward(), b);
    EXPECT_NEAR(dot(DType::f32, dy, y), dot(DType::f32, dx, x), 1e-9);
  }
  {
    const ConcatProblem p{DType::f32, Layout::nchw, {2, 7, 3}, 1, {2, 5}};
    const SplitProblem s = p.backward();
    EXPECT_EQ(s.backward(), p);
    const auto x0 = random_of(p.part_desc(0), 5), x1 = random_of(p.part_desc(1), 6),
               dy = random_of(p.whole_desc(), 7);
    std::vector<std::byte> y(dy.size()), dx0(x0.size()), dx1(x1.size());
    DataMoveArgs f;
    f.multi[0] = const_cast<std::byte*>(x0.data());
    f.multi[1] = const_cast<std::byte*>(x1.data());
    f.dst = y.data();
    reference_concat(p, f);
    DataMoveArgs b;
    b.src = dy.data();
    b.multi[0] = dx0.data();
    b.multi[1] = dx1.data();
    reference_split(s, b);
    EXPECT_NEAR(dot(DType::f32, dy, y), dot(DType::f32, dx0, x0) + dot(DType::f32, dx1, x1), 1e-9);
  }
}

// ---- Tensor entry points ----

template <class T>
Tensor tensor_of(runtime::Stream& stream, const TensorDesc& d, const std::vector<T>& host) {
  Tensor t = Tensor::empty(stream, d);
  t.copy_from_host(stream, host.data(), host.size() * sizeof(T));
  return t;
}

std::vector<float> iota_floats(std::size_t n, float start = 0) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

TEST(DataMoveTensorApi, RoundTripsAreExact) {
  runtime::Stream stream(cpu());
  // transpose then its backward gives x back.
  const Tensor x = tensor_of(stream, TensorDesc::contiguous(DType::f32, {2, 3, 5, 7}), iota_floats(210));
  Tensor y = Tensor::empty(stream, TensorDesc::contiguous(DType::f32, {5, 2, 7, 3}));
  Tensor back = Tensor::empty(stream, x.desc());
  transpose(stream, x, y, {2, 0, 3, 1});
  transpose_backward(stream, y, back, {2, 0, 3, 1});
  EXPECT_EQ(back.to_host<float>(stream), iota_floats(210));
  // NCHW -> NHWC -> NCHW, f32 -> f16 -> f32 (small integers are exact in f16).
  Tensor h = Tensor::empty(stream, TensorDesc::packed(DType::f16, Layout::nhwc, 2, 3, 5, 7));
  reorder(stream, x, h);
  reorder(stream, h, back);
  EXPECT_EQ(back.to_host<float>(stream), iota_floats(210));
  // bf16 -> f32 -> bf16 holds every bit pattern that is a number.
  std::vector<std::uint16_t> bits;
  for (std::uint32_t b = 0; b < 65536; ++b) {
    if (std::isfinite(bfloat16_to_float(static_cast<std::uint16_t>(b))))
      bits.push_back(static_cast<std::uint16_t>(b));
  }
  const auto n = static_cast<std::int64_t>(bits.size());
  const Tensor xb = tensor_of(stream, TensorDesc::contiguous(DType::bf16, {n}), bits);
  Tensor wide = Tensor::empty(stream, TensorDesc::contiguous(DType::f32, {n}));
  Tensor nb = Tensor::empty(stream, xb.desc());
  reorder(stream, xb, wide);
  reorder(stream, wide, nb);
  EXPECT_EQ(nb.to_host<std::uint16_t>(stream), bits);
  // pad then crop, split then concat.
  Tensor padded = Tensor::empty(stream, TensorDesc::contiguous(DType::f32, {3, 4, 8, 8}));
  pad(stream, x, padded, {1, 1, 1, 0}, {0, 0, 2, 1}, 7);
  pad_backward(stream, padded, back, {1, 1, 1, 0}, {0, 0, 2, 1});
  EXPECT_EQ(back.to_host<float>(stream), iota_floats(210));
  std::vector<Tensor> parts{Tensor::empty(stream, TensorDesc::contiguous(DType::f32, {2, 1, 5, 7})),
                            Tensor::empty(stream, TensorDesc::contiguous(DType::f32, {2, 2, 5, 7}))};
  split(stream, x, parts, 1);
  concat(stream, parts, back, 1);
  EXPECT_EQ(back.to_host<float>(stream), iota_floats(210));
  concat_backward(stream, x, parts, 1);
  split_backward(stream, parts, back, 1);
  EXPECT_EQ(back.to_host<float>(stream), iota_floats(210));
}

// The verifier fills integer tensors with zeros, so one-byte moves get distinct values here.
TEST(DataMoveTensorApi, OneByteElementsLandInPlace) {
  runtime::Stream stream(cpu());
  std::vector<std::int8_t> host(3 * 5 * 7);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<std::int8_t>(i % 127);
  const Tensor x = tensor_of(stream, TensorDesc::contiguous(DType::i8, {3, 5, 7}), host);
  Tensor y = Tensor::empty(stream, TensorDesc::contiguous(DType::i8, {7, 3, 5}));
  transpose(stream, x, y, {2, 0, 1});
  const auto got = y.to_host<std::int8_t>(stream);
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 5; ++b)
      for (int c = 0; c < 7; ++c)
        ASSERT_EQ(got[static_cast<std::size_t>((c * 3 + a) * 5 + b)],
                  host[static_cast<std::size_t>((a * 5 + b) * 7 + c)]);
  std::vector<Tensor> parts{Tensor::empty(stream, TensorDesc::contiguous(DType::i8, {3, 2, 7})),
                            Tensor::empty(stream, TensorDesc::contiguous(DType::i8, {3, 3, 7}))};
  Tensor back = Tensor::empty(stream, x.desc());
  split(stream, x, parts, 1);
  concat(stream, parts, back, 1);
  EXPECT_EQ(back.to_host<std::int8_t>(stream), host);
  const auto first = parts[0].to_host<std::int8_t>(stream);
  EXPECT_EQ(first[7], host[7]);
  EXPECT_EQ(first[14], host[35]);
}

TEST(DataMoveTensorApi, PadInfinity) {
  runtime::Stream stream(cpu());
  const Tensor x =
      tensor_of(stream, TensorDesc::contiguous(DType::f16, {2}), std::vector<std::uint16_t>{0x3c00, 0x4000});
  Tensor y = Tensor::empty(stream, TensorDesc::contiguous(DType::f16, {4}));
  pad(stream, x, y, {1}, {1}, -INFINITY);
  EXPECT_EQ(y.to_host<std::uint16_t>(stream), (std::vector<std::uint16_t>{0xfc00, 0x3c00, 0x4000, 0xfc00}));
}

TEST(DataMoveTensorApi, MismatchedTensorsAreNamed) {
  runtime::Stream stream(cpu());
  const auto f32 = [&](std::vector<std::int64_t> dims) {
    return Tensor::empty(stream,
                         TensorDesc::contiguous(DType::f32, dims.data(), static_cast<int>(dims.size())));
  };
  Tensor y = f32({2, 6, 4});
  std::vector<Tensor> in{f32({2, 1, 4}), f32({2, 2, 4}), f32({2, 3, 5})};
  EXPECT_NE(error_of([&] { concat(stream, in, y, 1); }).find("x[2] has dims [2,3,5]"), std::string::npos);
  in[2] = f32({2, 3, 4});
  EXPECT_NE(error_of([&] { concat(stream, in, y, 3); }).find("axis 3 is out of range"), std::string::npos);
  in[2] = f32({2, 2, 4});
  EXPECT_NE(error_of([&] { concat(stream, in, y, 1); }).find("sum to 5"), std::string::npos);
  in[2] = Tensor::empty(stream, TensorDesc::contiguous(DType::f16, {2, 3, 4}));
  EXPECT_NE(error_of([&] { concat(stream, in, y, 1); }).find("x[2]"), std::string::npos);
  std::vector<Tensor> too_many(kMaxMultiArgs + 1, f32({2, 1, 4}));
  EXPECT_NE(error_of([&] { concat(stream, too_many, y, 1); }).find("97 inputs"), std::string::npos);
  const Tensor x = f32({2, 3, 4});
  Tensor wrong = f32({4, 3, 3});
  EXPECT_NE(error_of([&] { transpose(stream, x, wrong, {2, 1, 0}); }).find("y (output)"), std::string::npos);
  EXPECT_NE(error_of([&] { transpose(stream, x, wrong, {2, 2, 0}); }).find("repeats"), std::string::npos);
  Tensor small_pad = f32({2, 3, 5});
  EXPECT_NE(error_of([&] {
              pad(stream, x, small_pad, {0, 0, 1}, {0, 0, 1});
            }).find("y (output)"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              pad_backward(stream, small_pad, wrong, {0, 0, 0}, {0, 0, 1});
            }).find("dy (output gradient)"),
            std::string::npos);
  EXPECT_NE(error_of([&] { reorder(stream, x, wrong); }).find("differ in dims"), std::string::npos);
  Tensor empty;
  EXPECT_NE(error_of([&] { reorder(stream, x, empty); }).find("y (output) is missing"), std::string::npos);
}

TEST(DataMoveTensorApi, ReshapedIsAViewWhenContiguous) {
  runtime::Stream stream(cpu());
  const Tensor x = tensor_of(stream, TensorDesc::contiguous(DType::f32, {2, 3, 4, 5}), iota_floats(120));
  const Tensor flat = x.reshaped({2, -1});
  EXPECT_EQ(flat.data(), x.data());
  EXPECT_EQ(flat.desc(), TensorDesc::contiguous(DType::f32, {2, 60}));
  EXPECT_EQ(flat.to_host<float>(stream), iota_floats(120));
  EXPECT_NE(error_of([&] { (void)x.reshaped({7, -1}); }).find("not a multiple of 7"), std::string::npos);
  EXPECT_NE(error_of([&] { (void)x.reshaped({2, 3}); }).find("6 elements"), std::string::npos);
  EXPECT_NE(error_of([&] { (void)x.reshaped({-1, -1}); }).find("dims[1] = -1"), std::string::npos);
  const Tensor nhwc = Tensor::empty(stream, TensorDesc::packed(DType::f32, Layout::nhwc, 2, 3, 4, 5));
  EXPECT_NE(error_of([&] {
              (void)nhwc.reshaped({2, 60});
            }).find("not row-major contiguous"),
            std::string::npos);
  // The view keeps the storage alive after the original goes.
  Tensor view;
  {
    const Tensor owner = tensor_of(stream, TensorDesc::contiguous(DType::f32, {6}), iota_floats(6, 1));
    view = owner.reshaped({2, 3});
  }
  EXPECT_EQ(view.to_host<float>(stream), iota_floats(6, 1));
}

}  // namespace
}  // namespace galley::dnn
