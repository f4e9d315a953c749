// Binary elementwise ops with broadcasting: the problem (shapes, validation, key), the reference
// against hand-computed cases and central finite differences, every cpu solver against the
// reference over every broadcast pattern of rank 4, inf/NaN propagation as PyTorch has it, and the
// Tensor entry points (mismatched tensors named, in place).
#include "galley/dnn/eltwise.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "backends/cpu/conv_isa.hpp"
#include "dnn/cpu_isa_cap.hpp"
#include "dnn/eltwise_geometry.hpp"
#include "dnn/op_verify.hpp"
#include "dnn/ref_eltwise.hpp"
#include "dnn/tensor_data.hpp"
#include "galley/core/error.hpp"
#include "galley/runtime/device.hpp"
#include "galley/tensor.hpp"

namespace galley::dnn {
namespace {

using Shape = std::vector<std::int64_t>;
constexpr EltwiseOp kOps[] = {EltwiseOp::add, EltwiseOp::sub, EltwiseOp::mul, EltwiseOp::div};

const runtime::Device& cpu() {
  static const runtime::Device d = runtime::device("cpu");
  return d;
}

template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::invalid_argument) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error";
  return {};
}

#define EXPECT_HAS(text, fragment) EXPECT_NE((text).find(fragment), std::string::npos) << (text)

EltwiseProblem problem(EltwiseOp op, Shape a, Shape b, DType dtype = DType::f32, Layout layout = Layout::nchw,
                       EltwiseDirection direction = EltwiseDirection::forward) {
  EltwiseProblem p;
  p.op = op;
  p.a = std::move(a);
  p.b = std::move(b);
  p.dtype = dtype;
  p.layout = layout;
  p.direction = direction;
  return p;
}

// ---- the problem ----

