// The GEMM behind cpu.conv.gemm_1x1 and cpu.conv.im2col_gemm: conv_blas's sgemm (Galley's packed
// AVX-512 kernel where the CPU has it, else OpenBLAS) and avx512::sgemm directly, against a
// double-precision product on random data. Sizes are chosen to cut through every block: m, n, k
// not multiples of the 6x64 tile or of the kMc/kNc/kKc blocks, leading dimensions wider than the
// matrix, every transpose, alpha and beta, and a poisoned C that beta == 0 must not read. The
// AVX-512 kernel's post-ops (bias, residual, activation in its stores) over the same sizes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/conv_blas.hpp"
#include "backends/cpu/conv_isa.hpp"
#include "backends/cpu/sgemm_avx512.hpp"
#include "dnn/activation_math.hpp"
#include "galley/core/error.hpp"
#include "random_floats.hpp"

namespace galley::backends::cpu {
namespace {

struct Case {
  std::int64_t m, n, k;
  bool ta, tb;
  float alpha, beta;
};

using galley::test::random_floats;
using Act = avx512::PostOps::Activation;

// Which post-ops a case asks for; check_case makes the bias and residual (and passes null for none).
struct PostSpec {
  bool bias = false, bias_per_row = true, residual = false;
  Act activation = Act::none;
  float act_alpha = 0, act_beta = 0;
  bool any() const { return bias || residual || activation != Act::none; }
};

double activate(const PostSpec& p, double v) {
  switch (p.activation) {
    case Act::none: return v;
    case Act::relu: return v < 0 ? 0 : v;
    case Act::leaky_relu: return v > 0 ? v : v * p.act_alpha;
    case Act::clip: return v < p.act_alpha ? p.act_alpha : (v > p.act_beta ? p.act_beta : v);
  }
  return v;
}

// Runs `gemm` on one case with padded leading dimensions and checks every element of C, and
// that the padding columns of C were left alone. `gemm` gets the post-ops of `spec` as its last
// argument (null when spec asks for none).
template <typename Gemm>
void check_case(const Case& t, Gemm gemm, const PostSpec& spec = {}) {
  SCOPED_TRACE("m=" + std::to_string(t.m) + " n=" + std::to_string(t.n) + " k=" + std::to_string(t.k) +
               " ta=" + std::to_string(t.ta) + " tb=" + std::to_string(t.tb) + " alpha=" + std::to_string(t.alpha) +
               " beta=" + std::to_string(t.beta) + " post: bias=" + std::to_string(spec.bias) + " per_row=" +
               std::to_string(spec.bias_per_row) + " residual=" + std::to_string(spec.residual) +
               " activation=" + std::to_string(static_cast<int>(spec.activation)));
  const std::int64_t a_rows = t.ta ? t.k : t.m, a_cols = t.ta ? t.m : t.k;
  const std::int64_t b_rows = t.tb ? t.n : t.k, b_cols = t.tb ? t.k : t.n;
  const std::int64_t lda = a_cols + 3, ldb = b_cols + 5, ldc = t.n + 7;
  const auto a = random_floats(static_cast<std::size_t>(a_rows * lda), 11);
  const auto b = random_floats(static_cast<std::size_t>(b_rows * ldb), 12);
  std::vector<float> c = random_floats(static_cast<std::size_t>(t.m * ldc), 13);
  if (t.beta == 0.0f) {
    for (std::int64_t i = 0; i < t.m; ++i) {
      for (std::int64_t j = 0; j < t.n; ++j) c[static_cast<std::size_t>(i * ldc + j)] = NAN;  // must not be read
    }
  }
  const std::vector<float> c0 = c;
  // The residual with its own leading dimension, so a kernel that steps it by ldc shows.
  const std::int64_t ldr = t.n + 2;
  const auto bias = random_floats(static_cast<std::size_t>(spec.bias_per_row ? t.m : t.n), 14);
  const auto residual = random_floats(static_cast<std::size_t>(t.m * ldr), 15);
  avx512::PostOps post;
  post.bias = spec.bias ? bias.data() : nullptr;
  post.bias_per_row = spec.bias_per_row;
  post.residual = spec.residual ? residual.data() : nullptr;
  post.ld_residual = ldr;
  post.activation = spec.activation;
  post.act_alpha = spec.act_alpha;
  post.act_beta = spec.act_beta;
  gemm(t.ta, t.tb, t.m, t.n, t.k, t.alpha, a.data(), lda, b.data(), ldb, t.beta, c.data(), ldc,
       spec.any() ? &post : nullptr);
  for (std::int64_t i = 0; i < t.m; ++i) {
    for (std::int64_t j = 0; j < ldc; ++j) {
      const auto at = static_cast<std::size_t>(i * ldc + j);
      if (j >= t.n) {
        ASSERT_EQ(c[at], c0[at]) << "wrote past column n at (" << i << ", " << j << ")";
        continue;
      }
      double sum = 0, magnitude = 0;
      for (std::int64_t p = 0; p < t.k; ++p) {
        const double av = a[static_cast<std::size_t>(t.ta ? p * lda + i : i * lda + p)];
        const double bv = b[static_cast<std::size_t>(t.tb ? j * ldb + p : p * ldb + j)];
        sum += av * bv;
        magnitude += std::fabs(av * bv);
      }
      double want = t.alpha * sum;
      if (t.beta != 0.0f) want += t.beta * static_cast<double>(c0[at]);
      // fp32 relative to the size of the terms summed (a dot product's rounding scales with them).
      double scale = std::fabs(t.alpha) * magnitude + 1e-30;
      if (t.beta != 0.0f) scale += std::fabs(t.beta * c0[at]);
      if (spec.bias) {
        const double bv = bias[static_cast<std::size_t>(spec.bias_per_row ? i : j)];
        want += bv;
        scale += std::fabs(bv);
      }
      if (spec.residual) {
        const double rv = residual[static_cast<std::size_t>(i * ldr + j)];
        want += rv;
        scale += std::fabs(rv);
      }
      // Each activation here moves a value by at most its own change, so the scale still bounds it.
      want = activate(spec, want);
      ASSERT_FALSE(std::isnan(c[at])) << "NaN at (" << i << ", " << j << ")";
      ASSERT_LE(std::fabs(c[at] - want) / scale, 1e-5) << "at (" << i << ", " << j << "): " << c[at] << " vs " << want;
    }
  }
}

std::vector<Case> cases() {
  std::vector<Case> out;
  const std::int64_t sizes[][3] = {
      {1, 1, 1},     {6, 64, 256},  {5, 17, 3},       {7, 65, 257},  {13, 130, 31},  {97, 513, 19},
      {64, 196, 64}, {1, 300, 600}, {200, 1, 70},     {31, 49, 513}, {103, 577, 263}, {12, 48, 0},
      {97, 98, 300}, {13, 40, 7},  {25, 128, 257},  // A read in place (N <= 128, no narrow tail)
      {1, 1000, 2048}, {1, 7, 33},  {1, 3, 16},     // one row: B^T as dot products (FC at batch 1)
  };
  for (const auto& s : sizes) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) out.push_back({s[0], s[1], s[2], ta, tb, 1.0f, 0.0f});
    }
  }
  out.push_back({37, 141, 300, false, false, -0.5f, 0.0f});
  out.push_back({37, 141, 300, false, true, 1.0f, 1.0f});
  out.push_back({23, 70, 9, true, false, 2.0f, -0.75f});
  out.push_back({23, 70, 0, false, false, 2.0f, 0.5f});  // k == 0 only scales C
  // A read in place with a 49-column panel (48 columns in vectors, the last as dot products over
  // k): slices of 256 and a short one, B packed (over 128 rows), the panel after a full one, and
  // later slices added to C with beta.
  for (const Case& t :
       {Case{12, 49, 300, false, false, 1.0f, 0.0f}, Case{12, 49, 300, false, true, 1.0f, 0.0f},
        Case{200, 49, 70, false, false, 1.0f, 0.0f}, Case{6, 113, 40, false, false, 1.0f, 0.0f},
        Case{37, 49, 520, false, false, -0.5f, 1.0f}}) {
    out.push_back(t);
  }
  return out;
}

