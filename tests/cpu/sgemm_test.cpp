// The GEMM behind cpu.conv.gemm_1x1 and cpu.conv.im2col_gemm: conv_blas's sgemm (Galley's packed
// AVX-512 kernel where the CPU has it, else OpenBLAS) and avx512::sgemm directly, against a
// double-precision product on random data. Sizes are chosen to cut through every block: m, n, k
// not multiples of the 6x64 tile or of the kMc/kNc/kKc blocks, leading dimensions wider than the
// matrix, every transpose, alpha and beta, and a poisoned C that beta == 0 must not read.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "backends/cpu/conv_blas.hpp"
#include "backends/cpu/conv_isa.hpp"
#include "backends/cpu/sgemm_avx512.hpp"
#include "random_floats.hpp"

namespace galley::backends::cpu {
namespace {

struct Case {
  std::int64_t m, n, k;
  bool ta, tb;
  float alpha, beta;
};

using galley::test::random_floats;

// Runs `gemm` on one case with padded leading dimensions and checks every element of C, and
// that the padding columns of C were left alone.
template <typename Gemm>
void check_case(const Case& t, Gemm gemm) {
  SCOPED_TRACE("m=" + std::to_string(t.m) + " n=" + std::to_string(t.n) + " k=" + std::to_string(t.k) +
               " ta=" + std::to_string(t.ta) + " tb=" + std::to_string(t.tb) + " alpha=" + std::to_string(t.alpha) +
               " beta=" + std::to_string(t.beta));
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
  gemm(t.ta, t.tb, t.m, t.n, t.k, t.alpha, a.data(), lda, b.data(), ldb, t.beta, c.data(), ldc);
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
  return out;
}

TEST(CpuSgemm, Avx512KernelMatchesDoubleProduct) {
  if (cpu_isa_supported() < CpuIsa::avx512) GTEST_SKIP() << "no AVX-512 on this CPU";
  std::vector<float> storage(static_cast<std::size_t>(avx512::kPackFloats + 16));
  const auto addr = reinterpret_cast<std::uintptr_t>(storage.data());
  float* pack = reinterpret_cast<float*>((addr + 63) & ~std::uintptr_t{63});
  for (const Case& t : cases()) {
    check_case(t, [&](bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
                      std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
      avx512::sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, pack);
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
                      std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
      std::vector<float> packed(static_cast<std::size_t>(avx512::packed_a_floats(m, k)), NAN);
      const std::int64_t split = (m / 2 + avx512::kMr - 1) / avx512::kMr * avx512::kMr;
      avx512::pack_a_rows(a, lda, m, k, split, m, packed.data());
      avx512::pack_a_rows(a, lda, m, k, 0, split, packed.data());
      avx512::sgemm_packed_a(m, n, k, alpha, packed.data(), b, ldb, beta, c, ldc, pack);
    });
  }
  // Taller A (B packed as well, several 96-row blocks) with a ragged column tail.
  for (const Case& t : {Case{151, 196, 600, false, false, 1.0f, 0.0f}, Case{298, 70, 257, false, false, 1.0f, 0.0f},
                        Case{200, 531, 300, false, false, 0.5f, 1.0f}}) {
    check_case(t, [&](bool, bool, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
                      std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
      std::vector<float> packed(static_cast<std::size_t>(avx512::packed_a_floats(m, k)), NAN);
      avx512::pack_a_rows(a, lda, m, k, 0, m, packed.data());
      avx512::sgemm_packed_a(m, n, k, alpha, packed.data(), b, ldb, beta, c, ldc, pack);
    });
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
    for (const Case& t : cases()) check_case(t, sgemm);
  }
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