TEST(EltwiseProblem, BroadcastShapeFollowsNumpy) {
  EXPECT_EQ(problem(EltwiseOp::add, {32, 256, 56, 56}, {1, 256, 1, 1}).dst_shape(), (Shape{32, 256, 56, 56}));
  EXPECT_EQ(problem(EltwiseOp::add, {5, 1, 3}, {4, 1}).dst_shape(), (Shape{5, 4, 3}));
  EXPECT_EQ(problem(EltwiseOp::add, {1}, {2, 3, 4}).dst_shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(problem(EltwiseOp::add, {1, 3, 1, 5}, {2, 1, 4, 1}).dst_shape(), (Shape{2, 3, 4, 5}));
}

TEST(EltwiseProblem, IncompatibleShapesNameBoth) {
  const std::string e = error_of([] { problem(EltwiseOp::add, {2, 3}, {4}).validate(); });
  EXPECT_HAS(e, "[2,3]");
  EXPECT_HAS(e, "[4]");
  EXPECT_HAS(e, "do not broadcast");
  const std::string e2 = error_of([] { problem(EltwiseOp::mul, {8, 3, 5, 5}, {1, 4, 1, 1}).validate(); });
  EXPECT_HAS(e2, "[8,3,5,5]");
  EXPECT_HAS(e2, "[1,4,1,1]");
}

TEST(EltwiseProblem, ValidationNamesTheField) {
  EXPECT_HAS(error_of([] { problem(EltwiseOp::add, {}, {1}).validate(); }), "a (shape)");
  EXPECT_HAS(error_of([] { problem(EltwiseOp::add, {1, 1, 1, 1, 1, 1, 1}, {1}).validate(); }), "rank 7");
  EXPECT_HAS(error_of([] { problem(EltwiseOp::add, {2, 3}, {3, 0}).validate(); }), "b (shape1)");
  EXPECT_HAS(error_of([] { problem(EltwiseOp::add, {2, 3}, {-3}).validate(); }), "-3");
  EXPECT_HAS(error_of([] {
               problem(EltwiseOp::add, {2, 3, 4}, {4}, DType::f32, Layout::nhwc).validate();
             }),
             "nhwc");
  EXPECT_HAS(error_of([] { problem(EltwiseOp::add, {2}, {2}, DType::i32).validate(); }), "dtype i32");
  EltwiseProblem p = problem(EltwiseOp::add, {2}, {2});
  p.alpha = std::numeric_limits<float>::infinity();
  EXPECT_HAS(error_of([&] { p.validate(); }), "alpha");
  p.alpha = 1;
  p.beta = std::numeric_limits<float>::quiet_NaN();
  EXPECT_HAS(error_of([&] { p.validate(); }), "beta");
  EXPECT_HAS(error_of([] { problem(EltwiseOp::add, {1ll << 40, 1ll << 40}, {1}).validate(); }), "64 bits");
  EXPECT_HAS(error_of([] { parse_eltwise_op("pow"); }), "pow");
}

TEST(EltwiseProblem, KeyRoundTrips) {
  std::vector<EltwiseProblem> all = {
      problem(EltwiseOp::add, {32, 256, 56, 56}, {1, 256, 1, 1}),
      problem(EltwiseOp::div, {3, 17, 31, 29}, {17, 1, 29}, DType::bf16, Layout::nchw,
              EltwiseDirection::backward),
      problem(EltwiseOp::mul, {1, 23, 7, 5}, {1, 23, 1, 1}, DType::f16, Layout::nhwc),
      problem(EltwiseOp::sub, {2, 3, 4, 5, 6, 7}, {1}),
  };
  all.back().alpha = -0.5f;
  all.back().beta = 1e-5f;
  for (const EltwiseProblem& p : all) {
    const std::string key = p.key();
    EXPECT_EQ(key.rfind("eltwise-", 0), 0u) << key;
    EXPECT_EQ(EltwiseProblem::parse_key(key), p) << key;
    EXPECT_EQ(EltwiseProblem::parse_key(key).hash(), p.hash()) << key;
    EXPECT_EQ(parse_problem_key(key).ref().key(), key);
  }
  EXPECT_EQ(all[0].key(), "eltwise-F-add-f32-nchw-a32x256x56x56-b1x256x1x1-al1-be1");
  EXPECT_EQ(all[3].key(), "eltwise-F-sub-f32-nchw-a2x3x4x5x6x7-b1-al-0.5-be1e-05");
  for (const char* bad :
       {"eltwise-F-add-f32-nchw-a2x3-b3-al1.0-be1", "eltwise-F-add-f32-nchw-a02x3-b3-al1-be1",
        "eltwise-X-add-f32-nchw-a2x3-b3-al1-be1", "eltwise-F-pow-f32-nchw-a2x3-b3-al1-be1",
        "eltwise-F-add-f32-nchw-a2x3-b4-al1-be1", "eltwise-F-add-f32-NCHW-a2x3-b3-al1-be1",
        "eltwise-F-add-f32-nchw-a2x3-b3", "conv-F-add-f32-nchw-a2x3-b3-al1-be1"}) {
    EXPECT_THROW(EltwiseProblem::parse_key(bad), Error) << bad;
  }
}

TEST(EltwiseProblem, TensorsFlopsBytesAndBenchLine) {
  const EltwiseProblem f = problem(EltwiseOp::div, {4, 3}, {3});
  const auto ft = f.tensors();
  ASSERT_EQ(ft.size(), 3u);
  EXPECT_EQ(ft[1].id, ArgId::src1);
  EXPECT_EQ(ft[1].fill, Fill::positive);  // divisors stay away from zero
  EXPECT_EQ(f.min_bytes(), (12 + 3 + 12) * 4.0);
  EXPECT_EQ(f.flops(), 12.0);
  const EltwiseProblem b =
      problem(EltwiseOp::add, {4, 3}, {3}, DType::f16, Layout::nchw, EltwiseDirection::backward);
  EXPECT_EQ(b.tensors().size(), 3u);  // dy -> da, db: add reads neither input
  EXPECT_EQ(b.min_bytes(), (12 + 12 + 3) * 2.0);
  EXPECT_EQ(problem(EltwiseOp::mul, {4, 3}, {3}, DType::f32, Layout::nchw, EltwiseDirection::backward)
                .tensors()
                .size(),
            5u);
  EXPECT_EQ(
      f.bench_command(cpu(), "ref.eltwise"),
      "galley bench eltwise --op div --shape 4x3 --shape1 3 -F 1 --dtype f32 --layout nchw --device cpu "
      "--solver ref.eltwise");
  EXPECT_EQ(b.tolerance(), 1e-2);
}

TEST(EltwiseGeometry, MergesDimsAndFindsBroadcastStrides) {
  const EltwiseGeometry g = eltwise_geometry(problem(EltwiseOp::add, {32, 256, 56, 56}, {1, 256, 1, 1}));
  ASSERT_EQ(g.rank, 3);
  EXPECT_EQ(g.dims[0], 32);
  EXPECT_EQ(g.dims[1], 256);
  EXPECT_EQ(g.dims[2], 56 * 56);
  EXPECT_EQ(g.b_stride[0], 0);
  EXPECT_EQ(g.b_stride[1], 1);
  EXPECT_EQ(g.b_stride[2], 0);
  const EltwiseGeometry n =
      eltwise_geometry(problem(EltwiseOp::add, {32, 256, 56, 56}, {1, 256, 1, 1}, DType::f32, Layout::nhwc));
  ASSERT_EQ(n.rank, 2);  // rows of channels
  EXPECT_EQ(n.dims[1], 256);
  EXPECT_EQ(n.b_stride[0], 0);
  EXPECT_EQ(n.b_stride[1], 1);
  const EltwiseGeometry same = eltwise_geometry(problem(EltwiseOp::add, {3, 5, 7}, {3, 5, 7}));
  EXPECT_EQ(same.rank, 1);
  EXPECT_EQ(same.elements, 105);
  const EltwiseGeometry scalar = eltwise_geometry(problem(EltwiseOp::add, {1}, {1, 1}));
  EXPECT_EQ(scalar.rank, 1);
  EXPECT_EQ(scalar.elements, 1);
}

// ---- the reference ----

TEST(RefEltwise, HandComputedBroadcast) {
  // a [2,3] op b [3] with alpha 2, beta -1.
  EltwiseProblem p = problem(EltwiseOp::add, {2, 3}, {3});
  p.alpha = 2;
  p.beta = -1;
  const std::vector<float> a{1, 2, 3, 4, 5, 6}, b{10, 20, 30};
  std::vector<float> y(6);
  reference_eltwise_forward(p, a.data(), b.data(), y.data());
  EXPECT_EQ(y, (std::vector<float>{-8, -16, -24, -2, -10, -18}));
  p.op = EltwiseOp::div;
  reference_eltwise_forward(p, a.data(), b.data(), y.data());
  EXPECT_FLOAT_EQ(y[4], -10.0f / 20.0f);
  // Backward of add: db sums dy over the broadcast rows, scaled by beta.
  p.op = EltwiseOp::add;
  p.direction = EltwiseDirection::backward;
  const std::vector<float> dy{1, 2, 3, 4, 5, 6};
  std::vector<float> da(6), db(3);
  reference_eltwise_backward(p, dy.data(), nullptr, nullptr, da.data(), db.data());
  EXPECT_EQ(da, (std::vector<float>{2, 4, 6, 8, 10, 12}));
  EXPECT_EQ(db, (std::vector<float>{-5, -7, -9}));
  // mul with a broadcast over columns: a [2,1] * b [3].
  EltwiseProblem m =
      problem(EltwiseOp::mul, {2, 1}, {3}, DType::f32, Layout::nchw, EltwiseDirection::backward);
  const std::vector<float> ma{2, 3};
  std::vector<float> mda(2), mdb(3);
  reference_eltwise_backward(m, dy.data(), ma.data(), b.data(), mda.data(), mdb.data());
  EXPECT_EQ(mda, (std::vector<float>{1 * 10 + 2 * 20 + 3 * 30, 4 * 10 + 5 * 20 + 6 * 30}));
  EXPECT_EQ(mdb, (std::vector<float>{1 * 2 + 4 * 3, 2 * 2 + 5 * 3, 3 * 2 + 6 * 3}));
}

// sum(dy * f(a, b)) in double, with NumPy broadcasting written out independently of the library.
double loss(const EltwiseProblem& p, const std::vector<double>& a, const std::vector<double>& b,
            const std::vector<double>& dy) {
  const Shape out = p.dst_shape();
  const int rank = static_cast<int>(out.size());
  const auto index_in = [&](const Shape& shape, const std::vector<std::int64_t>& idx) {
    std::int64_t off = 0;
    const int shift = rank - static_cast<int>(shape.size());
    for (std::size_t i = 0; i < shape.size(); ++i) {
      off = off * shape[i] + (shape[i] == 1 ? 0 : idx[i + static_cast<std::size_t>(shift)]);
    }
    return static_cast<std::size_t>(off);
  };
  std::vector<std::int64_t> idx(out.size(), 0);
  double total = 0;
  for (std::size_t e = 0; e < dy.size(); ++e) {
    const double x = p.alpha * a[index_in(p.a, idx)], y = p.beta * b[index_in(p.b, idx)];
    const double v = p.op == EltwiseOp::add   ? x + y
                     : p.op == EltwiseOp::sub ? x - y
                     : p.op == EltwiseOp::mul ? x * y
                                              : x / y;
    total += dy[e] * v;
    for (int i = rank - 1; i >= 0; --i) {
      if (++idx[static_cast<std::size_t>(i)] < out[static_cast<std::size_t>(i)]) break;
      idx[static_cast<std::size_t>(i)] = 0;
    }
  }
  return total;
}

std::vector<float> random_floats(std::int64_t n, std::uint64_t seed, bool positive) {
  const auto bytes = random_tensor(DType::f32, n, seed);
  std::vector<float> v(static_cast<std::size_t>(n));
  to_float(DType::f32, bytes.data(), v.data(), n);
  if (positive) {
    for (float& x : v) x = 1.0f + 0.5f * x;
  }
  return v;
}

TEST(RefEltwise, BackwardMatchesCentralFiniteDifferences) {
  const std::vector<std::pair<Shape, Shape>> shapes = {
      {{2, 3, 4}, {3, 1}}, {{1, 3, 1, 5}, {2, 1, 4, 1}}, {{4}, {2, 3, 4}}, {{2, 3}, {1}}};
  for (EltwiseOp op : kOps) {
    for (const auto& [sa, sb] : shapes) {
      EltwiseProblem p = problem(op, sa, sb, DType::f32, Layout::nchw, EltwiseDirection::backward);
      p.alpha = 0.75f;
      p.beta = -1.25f;
      const std::int64_t na = p.a_desc().elements(), nb = p.b_desc().elements(), no = p.dst_desc().elements();
      const auto af = random_floats(na, 1, false), bf = random_floats(nb, 2, op == EltwiseOp::div);
      const auto dyf = random_floats(no, 3, false);
      std::vector<float> da(static_cast<std::size_t>(na)), db(static_cast<std::size_t>(nb));
      reference_eltwise_backward(p, dyf.data(), af.data(), bf.data(), da.data(), db.data());
      std::vector<double> a(af.begin(), af.end()), b(bf.begin(), bf.end()), dy(dyf.begin(), dyf.end());
      const double h = 1e-6;
      for (int which = 0; which < 2; ++which) {
        std::vector<double>& x = which == 0 ? a : b;
        const std::vector<float>& grad = which == 0 ? da : db;
        for (std::size_t i = 0; i < x.size(); ++i) {
          const double keep = x[i];
          x[i] = keep + h;
          const double up = loss(p, a, b, dy);
          x[i] = keep - h;
          const double down = loss(p, a, b, dy);
          x[i] = keep;
          const double fd = (up - down) / (2 * h);
          EXPECT_NEAR(grad[i], fd, 1e-4 * std::max(1.0, std::abs(fd)))
              << p.key() << (which == 0 ? " da[" : " db[") << i << "]";
        }
      }
    }
  }
}

// ---- every cpu solver against the reference ----

std::vector<const SolverBase*> cpu_solvers() {
  std::vector<const SolverBase*> out;
  for (const SolverBase* s : solvers_of("cpu", OpKind::eltwise)) {
    if (!s->is_reference()) out.push_back(s);
  }
  return out;
}

void expect_matches_reference(const EltwiseProblem& p) {
  for (const SolverBase* s : cpu_solvers()) {
    const OpVerification v = check_against_reference(cpu(), ProblemRef::of(p), *s);
    EXPECT_TRUE(v.passed) << s->name() << " " << p.key() << ": " << v.summary;
  }
}

TEST(EltwiseCpu, HasASolverBesidesTheReference) {
  ASSERT_FALSE(cpu_solvers().empty());
  const auto all = solvers_of("cpu", OpKind::eltwise);
  EXPECT_TRUE(all.back()->is_reference());
  EXPECT_EQ(all.back()->name(), "ref.eltwise");
}

// Rank 4, odd sizes: every one of the 16 patterns of size-1 dims in b against a full a, and the
// same with a broadcast too (all 256 pairs, so both inputs are broadcast along every combination),
// every op, both directions.
Shape pattern(const Shape& full, int mask) {
  Shape s = full;
  for (int i = 0; i < 4; ++i) {
    if (mask & (1 << i)) s[static_cast<std::size_t>(i)] = 1;
  }
  return s;
}

TEST(EltwiseCpu, EveryBroadcastPatternOfRank4) {
  const Shape full{2, 3, 5, 7};
  for (int ma = 0; ma < 16; ++ma) {
    for (int mb = 0; mb < 16; ++mb) {
      const EltwiseOp op = kOps[(ma + mb) % 4];
      for (EltwiseDirection d : {EltwiseDirection::forward, EltwiseDirection::backward}) {
        expect_matches_reference(
            problem(op, pattern(full, ma), pattern(full, mb), DType::f32, Layout::nchw, d));
      }
    }
  }
}

TEST(EltwiseCpu, EveryOpDtypeAndLayoutOnOddShapes) {
  const Shape full{1, 17, 31, 29};
  for (EltwiseOp op : kOps) {
    for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
      for (Layout layout : {Layout::nchw, Layout::nhwc}) {
        for (int mb : {0, 1, 5, 13, 14, 15}) {
          for (EltwiseDirection d : {EltwiseDirection::forward, EltwiseDirection::backward}) {
            EltwiseProblem p = problem(op, full, pattern(full, mb), dtype, layout, d);
            p.alpha = 1.5f;
            expect_matches_reference(p);
            // The broadcast input first.
            std::swap(p.a, p.b);
            expect_matches_reference(p);
          }
        }
      }
    }
  }
}

