// The cpu conv solvers with a prepared-weights slot: the first call fills it, later calls read it,
// and either way the output is the one a call without a slot computes, bit for bit (the packed
// or transformed weights are the same numbers in the same order). A slot that meets another
// solver, problem or weights array prepares again; bad arguments still throw.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/conv_isa.hpp"
#include "dnn/conv_grid.hpp"
#include "dnn/tensor_data.hpp"
#include "galley/core/error.hpp"
#include "galley/dnn/conv_solver.hpp"
#include "galley/dnn/prepared_weights.hpp"
#include "galley/runtime/device.hpp"
#include "galley/runtime/stream.hpp"

namespace galley {
namespace {

using dnn::ConvProblem;
using dnn::Layout;

ConvProblem make(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, std::int64_t k,
                 std::int64_t f, std::int64_t pad, std::int64_t stride, std::int64_t g,
                 Layout layout = Layout::nchw) {
  ConvProblem p = test::geometry(n, c, h, w, k, f, f, pad, pad, stride, stride, 1, 1, g);
  p.layout = layout;
  return p;
}

// One problem's random tensors and the calls that run a named solver on them.
class Call {
 public:
  explicit Call(const ConvProblem& p, std::uint64_t seed = 3)
      : p_(p),
        x_(dnn::random_tensor(DType::f32, p.x_desc().elements(), seed)),
        w_(dnn::random_tensor(DType::f32, p.w_desc().elements(), seed + 1)),
        bias_(dnn::random_tensor(DType::f32, p.epilogue.bias ? p.k : 0, seed + 2)),
        residual_(dnn::random_tensor(DType::f32, p.epilogue.residual ? p.y_desc().elements() : 0, seed + 3)) {
  }

  // y of `solver` with `slot` (null: none) and weights `w` (null: this call's own).
  std::vector<float> run(const dnn::ConvSolver& solver, const std::shared_ptr<dnn::PreparedWeights>& slot,
                         const void* w = nullptr) const {
    const runtime::Device cpu = runtime::device("cpu");
    const std::size_t ws_bytes = solver.workspace_bytes(p_, cpu);
    std::vector<std::byte> ws(ws_bytes + 64);
    std::vector<float> y(static_cast<std::size_t>(p_.y_desc().elements()), std::nanf(""));
    dnn::ConvArgs args{x_.data(), w != nullptr ? w : w_.data(), y.data(), ws.data(), ws_bytes};
    args.bias = p_.epilogue.bias ? bias_.data() : nullptr;
    args.residual = p_.epilogue.residual ? residual_.data() : nullptr;
    args.prepared = slot;
    runtime::Stream stream(cpu);
    solver.run(stream, p_, args);
    stream.synchronize();
    return y;
  }

  const ConvProblem& problem() const { return p_; }