TEST(CpuSgemm, Avx512KernelMatchesDoubleProduct) {
  if (cpu_isa_supported() < CpuIsa::avx512) GTEST_SKIP() << "no AVX-512 on this CPU";
  std::vector<float> storage(static_cast<std::size_t>(avx512::kPackFloats + 16));
  const auto addr = reinterpret_cast<std::uintptr_t>(storage.data());
  float* pack = reinterpret_cast<float*>((addr + 63) & ~std::uintptr_t{63});
  for (const Case& t : cases()) {
    check_case(t, [&](bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
                      std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc,
                      const avx512::PostOps* post) {
      avx512::sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, pack, post);
    });
  }
}

// A packed whole by pack_a_rows() (in two row ranges, as two workers would) and shared:
// sgemm_packed_a() must give what sgemm() gives for plain A and B.
TEST(CpuSgemm, Avx512PackedAMatchesDoubleProduct) {
  if (cpu_isa_supported() < CpuIsa::avx512) GTEST_SKIP() << "no AVX-512 on this CPU";
  std::vector<float> storage(static_cast<std::size_t>(avx512::kKc * avx512::kNc + 16));
  const auto addr = reinterpret_cast<std::uintptr_t>(storage.data());
  float* pack = reinterpret_cast<float*>((addr + 63) & ~std::uintptr_t{63});
  for (const Case& t : cases()) {
    if (t.ta || t.tb) continue;
    check_case(t, [&](bool, bool, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
                      std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc,
                      const avx512::PostOps* post) {
      std::vector<float> packed(static_cast<std::size_t>(avx512::packed_a_floats(m, k)), NAN);
      const std::int64_t split = (m / 2 + avx512::kMr - 1) / avx512::kMr * avx512::kMr;
      avx512::pack_a_rows(a, lda, m, k, split, m, packed.data());
      avx512::pack_a_rows(a, lda, m, k, 0, split, packed.data());
      avx512::sgemm_packed_a(m, n, k, alpha, packed.data(), b, ldb, beta, c, ldc, pack, post);
    });
  }
  // Taller A (B packed as well, several 96-row blocks) with a ragged column tail.
  for (const Case& t : {Case{151, 196, 600, false, false, 1.0f, 0.0f}, Case{298, 70, 257, false, false, 1.0f, 0.0f},
                        Case{200, 531, 300, false, false, 0.5f, 1.0f}}) {
    check_case(t, [&](bool, bool, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
                      std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc,
                      const avx512::PostOps* post) {
      std::vector<float> packed(static_cast<std::size_t>(avx512::packed_a_floats(m, k)), NAN);
      avx512::pack_a_rows(a, lda, m, k, 0, m, packed.data());
      avx512::sgemm_packed_a(m, n, k, alpha, packed.data(), b, ldb, beta, c, ldc, pack, post);
    });
  }
}