TEST(EltwiseCpu, OtherRanksAndLongReductions) {
  const std::vector<std::pair<Shape, Shape>> shapes = {{{23}, {1}},
                                                       {{3, 23}, {23}},
                                                       {{4, 1, 6}, {5, 1}},
                                                       {{2, 3, 1, 5, 1, 3}, {4, 1, 2, 1}},
                                                       {{1}, {3, 1, 17}},
                                                       {{300, 1000}, {1, 1000}},
                                                       {{300, 1000}, {300, 1}},
                                                       {{4, 64, 33, 33}, {1}},
                                                       {{1, 7, 1}, {9, 1, 11}}};
  for (EltwiseOp op : kOps) {
    for (const auto& [a, b] : shapes) {
      for (EltwiseDirection d : {EltwiseDirection::forward, EltwiseDirection::backward}) {
        expect_matches_reference(problem(op, a, b, DType::f32, Layout::nchw, d));
        expect_matches_reference(problem(op, a, b, DType::bf16, Layout::nchw, d));
      }
    }
  }
}

// Over the solver's parallel block and staging segment, with odd sizes (vector tails), a bias on
// each side and a broadcast of every kind the f32 loops take as one value or as a stepping span,
// at every ISA level the loops are built for (a machine with AVX-512 takes the others only when
// capped).
TEST(EltwiseCpu, LargeOddShapesAtEveryIsaLevel) {
  const Shape full{2, 37, 41, 43};
  const std::vector<std::pair<Shape, Shape>> shapes = {{full, full},
                                                       {full, {1, 37, 1, 1}},
                                                       {{1, 37, 1, 1}, full},
                                                       {full, {1, 1, 41, 43}},
                                                       {full, {2, 1, 1, 1}},
                                                       {full, {1, 1, 1, 43}},
                                                       {full, {1}}};
  for (const auto cap :
       {backends::cpu::CpuIsa::avx512, backends::cpu::CpuIsa::avx2, backends::cpu::CpuIsa::scalar}) {
    const IsaCap capped(cap);
    SCOPED_TRACE(std::string(backends::cpu::to_string(cap)));
    for (EltwiseOp op : kOps) {
      for (const auto& [a, b] : shapes) {
        for (EltwiseDirection d : {EltwiseDirection::forward, EltwiseDirection::backward}) {
          EltwiseProblem p = problem(op, a, b, DType::f32, Layout::nchw, d);
          p.alpha = 1.5f;
          expect_matches_reference(p);
        }
      }
    }
  }
}

