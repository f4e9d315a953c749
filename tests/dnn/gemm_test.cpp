// GEMM: the problem (key round trip, validation naming the field, tensors, flops, tolerance), the
// reference against hand-computed cases and, for backward, central finite differences of a
// double forward written here; every cpu solver against the reference over odd shapes, every
// transpose, shared operands, bias, alpha/beta and dtype; the Tensor entry points.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "dnn/gemm_lowering.hpp"
#include "dnn/op_verify.hpp"
#include "dnn/ref_gemm.hpp"
#include "dnn/tensor_data.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/gemm.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"

namespace galley::dnn {
namespace {

const runtime::Device& cpu() {
  static const runtime::Device d = runtime::device("cpu");
  return d;
}

void expect_error(const std::function<void()>& fn, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "no error; wanted one naming " << *parts.begin();
  } catch (const Error& e) {
    const std::string what = e.what();
    for (const std::string& part : parts) EXPECT_NE(what.find(part), std::string::npos) << "'" << part << "' not in: " << what;
  }
}

GemmProblem problem(std::int64_t m, std::int64_t n, std::int64_t k, bool ta = false, bool tb = false,
                    std::int64_t batch = 1, bool sa = false, bool sb = false, bool bias = false,
                    DType dtype = DType::f32, GemmDirection dir = GemmDirection::forward) {
  GemmProblem p;
  p.m = m, p.n = n, p.k = k, p.trans_a = ta, p.trans_b = tb, p.batch = batch;
  p.shared_a = sa, p.shared_b = sb, p.bias = bias, p.dtype = dtype, p.direction = dir;
  return p;
}

TEST(GemmProblem, KeyRoundTrips) {
  GemmProblem p = problem(1024, 4096, 1024, false, true, 8, false, true, true, DType::f16);
  EXPECT_EQ(p.key(), "gemm-F-f16-nt-b8-m1024-n4096-k1024-sa0-sb1-bias1-alpha1-beta0");
  std::vector<GemmProblem> all = {p};
  GemmProblem q = problem(17, 31, 129, true, false, 3, true, false, false, DType::bf16, GemmDirection::backward_data);
  q.alpha = -0.5;
  all.push_back(q);
  GemmProblem r = problem(1, 1, 1, true, true, 1, false, false, true, DType::f32, GemmDirection::backward_weights);
  r.alpha = 1e-05;
  all.push_back(r);
  GemmProblem s = problem(5, 6, 7);
  s.alpha = 2.5e+30;
  s.beta = -1e-07;
  all.push_back(s);
  for (const GemmProblem& x : all) {
    EXPECT_EQ(GemmProblem::parse_key(x.key()), x) << x.key();
    EXPECT_EQ(GemmProblem::parse_key(x.key()).hash(), x.hash());
    const AnyProblem any = parse_problem_key(x.key());
    EXPECT_EQ(any.ref().key(), x.key());
  }
  GemmProblem zero = problem(2, 2, 2);
  zero.beta = -0.0;
  EXPECT_EQ(zero.key(), problem(2, 2, 2).key()) << "-0 and 0 are one problem";
  EXPECT_EQ(zero.hash(), problem(2, 2, 2).hash());
}

TEST(GemmProblem, BenchCommandNamesEveryField) {
  GemmProblem p = problem(9, 7, 5, true, false, 3, true, false, true, DType::bf16);
  p.alpha = -0.5;
  p.beta = 1e-05;
  EXPECT_EQ(p.bench_command(cpu(), "cpu.gemm.avx512"),
            "galley bench gemm -m 9 -n 7 -k 5 --transA 1 --transB 0 --batch_count 3 --shared_a --bias --alpha -0.5 "
            "--beta 1e-05 -F 1 --dtype bf16 --device cpu --solver cpu.gemm.avx512");
  p.direction = GemmDirection::backward_weights;
  p.beta = 0;
  EXPECT_NE(p.bench_command(cpu(), "").find(" -F 4 "), std::string::npos);
}

TEST(GemmProblem, MalformedKeysAreNamed) {
  for (const char* key : {"gemm-F-f32-nn-b1-m2-n2-k2-sa0-sb0-bias0-alpha1", "conv-F-f32-nn-b1-m2-n2-k2-sa0-sb0-bias0-alpha1-beta0",
                          "gemm-X-f32-nn-b1-m2-n2-k2-sa0-sb0-bias0-alpha1-beta0",
                          "gemm-F-f32-nx-b1-m2-n2-k2-sa0-sb0-bias0-alpha1-beta0",
                          "gemm-F-f32-nn-b1-m02-n2-k2-sa0-sb0-bias0-alpha1-beta0",
                          "gemm-F-f32-nn-b1-m2-n2-k2-sa2-sb0-bias0-alpha1-beta0",
                          "gemm-F-f32-nn-b1-m2-n2-k2-sa0-sb0-bias0-alpha1.0-beta0",
                          "gemm-F-f32-nn-b1-m2-n2-k2-sa0-sb0-bias0-alphanan-beta0",
                          "gemm-F-F32-nn-b1-m2-n2-k2-sa0-sb0-bias0-alpha1-beta0",
                          "gemm-B-f32-nn-b1-m2-n2-k2-sa0-sb0-bias0-alpha1-beta1",
                          "gemm-F-f32-nn-b1-m2-n2-k2-sa1-sb0-bias0-alpha1-beta0"}) {
    EXPECT_THROW(GemmProblem::parse_key(key), Error) << key;
  }
  expect_error([] { GemmProblem::parse_key("gemm-F-f32-nx-b1-m2-n2-k2-sa0-sb0-bias0-alpha1-beta0"); },
               {"malformed gemm key", "transposes"});
}

TEST(GemmProblem, ValidationNamesTheField) {
  expect_error([] { problem(0, 2, 2).validate(); }, {"m (rows"});
  expect_error([] { problem(2, -1, 2).validate(); }, {"n (columns", "-1"});
  expect_error([] { problem(2, 2, 0).validate(); }, {"k ("});
  expect_error([] { problem(2, 2, 2, false, false, 0).validate(); }, {"batch"});
  expect_error([] { problem(2, 2, 2, false, false, 1, true).validate(); }, {"shared_a", "batch > 1"});
  expect_error([] { problem(2, 2, 2, false, false, 1, false, true).validate(); }, {"shared_b"});
  expect_error([] { problem(2, 2, 2, false, false, 1, false, false, false, DType::i32).validate(); }, {"dtype i32"});
  GemmProblem p = problem(2, 2, 2);
  p.alpha = std::numeric_limits<double>::quiet_NaN();
  expect_error([&] { p.validate(); }, {"alpha"});
  p = problem(2, 2, 2, false, false, 1, false, false, false, DType::f32, GemmDirection::backward_weights);
  p.beta = 1;
  expect_error([&] { p.validate(); }, {"beta", "backward_weights"});
  expect_error([] { problem(std::int64_t(1) << 40, std::int64_t(1) << 40, 2).validate(); }, {"overflows"});
}

TEST(GemmProblem, TensorsFlopsAndBytes) {
  GemmProblem p = problem(3, 5, 7, true, true, 4, false, true, true, DType::f16);
  p.beta = 0.5;
  const auto t = p.tensors();
  ASSERT_EQ(t.size(), 4u);
  EXPECT_EQ(t[0].id, ArgId::src);
  EXPECT_EQ(t[0].desc, TensorDesc::contiguous(DType::f16, {4, 7, 3}));
  EXPECT_EQ(t[1].desc, TensorDesc::contiguous(DType::f16, {5, 7})) << "a shared B is one matrix";
  EXPECT_EQ(t[2].id, ArgId::bias);
  EXPECT_EQ(t[2].desc, TensorDesc::contiguous(DType::f16, {5}));
  EXPECT_EQ(t[3].id, ArgId::dst);
  EXPECT_TRUE(t[3].output);
  EXPECT_TRUE(t[3].also_read) << "beta != 0 reads the old dst";
  EXPECT_DOUBLE_EQ(p.flops(), 2.0 * 3 * 5 * 7 * 4);
  EXPECT_DOUBLE_EQ(p.min_bytes(), 2.0 * (4 * 21 + 35 + 5 + 2 * 4 * 15));
  p.direction = GemmDirection::backward_weights;
  p.beta = 0;
  const auto w = p.tensors();
  ASSERT_EQ(w.size(), 4u);
  EXPECT_EQ(w[2].id, ArgId::diff_wei);
  EXPECT_EQ(w[3].id, ArgId::diff_bias);
  p.direction = GemmDirection::backward_data;
  EXPECT_EQ(p.tensors().back().id, ArgId::diff_src);
  EXPECT_EQ(p.tensors().size(), 3u);
  // f32 tolerance widens with the length of each output's sum.
  EXPECT_DOUBLE_EQ(problem(8, 8, 1024).tolerance(), 1e-5);
  EXPECT_DOUBLE_EQ(problem(8, 8, 4096).tolerance(), 2e-5);
  EXPECT_DOUBLE_EQ(problem(8, 8, 4096, false, false, 1, false, false, false, DType::bf16).tolerance(), 1e-2);
  EXPECT_DOUBLE_EQ(problem(4096, 8, 8, false, false, 1, false, false, false, DType::f32,
                           GemmDirection::backward_weights).tolerance(), 2e-5);
}

TEST(GemmLowering, FoldsTheBatchOfALinearLayer) {
  // nn.Linear over a batch of sequences: one product of batch*m rows.
  const GemmCall f = lower_gemm(problem(7, 5, 3, false, true, 4, false, true));
  EXPECT_EQ(f.batch, 1);
  EXPECT_EQ(f.m, 28);
  // Its weight gradient sums over the batch: the batch folds into k.
  const GemmCall w = lower_gemm(problem(7, 5, 3, false, true, 4, false, true, false, DType::f32,
                                        GemmDirection::backward_weights));
  EXPECT_EQ(w.batch, 1);
  EXPECT_EQ(w.k, 28);
  EXPECT_FALSE(w.sum_batches);
  // A transposed A's gradient cannot fold: the batch stays a reduction.
  const GemmCall d = lower_gemm(problem(7, 5, 3, true, false, 4, true, false, false, DType::f32,
                                        GemmDirection::backward_data));
  EXPECT_EQ(d.batch, 4);
  EXPECT_TRUE(d.sum_batches);
  EXPECT_EQ(d.stride_o, 0);
}

// ---- the reference against hand-computed values ----

std::vector<std::byte> f32_bytes(const std::vector<float>& v) {
  std::vector<std::byte> out(v.size() * 4);
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

TEST(RefGemm, HandComputedForward) {
  // A = [1 2; 3 4], B = [5 6; 7 8]: AB = [19 22; 43 50].
  GemmProblem p = problem(2, 2, 2, false, false, 1, false, false, true);
  p.alpha = 2;
  p.beta = 0.5;
  std::vector<float> a = {1, 2, 3, 4}, b = {5, 6, 7, 8}, bias = {10, 20}, c = {2, 4, 6, 8};
  GemmArgs args;
  args.a = a.data(), args.b = b.data(), args.bias = bias.data(), args.c = c.data();
  reference_gemm(p, args);
  EXPECT_EQ(c, (std::vector<float>{2 * 19 + 1 + 10, 2 * 22 + 2 + 20, 2 * 43 + 3 + 10, 2 * 50 + 4 + 20}));
  // The same product with both operands stored transposed.
  GemmProblem t = problem(2, 2, 2, true, true);
  std::vector<float> at = {1, 3, 2, 4}, bt = {5, 7, 6, 8}, ct(4);
  args = {};
  args.a = at.data(), args.b = bt.data(), args.c = ct.data();
  reference_gemm(t, args);
  EXPECT_EQ(ct, (std::vector<float>{19, 22, 43, 50}));
  // A 1x3 by 3x1 batch of two with a shared B.
  GemmProblem s = problem(1, 1, 3, false, false, 2, false, true);
  std::vector<float> as = {1, 2, 3, 4, 5, 6}, bs = {1, 10, 100}, cs(2);
  args = {};
  args.a = as.data(), args.b = bs.data(), args.c = cs.data();
  reference_gemm(s, args);
  EXPECT_EQ(cs, (std::vector<float>{321, 654}));
}

TEST(RefGemm, HandComputedBackward) {
  // C = A B with A 1x2, B 2x1: dA = dC B^T, dB = A^T dC, dbias = dC summed.
  GemmProblem p = problem(1, 1, 2, false, false, 2, false, true, true, DType::f32, GemmDirection::backward_data);
  std::vector<float> a = {1, 2, 3, 4}, b = {5, 7}, dc = {10, 100}, da(4), db(2), dbias(1);
  GemmArgs args;
  args.dc = dc.data(), args.b = b.data(), args.da = da.data();
  reference_gemm(p, args);
  EXPECT_EQ(da, (std::vector<float>{50, 70, 500, 700}));
  p.direction = GemmDirection::backward_weights;
  args = {};
  args.a = a.data(), args.dc = dc.data(), args.db = db.data(), args.dbias = dbias.data();
  reference_gemm(p, args);
  EXPECT_EQ(db, (std::vector<float>{1 * 10 + 3 * 100, 2 * 10 + 4 * 100})) << "a shared B's gradient sums the batch";
  EXPECT_EQ(dbias, (std::vector<float>{110}));
}

// ---- backward against central finite differences of a double forward ----

// dst as doubles straight from the definition (a different code path from the reference's).
std::vector<double> forward_double(const GemmProblem& p, const std::vector<double>& a, const std::vector<double>& b,
                                   const std::vector<double>& bias) {
  std::vector<double> c(static_cast<std::size_t>(p.batch * p.m * p.n));
  for (std::int64_t s = 0; s < p.batch; ++s) {
    const std::int64_t as = p.shared_a ? 0 : s, bs = p.shared_b ? 0 : s;
    for (std::int64_t i = 0; i < p.m; ++i)
      for (std::int64_t j = 0; j < p.n; ++j) {
        double acc = 0;
        for (std::int64_t l = 0; l < p.k; ++l) {
          const double av = a[static_cast<std::size_t>(as * p.m * p.k + (p.trans_a ? l * p.m + i : i * p.k + l))];
          const double bv = b[static_cast<std::size_t>(bs * p.k * p.n + (p.trans_b ? j * p.k + l : l * p.n + j))];
          acc += av * bv;
        }
        c[static_cast<std::size_t>((s * p.m + i) * p.n + j)] = p.alpha * acc + (p.bias ? bias[static_cast<std::size_t>(j)] : 0);
      }
  }
  return c;
}

TEST(RefGemm, BackwardMatchesFiniteDifferences) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uni(-1, 1);
  const auto randoms = [&](std::int64_t count) {
    std::vector<float> v(static_cast<std::size_t>(count));
    for (float& x : v) x = uni(rng);
    return v;
  };
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (int shared = 0; shared < 3; ++shared) {
        GemmProblem p = problem(3, 4, 5, ta, tb, 2, shared == 1, shared == 2, true);
        p.alpha = 1.5;
        const std::vector<float> a = randoms(p.a_batches() * p.m * p.k), b = randoms(p.b_batches() * p.k * p.n);
        const std::vector<float> bias = randoms(p.n), g = randoms(p.batch * p.m * p.n);
        std::vector<double> ad(a.begin(), a.end()), bd(b.begin(), b.end()), biasd(bias.begin(), bias.end());
        const auto loss = [&] {
          const std::vector<double> c = forward_double(p, ad, bd, biasd);
          double l = 0;
          for (std::size_t i = 0; i < c.size(); ++i) l += c[i] * g[i];
          return l;
        };
        const auto numeric = [&](std::vector<double>& v, std::size_t i) {
          const double h = 1e-3, keep = v[i];
          v[i] = keep + h;
          const double up = loss();
          v[i] = keep - h;
          const double down = loss();
          v[i] = keep;
          return (up - down) / (2 * h);
        };
        std::vector<float> da(a.size()), db(b.size()), dbias(bias.size());
        GemmProblem bd_p = p;
        bd_p.direction = GemmDirection::backward_data;
        GemmArgs args;
        args.dc = g.data(), args.b = b.data(), args.da = da.data();
        reference_gemm(bd_p, args);
        GemmProblem bw_p = p;
        bw_p.direction = GemmDirection::backward_weights;
        args = {};
        args.a = a.data(), args.dc = g.data(), args.db = db.data(), args.dbias = dbias.data();
        reference_gemm(bw_p, args);
        const std::string where = p.key();
        for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(da[i], numeric(ad, i), 1e-4) << where << " dA " << i;
        for (std::size_t i = 0; i < b.size(); ++i) EXPECT_NEAR(db[i], numeric(bd, i), 1e-4) << where << " dB " << i;
        for (std::size_t i = 0; i < bias.size(); ++i) EXPECT_NEAR(dbias[i], numeric(biasd, i), 1e-4) << where << " dbias " << i;
      }
}

// ---- every cpu solver against the reference ----

std::vector<const SolverBase*> cpu_solvers() {
  std::vector<const SolverBase*> out;
  for (const SolverBase* s : solvers_of("cpu", OpKind::gemm)) {
    if (!s->is_reference()) out.push_back(s);
  }
  return out;
}

TEST(GemmCpuSolvers, ListEndsWithTheReference) {
  const auto all = solvers_of("cpu", OpKind::gemm);
  ASSERT_GE(all.size(), 3u);
  EXPECT_EQ(all.back()->name(), "ref.gemm");
  EXPECT_NE(find_solver("cpu", OpKind::gemm, "cpu.gemm.openblas"), nullptr);
  EXPECT_NE(find_solver("cpu", OpKind::gemm, "cpu.gemm.avx512"), nullptr);
}

void check_all(const GemmProblem& p, int& checked) {
  for (const SolverBase* s : cpu_solvers()) {
    if (!s->check_any(ProblemRef::of(p), cpu())) continue;
    const OpVerification v = check_against_reference(cpu(), ProblemRef::of(p), *s);
    EXPECT_TRUE(v.passed) << s->name() << " " << p.key() << ": " << v.summary;
    ++checked;
  }
}

TEST(GemmCpuSolvers, MatchTheReferenceOverOddShapesEveryTransposeAndDirection) {
  struct Shape {
    std::int64_t m, n, k;
  };
  const Shape shapes[] = {{1, 1, 1}, {17, 31, 129}, {31, 17, 1}, {129, 1, 17}, {1, 129, 31}};
  int checked = 0;
  for (const DType dt : {DType::f32, DType::f16, DType::bf16})
    for (const Shape& s : shapes)
      for (int t = 0; t < 4; ++t)
        for (const GemmDirection dir :
             {GemmDirection::forward, GemmDirection::backward_data, GemmDirection::backward_weights}) {
          GemmProblem p = problem(s.m, s.n, s.k, t & 1, t & 2, 1, false, false, (t + s.m) % 2 == 0, dt, dir);
          check_all(p, checked);
        }
  EXPECT_GT(checked, 3 * 5 * 4 * 3);
}

TEST(GemmCpuSolvers, MatchTheReferenceOnBatchesSharedOperandsAlphaAndBeta) {
  int checked = 0;
  for (const DType dt : {DType::f32, DType::bf16})
    for (int t = 0; t < 4; ++t)
      for (int shared = 0; shared < 3; ++shared)
        for (const GemmDirection dir :
             {GemmDirection::forward, GemmDirection::backward_data, GemmDirection::backward_weights}) {
          GemmProblem p = problem(23, 17, 31, t & 1, t & 2, 3, shared == 1, shared == 2, true, dt, dir);
          p.alpha = -0.75;
          if (dir == GemmDirection::forward) p.beta = 0.5;
          check_all(p, checked);
        }
  // Larger than one block of the pool's split, with a shared weight (nn.Linear).
  for (const GemmDirection dir :
       {GemmDirection::forward, GemmDirection::backward_data, GemmDirection::backward_weights}) {
    check_all(problem(300, 520, 70, false, true, 2, false, true, true, DType::f32, dir), checked);
  }
  EXPECT_GT(checked, 0);
}

TEST(GemmCpuSolvers, NaNAndInfPropagate) {
  runtime::Stream stream(cpu());
  GemmProblem p = problem(4, 3, 5);
  std::vector<float> a(20, 1.f), b(15, 1.f);
  a[0] = std::numeric_limits<float>::quiet_NaN();   // row 0 of C is NaN
  a[6] = std::numeric_limits<float>::infinity();    // row 1 of C is +inf
  for (const SolverBase* s : cpu_solvers()) {
    if (!s->check_any(ProblemRef::of(p), cpu())) continue;
    Tensor ta = Tensor::empty(stream, p.a_desc()), tb = Tensor::empty(stream, p.b_desc()), tc = Tensor::empty(stream, p.c_desc());
    ta.copy_from_host(stream, a.data(), a.size() * 4);
    tb.copy_from_host(stream, b.data(), b.size() * 4);
    gemm(stream, p, ta, tb, tc, nullptr, static_cast<const GemmSolver*>(s));
    const std::vector<float> c = tc.to_host<float>(stream);
    for (int j = 0; j < 3; ++j) {
      EXPECT_TRUE(std::isnan(c[static_cast<std::size_t>(j)])) << s->name();
      EXPECT_EQ(c[static_cast<std::size_t>(3 + j)], std::numeric_limits<float>::infinity()) << s->name();
      EXPECT_EQ(c[static_cast<std::size_t>(6 + j)], 5.f) << s->name();
    }
  }
}

// ---- the Tensor entry points ----

TEST(GemmEntryPoints, MatchTheReferenceAndNameBadTensors) {
  runtime::Stream stream(cpu());
  GemmProblem p = problem(9, 7, 5, false, true, 1, false, false, true);
  const auto ha = random_tensor(p.dtype, p.a_desc().elements(), 1);
  const auto hb = random_tensor(p.dtype, p.b_desc().elements(), 2);
  const auto hbias = random_tensor(p.dtype, p.n, 3);
  std::vector<std::byte> want(p.c_desc().bytes());
  GemmArgs args;
  args.a = ha.data(), args.b = hb.data(), args.bias = hbias.data(), args.c = want.data();
  reference_gemm(p, args);
  Tensor a = Tensor::empty(stream, p.a_desc()), b = Tensor::empty(stream, p.b_desc());
  Tensor bias = Tensor::empty(stream, p.bias_desc()), c = Tensor::empty(stream, p.c_desc());
  a.copy_from_host(stream, ha.data(), ha.size());
  b.copy_from_host(stream, hb.data(), hb.size());
  bias.copy_from_host(stream, hbias.data(), hbias.size());
  gemm(stream, p, a, b, c, &bias);
  const std::vector<float> got = c.to_host<float>(stream);
  const Comparison cmp = compare_outputs(p.dtype, got.data(), want.data(), p.c_desc().elements(), p.tolerance());
  EXPECT_TRUE(cmp.passed) << cmp.summary;

  // The same through linear_forward, x seen as [1, 9, 5].
  Tensor x3 = Tensor::wrap(cpu(), TensorDesc::contiguous(p.dtype, {1, 9, 5}), a.data(), a.storage_bytes());
  Tensor y3 = Tensor::empty(stream, TensorDesc::contiguous(p.dtype, {1, 9, 7}));
  linear_forward(stream, x3, b, &bias, y3);
  const std::vector<float> got3 = y3.to_host<float>(stream);
  EXPECT_EQ(got3, got);

  expect_error([&] { gemm(stream, p, a, a, c, &bias); }, {"B (weights)"});
  expect_error([&] { gemm(stream, p, a, b, c); }, {"bias"});
  expect_error([&] { gemm(stream, p, b, b, c, &bias); }, {"A (input)"});
  GemmProblem no_bias = p;
  no_bias.bias = false;
  expect_error([&] { gemm(stream, no_bias, a, b, c, &bias); }, {"bias", "no bias"});
  Tensor da = Tensor::empty(stream, p.a_desc());
  expect_error([&] { gemm_backward_data(stream, p, a, b, da); }, {"dC (output gradient)"});
  GemmProblem wrong = p;
  wrong.direction = GemmDirection::backward_data;
  expect_error([&] { gemm(stream, wrong, a, b, c, &bias); }, {"direction"});
  expect_error([&] { linear_forward(stream, x3, c, &bias, y3); }, {"w (weights)", "inputs per row"});
  Tensor w3 = Tensor::empty(stream, TensorDesc::contiguous(p.dtype, {1, 7, 5}));
  expect_error([&] { linear_forward(stream, x3, w3, &bias, y3); }, {"w (weights)", "rank 2"});
  stream.synchronize();
}

TEST(GemmEntryPoints, LinearBackwardMatchesTheReference) {
  runtime::Stream stream(cpu());
  // x [2, 6, 5], w [4, 5]: dx = dy w, dw = sum over the 12 rows of dy^T x, dbias = dy's column sums.
  const GemmProblem p = problem(12, 4, 5, false, true, 1, false, false, true);
  const auto hx = random_tensor(p.dtype, 60, 1), hw = random_tensor(p.dtype, 20, 2), hdy = random_tensor(p.dtype, 48, 3);
  std::vector<std::byte> want_dx(240), want_dw(80), want_db(16);
  GemmProblem bd = p;
  bd.direction = GemmDirection::backward_data;
  GemmArgs args;
  args.dc = hdy.data(), args.b = hw.data(), args.da = want_dx.data();
  reference_gemm(bd, args);
  GemmProblem bw = p;
  bw.direction = GemmDirection::backward_weights;
  args = {};
  args.a = hx.data(), args.dc = hdy.data(), args.db = want_dw.data(), args.dbias = want_db.data();
  reference_gemm(bw, args);
  Tensor x = Tensor::empty(stream, TensorDesc::contiguous(p.dtype, {2, 6, 5}));
  Tensor w = Tensor::empty(stream, TensorDesc::contiguous(p.dtype, {4, 5}));
  Tensor dy = Tensor::empty(stream, TensorDesc::contiguous(p.dtype, {2, 6, 4}));
  Tensor dx = Tensor::empty(stream, x.desc()), dw = Tensor::empty(stream, w.desc());
  Tensor db = Tensor::empty(stream, TensorDesc::contiguous(p.dtype, {4}));
  x.copy_from_host(stream, hx.data(), hx.size());
  w.copy_from_host(stream, hw.data(), hw.size());
  dy.copy_from_host(stream, hdy.data(), hdy.size());
  linear_backward_data(stream, dy, w, dx);
  linear_backward_weights(stream, x, dy, dw, &db);
  const auto check = [&](const Tensor& t, const std::vector<std::byte>& want, std::int64_t count) {
    const std::vector<float> got = t.to_host<float>(stream);
    const Comparison c = compare_outputs(p.dtype, got.data(), want.data(), count, 1e-5);
    EXPECT_TRUE(c.passed) << c.summary;
  };
  check(dx, want_dx, 60);
  check(dw, want_dw, 20);
  check(db, want_db, 4);
}

}  // namespace
}  // namespace galley::dnn