// A packed once and multiplied in row blocks, as cpu.conv.gemm_1x1 does with prepared weights: each
// block reads its rows of the shared packed A, with C, the per-row bias and the residual offset to
// the block's first row.
TEST(CpuSgemm, Avx512PackedARowBlocksMatchDoubleProduct) {
  if (cpu_isa_supported() < CpuIsa::avx512) GTEST_SKIP() << "no AVX-512 on this CPU";
  std::vector<float> storage(static_cast<std::size_t>(avx512::kKc * avx512::kNc + 16));
  const auto addr = reinterpret_cast<std::uintptr_t>(storage.data());
  float* pack = reinterpret_cast<float*>((addr + 63) & ~std::uintptr_t{63});
  std::vector<Case> blocked;
  for (const Case& t : cases()) {
    if (!t.ta && !t.tb) blocked.push_back(t);
  }
  blocked.push_back(Case{151, 196, 600, false, false, 1.0f, 0.0f});
  blocked.push_back(Case{298, 70, 257, false, false, 1.0f, 0.0f});
  for (const Case& t : blocked) {
    for (const std::int64_t blocks : {2, 3}) {
      const auto gemm = [&](bool, bool, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
                            std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc,
                            const avx512::PostOps* post) {
        std::vector<float> packed(static_cast<std::size_t>(avx512::packed_a_floats(m, k)), NAN);
        avx512::pack_a_rows(a, lda, m, k, 0, m, packed.data());
        const std::int64_t panels = (m + avx512::kMr - 1) / avx512::kMr;
        for (std::int64_t blk = 0; blk < blocks; ++blk) {
          const std::int64_t r0 = std::min(m, panels * blk / blocks * avx512::kMr);
          const std::int64_t r1 = std::min(m, panels * (blk + 1) / blocks * avx512::kMr);
          if (r0 >= r1) continue;
          avx512::PostOps shifted;
          if (post != nullptr) {
            shifted = *post;
            if (shifted.bias != nullptr && shifted.bias_per_row) shifted.bias += r0;
            if (shifted.residual != nullptr) shifted.residual += r0 * shifted.ld_residual;
          }
          avx512::sgemm_packed_a_rows(m, r0, r1 - r0, n, k, alpha, packed.data(), b, ldb, beta, c + r0 * ldc, ldc,
                                      pack, post != nullptr ? &shifted : nullptr);
        }
      };
      check_case(t, gemm);
      check_case(t, gemm, PostSpec{.bias = true, .residual = true, .activation = Act::relu});
      check_case(t, gemm, PostSpec{.bias = true, .bias_per_row = false, .activation = Act::clip, .act_beta = 0.5f});
    }
  }
}