// ---- inf and NaN, as PyTorch propagates them ----

std::vector<float> run_cpu(const SolverBase& solver, const EltwiseProblem& p, const std::vector<float>& a,
                           const std::vector<float>& b) {
  runtime::Stream stream(cpu());
  Tensor ta = Tensor::empty(stream, p.a_desc()), tb = Tensor::empty(stream, p.b_desc());
  Tensor out = Tensor::empty(stream, p.dst_desc());
  ta.copy_from_host(stream, a.data(), a.size() * 4);
  tb.copy_from_host(stream, b.data(), b.size() * 4);
  eltwise_forward(stream, p, ta, tb, out, static_cast<const EltwiseSolver*>(&solver));
  return out.to_host<float>(stream);
}

TEST(EltwiseCpu, InfAndNanPropagate) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> a{inf, inf, 0.f, 1.f, -1.f, 0.f, nan, 2.f};
  const std::vector<float> b{1.f, inf, inf, 0.f, 0.f, 0.f, 1.f, nan};
  struct Want {
    EltwiseOp op;
    std::vector<float> values;
  };
  const std::vector<Want> wants = {
      {EltwiseOp::add, {inf, inf, inf, 1.f, -1.f, 0.f, nan, nan}},
      {EltwiseOp::sub, {inf, nan, -inf, 1.f, -1.f, 0.f, nan, nan}},
      {EltwiseOp::mul, {inf, inf, nan, 0.f, -0.f, 0.f, nan, nan}},
      {EltwiseOp::div, {inf, nan, 0.f, inf, -inf, nan, nan, nan}},
  };
  for (const SolverBase* s : solvers_of("cpu", OpKind::eltwise)) {
    for (const Want& w : wants) {
      const std::vector<float> got = run_cpu(*s, problem(w.op, {8}, {8}), a, b);
      for (std::size_t i = 0; i < got.size(); ++i) {
        if (std::isnan(w.values[i])) {
          EXPECT_TRUE(std::isnan(got[i]))
              << s->name() << " " << to_string(w.op) << " [" << i << "] = " << got[i];
        } else {
          EXPECT_EQ(got[i], w.values[i]) << s->name() << " " << to_string(w.op) << " [" << i << "]";
        }
      }
    }
    // A NaN in dy reaches the reduced gradient; an inf in b reaches a's gradient of mul.
    runtime::Stream stream(cpu());
    const EltwiseProblem m =
        problem(EltwiseOp::mul, {2, 3}, {3}, DType::f32, Layout::nchw, EltwiseDirection::backward);
    const std::vector<float> dy{1, nan, 1, 1, 1, 1}, ma{1, 1, 1, 1, 1, 1}, mb{inf, 1, 1};
    Tensor tdy = Tensor::empty(stream, m.dst_desc()), ta = Tensor::empty(stream, m.a_desc());
    Tensor tb = Tensor::empty(stream, m.b_desc()), tda = Tensor::empty(stream, m.a_desc());
    Tensor tdb = Tensor::empty(stream, m.b_desc());
    tdy.copy_from_host(stream, dy.data(), 24);
    ta.copy_from_host(stream, ma.data(), 24);
    tb.copy_from_host(stream, mb.data(), 12);
    eltwise_backward(stream, m, tdy, ta, tb, tda, tdb, static_cast<const EltwiseSolver*>(s));
    const auto da = tda.to_host<float>(stream), db = tdb.to_host<float>(stream);
    EXPECT_EQ(da[0], inf) << s->name();
    EXPECT_TRUE(std::isnan(da[1])) << s->name();
    EXPECT_TRUE(std::isnan(db[1])) << s->name();
    EXPECT_EQ(db[0], 2.f) << s->name();
  }
}