 private:
  ConvProblem p_;
  std::vector<std::byte> x_, w_, bias_, residual_;
};

const dnn::ConvSolver& solver(const std::string& name) {
  const dnn::ConvSolver* s = dnn::find_conv_solver("cpu", name);
  if (s == nullptr) throw Error(Status::not_found, name + " is not registered");
  return *s;
}

void expect_same(const std::vector<float>& want, const std::vector<float>& got, const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (std::size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(std::memcmp(&want[i], &got[i], sizeof(float)), 0)
        << what << ": element " << i << " is " << got[i] << ", without a slot " << want[i];
  }
}

// Without a slot, with a fresh slot (which it fills), and again with the filled slot: three equal
// outputs. Returns how many times the slot was prepared.
std::uint64_t expect_prepared_matches(const std::string& name, const ConvProblem& p) {
  SCOPED_TRACE(name + " " + p.key());
  const dnn::ConvSolver& s = solver(name);
  if (!s.check(p, runtime::device("cpu"))) {
    ADD_FAILURE() << name << " refuses " << p.key();
    return 0;
  }
  const Call call(p);
  const auto plain = call.run(s, nullptr);
  auto slot = std::make_shared<dnn::PreparedWeights>();
  expect_same(plain, call.run(s, slot), "first call with the slot");
  expect_same(plain, call.run(s, slot), "second call with the slot");
  EXPECT_LE(slot->preparations(), 1u);
  return slot->preparations();
}

// Shapes each solver claims, odd ones among them: prime sizes, channels that are not a multiple
// of the vector width, groups, a fused epilogue, batch 1 and a larger batch, both layouts.
std::vector<ConvProblem> shapes_3x3() {
  std::vector<ConvProblem> out = {make(1, 17, 31, 29, 23, 3, 1, 1, 1),
                                  make(1, 64, 14, 14, 64, 3, 1, 1, 1),
                                  make(2, 13, 11, 7, 37, 3, 0, 1, 1),
                                  make(1, 3, 224 / 8, 224 / 8, 32, 3, 1, 2, 1),
                                  make(1, 24, 23, 19, 12, 3, 1, 1, 3),
                                  make(1, 512, 7, 7, 512, 3, 1, 1, 1),
                                  make(1, 19, 13, 13, 29, 3, 1, 1, 1, Layout::nhwc)};
  ConvProblem fused = make(1, 40, 17, 17, 56, 3, 1, 1, 1);
  fused.epilogue = dnn::ConvEpilogue::with(dnn::Activation::relu, true, true);
  out.push_back(fused);
  return out;
}

std::vector<ConvProblem> shapes_1x1() {
  std::vector<ConvProblem> out = {make(1, 64, 56, 56, 256, 1, 0, 1, 1), make(1, 17, 13, 11, 29, 1, 0, 1, 1),
                                  make(1, 256, 14, 14, 1024, 1, 0, 1, 1), make(2, 96, 9, 9, 43, 1, 0, 1, 1),
                                  make(1, 30, 12, 12, 42, 1, 0, 1, 6), make(1, 160, 7, 7, 960, 1, 0, 1, 1),
                                  make(1, 23, 17, 17, 31, 1, 0, 1, 1, Layout::nhwc),
                                  // Strided: the pixels on the grid gathered, then the same product.
                                  make(1, 64, 28, 28, 130, 1, 0, 2, 1), make(3, 37, 15, 13, 41, 1, 0, 2, 1),
                                  make(1, 64, 13, 14, 70, 1, 0, 2, 1),
                                  make(2, 29, 17, 19, 23, 1, 0, 2, 1, Layout::nhwc)};
  ConvProblem fused = make(1, 64, 28, 28, 88, 1, 0, 1, 1);
  fused.epilogue = dnn::ConvEpilogue::with(dnn::Activation::clip, true, false);
  fused.epilogue.beta = 6;
  out.push_back(fused);
  return out;
}

TEST(CpuConvPreparedWeights, Im2colGemmMatchesUnprepared) {
  for (const auto& p : shapes_3x3()) expect_prepared_matches("cpu.conv.im2col_gemm", p);
  for (const auto& p : shapes_1x1()) expect_prepared_matches("cpu.conv.im2col_gemm", p);
}

TEST(CpuConvPreparedWeights, Gemm1x1MatchesUnprepared) {
  for (const auto& p : shapes_1x1()) expect_prepared_matches("cpu.conv.gemm_1x1", p);
}

TEST(CpuConvPreparedWeights, WinogradMatchesUnprepared) {
  if (!backends::cpu::cpu_has_avx2_fma()) GTEST_SKIP() << "Winograd needs AVX2 and FMA";
  for (const auto& p : shapes_3x3()) {
    if (p.groups != 1 || p.stride_h != 1) continue;
    EXPECT_EQ(expect_prepared_matches("cpu.conv.winograd_f4x3", p), 1u) << p.key();
  }
}

TEST(CpuConvPreparedWeights, OtherSolversIgnoreTheSlot) {
  expect_prepared_matches("cpu.conv.direct", make(1, 17, 31, 29, 23, 3, 1, 1, 1));
  expect_prepared_matches("cpu.conv.depthwise", make(1, 32, 15, 15, 32, 3, 1, 1, 32));
  expect_prepared_matches("ref.conv.direct", make(1, 5, 7, 7, 6, 3, 1, 1, 1));
}

TEST(CpuConvPreparedWeights, PackingSolversFillTheSlotOnce) {
  if (!backends::cpu::cpu_has_avx512()) GTEST_SKIP() << "the shared packed weights are the AVX-512 SGEMM's";
  // Batch 1 on planes of at least 64 pixels: the paths that pack weights for every call.
  EXPECT_EQ(expect_prepared_matches("cpu.conv.gemm_1x1", make(1, 64, 56, 56, 256, 1, 0, 1, 1)), 1u);
  EXPECT_EQ(expect_prepared_matches("cpu.conv.gemm_1x1", make(1, 30, 12, 12, 42, 1, 0, 1, 6)), 1u);
  EXPECT_EQ(expect_prepared_matches("cpu.conv.im2col_gemm", make(1, 256, 14, 14, 256, 3, 1, 1, 1)), 1u);
  EXPECT_EQ(expect_prepared_matches("cpu.conv.im2col_gemm", make(1, 24, 23, 19, 57, 3, 1, 1, 3)), 1u);
  // Strided 1x1 in several runs of gathered images, and images whose columns im2col_gemm gathers
  // whole (stride 2 to 14x14 and 15x14) before gemm_1x1's product: one preparation for all.
  EXPECT_EQ(expect_prepared_matches("cpu.conv.gemm_1x1", make(20, 1024, 21, 19, 24, 1, 0, 2, 1)), 1u);
  EXPECT_EQ(expect_prepared_matches("cpu.conv.gemm_1x1", make(1, 64, 28, 28, 130, 1, 0, 2, 1)), 1u);
  EXPECT_EQ(expect_prepared_matches("cpu.conv.im2col_gemm", make(1, 40, 28, 28, 67, 3, 1, 2, 1)), 1u);
  EXPECT_EQ(expect_prepared_matches("cpu.conv.im2col_gemm", make(2, 37, 29, 27, 101, 3, 1, 2, 1)), 1u);
}

TEST(CpuConvPreparedWeights, AnotherSolverOrWeightsPreparesAgain) {
  if (!backends::cpu::cpu_has_avx512()) GTEST_SKIP() << "needs the AVX-512 packed paths";
  const ConvProblem p = make(1, 64, 14, 14, 64, 3, 1, 1, 1);
  const Call call(p);
  const auto& im2col = solver("cpu.conv.im2col_gemm");
  const auto& wino = solver("cpu.conv.winograd_f4x3");
  const auto im2col_plain = call.run(im2col, nullptr);
  const auto wino_plain = call.run(wino, nullptr);
  auto slot = std::make_shared<dnn::PreparedWeights>();
  expect_same(im2col_plain, call.run(im2col, slot), "im2col, first");
  expect_same(wino_plain, call.run(wino, slot), "winograd after im2col");
  EXPECT_EQ(slot->preparations(), 2u);
  EXPECT_NE(slot->tag().find("cpu.conv.winograd_f4x3"), std::string::npos) << slot->tag();
  expect_same(im2col_plain, call.run(im2col, slot), "im2col after winograd");
  EXPECT_EQ(slot->preparations(), 3u);

  // Other weights at another address: prepared again, and the output is theirs.
  const auto other = dnn::random_tensor(DType::f32, p.w_desc().elements(), 99);
  const auto other_plain = call.run(im2col, nullptr, other.data());
  expect_same(other_plain, call.run(im2col, slot, other.data()), "im2col, other weights");
  EXPECT_EQ(slot->preparations(), 4u);

  // Another problem of the same solver (a larger batch) prepares its own form.
  const Call batch2(make(2, 64, 14, 14, 64, 3, 1, 1, 1));
  expect_same(batch2.run(im2col, nullptr), batch2.run(im2col, slot), "batch 2");
  EXPECT_EQ(slot->preparations(), 5u);
}

TEST(CpuConvPreparedWeights, AnotherIsaLevelPreparesAgain) {
  using backends::cpu::CpuIsa;
  if (!backends::cpu::cpu_has_avx512()) GTEST_SKIP() << "needs a CPU with AVX-512 to lower the level from";
  const Call call(make(1, 24, 13, 13, 40, 3, 1, 1, 1));
  const auto& wino = solver("cpu.conv.winograd_f4x3");
  auto slot = std::make_shared<dnn::PreparedWeights>();
  expect_same(call.run(wino, nullptr), call.run(wino, slot), "avx512");
  struct LiftCap {
    ~LiftCap() { backends::cpu::set_cpu_isa_cap(CpuIsa::avx512); }
  } lift;
  backends::cpu::set_cpu_isa_cap(CpuIsa::avx2);
  expect_same(call.run(wino, nullptr), call.run(wino, slot), "avx2 with a slot filled at avx512");
  EXPECT_EQ(slot->preparations(), 2u);
}

TEST(CpuConvPreparedWeights, BadArgumentsStillThrow) {
  const ConvProblem p = make(1, 16, 9, 9, 16, 3, 1, 1, 1);
  const runtime::Device cpu = runtime::device("cpu");
  runtime::Stream stream(cpu);
  std::vector<float> x(16 * 81), w(16 * 16 * 9), y(16 * 81);
  auto slot = std::make_shared<dnn::PreparedWeights>();
  for (const auto* s : dnn::conv_solvers("cpu")) {
    if (s->is_reference() || !s->check(p, cpu)) continue;
    SCOPED_TRACE(std::string(s->name()));
    const std::size_t need = s->workspace_bytes(p, cpu);
    std::vector<std::byte> ws(need + 1);
    dnn::ConvArgs args{nullptr, w.data(), y.data(), ws.data(), need};
    args.prepared = slot;
    EXPECT_THROW(s->run(stream, p, args), Error);
    args.x = x.data();
    args.w = nullptr;
    EXPECT_THROW(s->run(stream, p, args), Error);
  }
  stream.synchronize();
  EXPECT_EQ(slot->preparations(), 0u);
}

}  // namespace
}  // namespace galley