// Lifts the ISA cap again however the scope is left (a failed ASSERT returns early), so one
// failure does not run the later tests at a lower level.
struct LiftCapAtExit {
  ~LiftCapAtExit() { set_cpu_isa_cap(CpuIsa::avx512); }
};

// The dispatching sgemm at every ISA level this CPU has (OpenBLAS below AVX-512).
TEST(CpuSgemm, DispatchMatchesDoubleProductAtEveryIsa) {
  const LiftCapAtExit lift;
  for (CpuIsa isa : {CpuIsa::scalar, CpuIsa::avx2, CpuIsa::avx512}) {
    if (isa > cpu_isa_supported()) continue;
    SCOPED_TRACE(std::string(to_string(isa)));
    set_cpu_isa_cap(isa);
    ASSERT_EQ(cpu_isa(), isa);
    for (const Case& t : cases()) {
      check_case(t, [](bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
                       std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc,
                       const avx512::PostOps* post) { sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, post); });
    }
  }
}

// The post-ops the kernels apply as they store the last slice of C, one part at a time and all
// together, each activation, the bias along either side: every case of cases() (ragged tiles and
// blocks, several 256-deep slices whose partial sums must not see them, k == 0, alpha and beta)
// through sgemm() and, for a plain A, sgemm_packed_a(); values cross zero and clip's bounds.
TEST(CpuSgemm, Avx512PostOpsMatchDoubleProduct) {
  if (cpu_isa_supported() < CpuIsa::avx512) GTEST_SKIP() << "no AVX-512 on this CPU";
  std::vector<float> storage(static_cast<std::size_t>(avx512::kPackFloats + 16));
  const auto addr = reinterpret_cast<std::uintptr_t>(storage.data());
  float* pack = reinterpret_cast<float*>((addr + 63) & ~std::uintptr_t{63});
  const PostSpec specs[] = {
      {.bias = true},
      {.bias = true, .bias_per_row = false},
      {.residual = true},
      {.activation = Act::relu},
      {.bias = true, .residual = true, .activation = Act::relu},
      {.bias = true, .bias_per_row = false, .residual = true, .activation = Act::leaky_relu, .act_alpha = 0.1f},
      {.bias = true, .activation = Act::clip, .act_alpha = -0.5f, .act_beta = 0.75f},
      {.residual = true, .activation = Act::leaky_relu, .act_alpha = 1.5f},
  };
  for (const PostSpec& spec : specs) {
    for (const Case& t : cases()) {
      check_case(
          t,
          [&](bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
              std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc,
              const avx512::PostOps* post) { avx512::sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, pack, post); },
          spec);
      if (t.ta || t.tb) continue;
      check_case(
          t,
          [&](bool, bool, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a, std::int64_t lda,
              const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc, const avx512::PostOps* post) {
            std::vector<float> packed(static_cast<std::size_t>(avx512::packed_a_floats(m, k)), NAN);
            avx512::pack_a_rows(a, lda, m, k, 0, m, packed.data());
            avx512::sgemm_packed_a(m, n, k, alpha, packed.data(), b, ldb, beta, c, ldc, pack, post);
          },
          spec);
      // The same post-ops applied afterwards to the stored product, as the conv epilogue does to
      // the tiles of kernels that are no GEMM.
      check_case(
          t,
          [&](bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
              std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc,
              const avx512::PostOps* post) {
            avx512::sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, pack);
            avx512::apply_post_ops(m, n, c, ldc, *post);
          },
          spec);
    }
  }
}

// apply_post_ops keeps what the scalar definitions keep: NaN through every activation, -0 through
// relu and clip, and touches nothing past column n.
TEST(CpuSgemm, Avx512PostOpsInPlaceKeepNanAndNegativeZero) {
  if (cpu_isa_supported() < CpuIsa::avx512) GTEST_SKIP() << "no AVX-512 on this CPU";
  for (const Act act : {Act::relu, Act::leaky_relu, Act::clip}) {
    SCOPED_TRACE(static_cast<int>(act));
    std::vector<float> c = {NAN, -0.0f, -2.0f, 3.0f, 0.5f, 7.0f, 9.0f};  // 3 x 2, ldc 3; c[2], c[5] padding
    avx512::PostOps post;
    post.activation = act;
    post.act_alpha = act == Act::clip ? -1.0f : 0.25f;
    post.act_beta = 1.0f;
    avx512::apply_post_ops(2, 2, c.data(), 3, post);
    EXPECT_TRUE(std::isnan(c[0]));
    EXPECT_EQ(c[1], 0.0f);
    EXPECT_TRUE(std::signbit(c[1]));
    EXPECT_EQ(c[2], -2.0f);  // padding
    EXPECT_EQ(c[3], act == Act::relu ? 3.0f : (act == Act::leaky_relu ? 3.0f : 1.0f));
    EXPECT_EQ(c[4], 0.5f);
    EXPECT_EQ(c[5], 7.0f);  // padding
  }
}