// ---- the Tensor entry points ----

TEST(EltwiseEntry, MismatchedTensorsAreNamed) {
  runtime::Stream stream(cpu());
  const EltwiseProblem p = problem(EltwiseOp::add, {2, 3, 5}, {3, 1});
  Tensor a = Tensor::empty(stream, p.a_desc()), b = Tensor::empty(stream, p.b_desc());
  Tensor y = Tensor::empty(stream, p.dst_desc());
  Tensor wrong = Tensor::empty(stream, TensorDesc::contiguous(DType::f32, {3, 5}));
  EXPECT_HAS(error_of([&] { eltwise_forward(stream, p, a, wrong, y); }), "b (second input)");
  EXPECT_HAS(error_of([&] { eltwise_forward(stream, p, wrong, b, y); }), "a (first input)");
  EXPECT_HAS(error_of([&] { eltwise_forward(stream, p, a, b, wrong); }), "dst (output)");
  Tensor empty;
  EXPECT_HAS(error_of([&] { eltwise_forward(stream, p, a, empty, y); }), "missing");
  EltwiseProblem back = p;
  back.op = EltwiseOp::mul;
  Tensor da = Tensor::empty(stream, p.a_desc()), db = Tensor::empty(stream, p.b_desc());
  EXPECT_HAS(error_of([&] { eltwise_backward(stream, back, y, a, b, da, wrong); }), "db (gradient of b)");
  EXPECT_HAS(error_of([&] { eltwise_backward(stream, back, y, empty, b, da, db); }), "a (first input)");
  // add and sub read neither input: empty tensors are fine there.
  EXPECT_NO_THROW(eltwise_backward(stream, p, y, empty, empty, da, db));
  stream.synchronize();
  back.direction = EltwiseDirection::backward;
  EXPECT_HAS(error_of([&] { eltwise_forward(stream, back, a, b, y); }), "backward");
}

TEST(EltwiseEntry, InPlaceMatchesOutOfPlace) {
  runtime::Stream stream(cpu());
  for (const SolverBase* s : solvers_of("cpu", OpKind::eltwise)) {
    for (EltwiseOp op : kOps) {
      for (DType dtype : {DType::f32, DType::bf16}) {
        const EltwiseProblem p = problem(op, {3, 17, 31}, {17, 1}, dtype);
        const auto host_a = random_tensor(dtype, p.a_desc().elements(), 7);
        auto host_b = random_tensor(dtype, p.b_desc().elements(), 8);
        Tensor a = Tensor::empty(stream, p.a_desc()), b = Tensor::empty(stream, p.b_desc());
        Tensor y = Tensor::empty(stream, p.dst_desc());
        a.copy_from_host(stream, host_a.data(), host_a.size());
        b.copy_from_host(stream, host_b.data(), host_b.size());
        const auto* solver = static_cast<const EltwiseSolver*>(s);
        eltwise_forward(stream, p, a, b, y, solver);
        eltwise_forward(stream, p, a, b, a, solver);  // dst == a
        if (dtype == DType::f32) {
          EXPECT_EQ(a.to_host<float>(stream), y.to_host<float>(stream)) << s->name() << " " << p.key();
        } else {
          EXPECT_EQ(a.to_host<std::uint16_t>(stream), y.to_host<std::uint16_t>(stream))
              << s->name() << " " << p.key();
        }
        // dst may not be a broadcast input.
        EXPECT_HAS(error_of([&] { eltwise_forward(stream, p, a, b, b, solver); }), "in place");
        // dst over b when b has dst's shape (a broadcast).
        const EltwiseProblem q = problem(op, {17, 1}, {3, 17, 31}, dtype);
        Tensor qa = Tensor::empty(stream, q.a_desc()), qb = Tensor::empty(stream, q.b_desc());
        Tensor qy = Tensor::empty(stream, q.dst_desc());
        const auto host_qa = random_tensor(dtype, q.a_desc().elements(), 9);
        const auto host_qb = random_tensor(dtype, q.b_desc().elements(), 10);
        qa.copy_from_host(stream, host_qa.data(), host_qa.size());
        qb.copy_from_host(stream, host_qb.data(), host_qb.size());
        eltwise_forward(stream, q, qa, qb, qy, solver);
        eltwise_forward(stream, q, qa, qb, qb, solver);
        if (dtype == DType::f32) {
          EXPECT_EQ(qb.to_host<float>(stream), qy.to_host<float>(stream)) << s->name() << " " << q.key();
        } else {
          EXPECT_EQ(qb.to_host<std::uint16_t>(stream), qy.to_host<std::uint16_t>(stream))
              << s->name() << " " << q.key();
        }
      }
    }
  }
}

}  // namespace
}  // namespace galley::dnn