// relu and clip in the post-ops equal the scalar definitions bit for bit on the values where a
// vector min/max could differ from a compare and select: NaN, both zeros, the bounds themselves,
// and clip bounds that are zeros of either sign (relu6's 0 included).
TEST(CpuSgemm, Avx512PostOpsReluAndClipMatchTheScalarDefinitions) {
  if (cpu_isa_supported() < CpuIsa::avx512) GTEST_SKIP() << "no AVX-512 on this CPU";
  const std::vector<float> values = {NAN,     -NAN,     0.0f,      -0.0f, 6.0f,  7.0f, -1.0f, 0.5f, 1e-40f,
                                     -1e-40f, INFINITY, -INFINITY, 3.0f,  -6.0f, 1.0f, -2.5f, 6.5f};
  const struct {
    Act act;
    float alpha, beta;
  } cases[] = {{Act::relu, 0, 0},           {Act::clip, 0.0f, 6.0f},  {Act::clip, -0.0f, 0.0f},
               {Act::clip, 0.0f, -0.0f},    {Act::clip, -1.0f, 1.0f}, {Act::clip, 6.0f, 6.0f},
               {Act::clip, -INFINITY, 0.0f}};
  for (const auto& k : cases) {
    SCOPED_TRACE(std::to_string(static_cast<int>(k.act)) + " " + std::to_string(k.alpha) + ".." +
                 std::to_string(k.beta));
    std::vector<float> c = values;
    avx512::PostOps post;
    post.activation = k.act;
    post.act_alpha = k.alpha;
    post.act_beta = k.beta;
    avx512::apply_post_ops(1, static_cast<std::int64_t>(c.size()), c.data(),
                           static_cast<std::int64_t>(c.size()), post);
    for (std::size_t i = 0; i < values.size(); ++i) {
      const float want = k.act == Act::relu
                             ? dnn::activ_math::Relu<float>{0, 0}.forward(values[i])
                             : dnn::activ_math::Clip<float>{k.alpha, k.beta}.forward(values[i]);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(c[i])) << "input " << values[i];
      } else {
        EXPECT_EQ(std::memcmp(&c[i], &want, sizeof(float)), 0)
            << "input " << values[i] << ": " << c[i] << " want " << want;
      }
    }
  }
}

// Post-ops are the AVX-512 kernel's: the OpenBLAS path refuses them rather than drop them.
TEST(CpuSgemm, PostOpsOnlyWhereTheKernelAppliesThem) {
  const LiftCapAtExit lift;
  const float a = 1, b = 1;
  float c = 0;
  avx512::PostOps post;
  post.activation = Act::relu;
  set_cpu_isa_cap(CpuIsa::avx2);
  EXPECT_FALSE(sgemm_applies_post_ops());
  EXPECT_THROW(sgemm(false, false, 1, 1, 1, 1.0f, &a, 1, &b, 1, 0.0f, &c, 1, &post), Error);
  set_cpu_isa_cap(CpuIsa::avx512);
  EXPECT_EQ(sgemm_applies_post_ops(), cpu_isa_supported() == CpuIsa::avx512 && !blas_threaded());
}

TEST(CpuSgemm, IsaCapParsesAndRefusesUnknownNames) {
  const LiftCapAtExit lift;
  EXPECT_EQ(parse_cpu_isa("avx2"), CpuIsa::avx2);
  EXPECT_EQ(parse_cpu_isa("scalar"), CpuIsa::scalar);
  EXPECT_EQ(parse_cpu_isa("avx512"), CpuIsa::avx512);
  try {
    parse_cpu_isa("sse9");
    FAIL() << "sse9 was accepted";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("sse9"), std::string::npos) << e.what();
  }
  set_cpu_isa_cap(CpuIsa::scalar);
  EXPECT_EQ(cpu_isa(), CpuIsa::scalar);
  EXPECT_FALSE(cpu_has_avx2_fma());
  EXPECT_FALSE(cpu_has_avx512());
  EXPECT_FALSE(cpu_has_f16c());
  set_cpu_isa_cap(CpuIsa::avx512);
  EXPECT_EQ(cpu_isa(), cpu_isa_supported());
}

}  // namespace
}  // namespace galley::backends::cpu
