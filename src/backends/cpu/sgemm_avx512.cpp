// The packed AVX-512 SGEMM (see sgemm_avx512.hpp for the blocking). Compiled with AVX-512
// F/BW/VL/DQ; entered only after cpu_has_avx512(). Nothing here instantiates a standard-library
// template: an out-of-line copy compiled with AVX-512 could be the one the linker keeps for
// every other caller in libgalley.
#include "backends/cpu/sgemm_avx512.hpp"

#include <immintrin.h>

#include "backends/cpu/avx512_lanes.hpp"
#include "backends/cpu/avx512_post_ops.hpp"

namespace galley::backends::cpu::avx512 {
namespace {

constexpr std::int64_t kVectors = kNr / 16;

// A[rows x depth] (op applied) from row r0, column p0 into kMr-high panels, each laid out
// depth-major (kMr consecutive floats per step of k); rows past `rows` are zero.
void pack_a(bool trans, const float* a, std::int64_t lda, std::int64_t r0, std::int64_t rows, std::int64_t p0,
            std::int64_t depth, float* out) {
  for (std::int64_t i0 = 0; i0 < rows; i0 += kMr) {
    const std::int64_t h = min64(kMr, rows - i0);
    float* panel = out + i0 * depth;
    if (!trans) {
      const float* src[kMr];
      for (std::int64_t i = 0; i < kMr; ++i) src[i] = a + (r0 + i0 + (i < h ? i : 0)) * lda + p0;
      if (h == kMr) {
        for (std::int64_t p = 0; p < depth; ++p) {
#pragma GCC unroll 6
          for (std::int64_t i = 0; i < kMr; ++i) panel[p * kMr + i] = src[i][p];
        }
      } else {
        for (std::int64_t p = 0; p < depth; ++p) {
          for (std::int64_t i = 0; i < kMr; ++i) panel[p * kMr + i] = i < h ? src[i][p] : 0.0f;
        }
      }
    } else {
      for (std::int64_t p = 0; p < depth; ++p) {
        const float* src = a + (p0 + p) * lda + r0 + i0;
        for (std::int64_t i = 0; i < kMr; ++i) panel[p * kMr + i] = i < h ? src[i] : 0.0f;
      }
    }
  }
}

// B[depth x cols] (op applied) from row p0, column c0 into kNr-wide panels, each depth-major
// (kNr consecutive floats per step of k); columns past `cols` are zero.
void pack_b(bool trans, const float* b, std::int64_t ldb, std::int64_t p0, std::int64_t depth,
            std::int64_t c0, std::int64_t cols, float* out) {
  for (std::int64_t j0 = 0; j0 < cols; j0 += kNr) {
    const std::int64_t w = min64(kNr, cols - j0);
    float* panel = out + j0 * depth;
    if (!trans) {
      const float* src = b + p0 * ldb + c0 + j0;
      if (w == kNr) {
        for (std::int64_t p = 0; p < depth; ++p, src += ldb) {
#pragma GCC unroll 4
          for (std::int64_t v = 0; v < kVectors; ++v) {
            _mm512_store_ps(panel + p * kNr + 16 * v, _mm512_loadu_ps(src + 16 * v));
          }
        }
      } else {
        __mmask16 mask[kVectors];
        for (std::int64_t v = 0; v < kVectors; ++v) mask[v] = lanes(w - 16 * v);
        for (std::int64_t p = 0; p < depth; ++p, src += ldb) {
#pragma GCC unroll 4
          for (std::int64_t v = 0; v < kVectors; ++v) {
            // A masked-off lane is never read, so columns past the matrix are safe.
            _mm512_store_ps(panel + p * kNr + 16 * v, _mm512_maskz_loadu_ps(mask[v], src + 16 * v));
          }
        }
      }
    } else {
      // op(B)[p][j] = b[j * ldb + p]: one source row per panel column.
      for (std::int64_t j = 0; j < kNr; ++j) {
        if (j < w) {
          const float* src = b + (c0 + j0 + j) * ldb + p0;
          for (std::int64_t p = 0; p < depth; ++p) panel[p * kNr + j] = src[p];
        } else {
          for (std::int64_t p = 0; p < depth; ++p) panel[p * kNr + j] = 0.0f;
        }
      }
    }
  }
}

// C[rows x cols] (rows <= kPanels * kMr, cols <= 16 * kNv) = alpha * A * Bpanel + beta * C, A being
// kPanels consecutive packed panels. A narrow column tail (kNv 1 or 2) takes several A panels at
// once so that it still holds 24 accumulators: fewer would leave the FMA units waiting on their
// own latency.
//
// kDirectA (one panel only): A is read in place, row i at ap + i * lda, instead of from a packed
// panel; a_rows rows must all exist.
//
// `post` (null: none) is applied before the store; the tile's element (0, 0) is element (row0,
// col0) of the whole C, which is what post's pointers address.
template <int kNv, int kPanels, bool kDirectA = false>
void micro_kernel(std::int64_t depth, const float* __restrict ap, const float* __restrict bp,
                  std::int64_t b_step, float* c, std::int64_t ldc, std::int64_t rows, __mmask16 last,
                  float alpha, float beta, const PostOps* post, std::int64_t row0, std::int64_t col0,
                  std::int64_t lda = 0) {
  static_assert(!kDirectA || kPanels == 1, "A is read in place for one panel only");
  constexpr int kRows = kPanels * static_cast<int>(kMr);
  const std::int64_t panel_step = kMr * depth;  // floats between consecutive A panels
  __m512 acc[kRows][kNv];
#pragma GCC unroll 24
  for (int i = 0; i < kRows; ++i) {
#pragma GCC unroll 4
    for (int v = 0; v < kNv; ++v) acc[i][v] = _mm512_setzero_ps();
  }
  if (post != nullptr && post->residual != nullptr) {
    // The residual tile is read only at the store, once: fetched now, it arrives while the FMAs
    // run instead of stalling the store on a miss per row.
    for (std::int64_t i = 0; i < rows; ++i) {
      const char* res = reinterpret_cast<const char*>(post->residual + (row0 + i) * post->ld_residual + col0);
#pragma GCC unroll 4
      for (int v = 0; v < kNv; ++v) _mm_prefetch(res + 64 * v, _MM_HINT_T0);
    }
  }
#pragma GCC unroll 2
  for (std::int64_t p = 0; p < depth; ++p) {
    __m512 bv[kNv];
#pragma GCC unroll 4
    for (int v = 0; v < kNv; ++v) {
      // The last vector is masked: B read in place may end there (a packed panel has zeros).
      bv[v] = v == kNv - 1 ? _mm512_maskz_loadu_ps(last, bp + 16 * v) : _mm512_loadu_ps(bp + 16 * v);
    }
#pragma GCC unroll 24
    for (int i = 0; i < kRows; ++i) {
      const __m512 av = _mm512_set1_ps(kDirectA ? ap[i * lda] : ap[(i / kMr) * panel_step + i % kMr]);
#pragma GCC unroll 4
      for (int v = 0; v < kNv; ++v) acc[i][v] = _mm512_fmadd_ps(av, bv[v], acc[i][v]);
    }
    ap += kDirectA ? 1 : kMr;
    bp += b_step;
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 24
  for (int i = 0; i < kRows; ++i) {
    if (i >= rows) break;
    float* ci = c + i * ldc;
    __m512 r[kNv];
#pragma GCC unroll 4
    for (int v = 0; v < kNv; ++v) {
      const __mmask16 m = v == kNv - 1 ? last : static_cast<__mmask16>(0xffff);
      r[v] = _mm512_mul_ps(va, acc[i][v]);
      if (beta != 0.0f) r[v] = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m, ci + 16 * v), r[v]);
    }
    if (post != nullptr) apply_post<kNv>(*post, row0 + i, col0, r, last);
#pragma GCC unroll 4
    for (int v = 0; v < kNv; ++v) {
      _mm512_mask_storeu_ps(ci + 16 * v, v == kNv - 1 ? last : static_cast<__mmask16>(0xffff), r[v]);
    }
  }
}

// One column of C beside a direct kernel's tile: c[i] (rows `rows`, ldc apart) = alpha * A[i, :]
// . b + beta * c[i], then the post-ops at (row0 + i, col0), A's rows read in place (lda apart) and
// b (`depth` floats) contiguous. A panel of 49 columns (a 7x7 plane) would otherwise take a whole
// fourth vector of 16 lanes per step of k for its last column, a quarter of the FMAs for 1/49 of
// the work; here each row is one dot product over 16 steps of k at a time, on rows of A the tile
// has just brought into L1.
void column_dots(std::int64_t depth, const float* a, std::int64_t lda, const float* b, float* c,
                 std::int64_t ldc, std::int64_t rows, float alpha, float beta, const PostOps* post,
                 std::int64_t row0, std::int64_t col0) {
  __m512 acc[kMr];
#pragma GCC unroll 6
  for (int i = 0; i < kMr; ++i) acc[i] = _mm512_setzero_ps();
  for (std::int64_t p = 0; p < depth; p += 16) {
    const __mmask16 m = lanes(depth - p);
    const __m512 bv = _mm512_maskz_loadu_ps(m, b + p);
#pragma GCC unroll 6
    for (int i = 0; i < kMr; ++i) {
      if (i < rows) acc[i] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i * lda + p), bv, acc[i]);
    }
  }
  const __mmask16 one = lanes(1);
  for (std::int64_t i = 0; i < rows; ++i) {
    // The 16 lanes summed pairwise through memory (see row_times_transposed).
    alignas(64) float lane[16];
    _mm512_store_ps(lane, acc[i]);
    for (int width = 8; width > 0; width /= 2) {
      for (int l = 0; l < width; ++l) lane[l] += lane[l + width];
    }
    float* ci = c + i * ldc;
    __m512 r[1] = {_mm512_mul_ps(_mm512_set1_ps(alpha), _mm512_set1_ps(lane[0]))};
    if (beta != 0.0f) r[0] = _mm512_fmadd_ps(_mm512_set1_ps(beta), _mm512_maskz_loadu_ps(one, ci), r[0]);
    if (post != nullptr) apply_post<1>(*post, row0 + i, col0, r, one);
    _mm512_mask_storeu_ps(ci, one, r[0]);
  }
}

// The column panel at jr (cols wide) against A rows [ir, mc) of the packed block, taking as many
// A panels per call as the panel's width allows.
template <int kNv, int kPanels>
void panel_column(std::int64_t kc, const float* a_pack, std::int64_t ir, std::int64_t mc, const float* bp,
                  std::int64_t b_step, float* c, std::int64_t ldc, std::int64_t ic, std::int64_t jc,
                  std::int64_t jr, __mmask16 last, float alpha, float beta, const PostOps* post) {
  for (; ir < mc; ir += kPanels * kMr) {
    const std::int64_t rows = min64(kPanels * kMr, mc - ir);
    micro_kernel<kNv, kPanels>(kc, a_pack + ir * kc, bp, b_step, c + (ic + ir) * ldc + jc + jr, ldc, rows,
                               last, alpha, beta, post, ic + ir, jc + jr);
  }
}

// C = beta * C, then the post-ops: the whole product when it is empty (k == 0 or alpha == 0).
void scale_rows(std::int64_t m, std::int64_t n, float beta, float* c, std::int64_t ldc, const PostOps* post) {
  const __m512 vb = _mm512_set1_ps(beta);
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; j += 16) {
      const __mmask16 mask = lanes(n - j);
      __m512 r[1] = {beta == 0.0f ? _mm512_setzero_ps()
                                  : _mm512_mul_ps(vb, _mm512_maskz_loadu_ps(mask, c + i * ldc + j))};
      if (post != nullptr) apply_post<1>(*post, i, j, r, mask);
      _mm512_mask_storeu_ps(c + i * ldc + j, mask, r[0]);
    }
  }
}

// The blocked product behind sgemm() and sgemm_packed_a(). With `a_whole` (an A of `whole_rows`
// rows packed by pack_a_rows(), of which this product takes rows [first_row, first_row + m)) A is
// neither packed nor read in place: block (pc, ic) is at a_whole + pc * round_up(whole_rows, kMr) +
// (first_row + ic) * kc, and `pack` needs only the B block.
void gemm_blocked(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                  const float* a, std::int64_t lda, const float* a_whole, std::int64_t whole_rows,
                  std::int64_t first_row, const float* b, std::int64_t ldb, float beta, float* c,
                  std::int64_t ldc, float* pack, const PostOps* post) {
  if (m <= 0 || n <= 0) return;
  if (k <= 0 || alpha == 0.0f) {
    scale_rows(m, n, beta, c, ldc, post);
    return;
  }
  const std::int64_t m_panels = (whole_rows + kMr - 1) / kMr * kMr;
  float* a_pack = pack;
  float* b_pack = a_whole != nullptr ? pack : pack + kMc * kKc;
  // A plain B is read in place (rows ldb apart) when A has at most 128 rows: each B panel then
  // serves at most 22 A panels and the packing copy costs more than it saves; with more rows the
  // packed, contiguous panels win.
  const bool b_in_place = !trans_b && m <= 128;
  // Column 48 of the current B panel, contiguous over k, for column_dots(); `last_for` is the
  // panel it was copied from.
  alignas(64) float last_column[kKc];
  const float* last_for = nullptr;
  for (std::int64_t jc = 0; jc < n; jc += kNc) {
    const std::int64_t nc = min64(kNc, n - jc);
    for (std::int64_t pc = 0; pc < k; pc += kKc) {
      const std::int64_t kc = min64(kKc, k - pc);
      const float beta_now = pc == 0 ? beta : 1.0f;             // later slices add to what the first wrote
      const PostOps* post_now = pc + kc == k ? post : nullptr;  // on the finished sums only
      // Panel jr of this block starts at b_at + jr * b_col and steps b_step floats per k.
      const float* b_at = b_in_place ? b + pc * ldb + jc : b_pack;
      const std::int64_t b_step = b_in_place ? ldb : kNr, b_col = b_in_place ? 1 : kc;
      if (!b_in_place) pack_b(trans_b, b, ldb, pc, kc, jc, nc, b_pack);
      last_for = nullptr;  // a packed block reuses the buffer's addresses
      for (std::int64_t ic = 0; ic < m; ic += kMc) {
        const std::int64_t mc = min64(kMc, m - ic);
        // Panels of 48-64 columns: one A panel in L1 swept across them. A narrower last panel
        // (a ragged N) is done after, several A panels at a time.
        const std::int64_t wide_end = nc - nc % kNr + (nc % kNr > 32 ? nc % kNr : 0);
        // With one or two column panels each A panel would be packed for one or two kernel
        // calls (a quarter of the time of a 512x98x4608 product): full panels of a plain A are
        // then read in place, only a ragged last one packed.
        const bool a_in_place = a_whole == nullptr && !trans_a && wide_end == nc && nc <= 2 * kNr;
        if (a_whole == nullptr && !a_in_place) pack_a(trans_a, a, lda, ic, mc, pc, kc, a_pack);
        const float* a_block = a_whole != nullptr ? a_whole + pc * m_panels + (first_row + ic) * kc : a_pack;
        for (std::int64_t ir = 0; ir < mc; ir += kMr) {
          const std::int64_t rows = min64(kMr, mc - ir);
          const bool direct = a_in_place && rows == kMr;
          const float* ap = a_block + ir * kc;
          if (direct) {
            ap = a + (ic + ir) * lda + pc;
          } else if (a_in_place) {
            pack_a(trans_a, a, lda, ic + ir, rows, pc, kc, a_pack);
            ap = a_pack;
          }
          float* c_row = c + (ic + ir) * ldc + jc;
          const std::int64_t row0 = ic + ir;
          for (std::int64_t jr = 0; jr < wide_end; jr += kNr) {
            const std::int64_t cols = min64(kNr, nc - jr);
            const float* bp = b_at + jr * b_col;
            if (direct && cols == 49) {
              // 48 columns in three vectors, the 49th as dot products over k (column_dots).
              if (last_for != bp) {
                for (std::int64_t p = 0; p < kc; ++p) last_column[p] = bp[p * b_step + 48];
                last_for = bp;
              }
              micro_kernel<3, 1, true>(kc, ap, bp, b_step, c_row + jr, ldc, rows, 0xffff, alpha, beta_now,
                                       post_now, row0, jc + jr, lda);
              column_dots(kc, ap, lda, last_column, c_row + jr + 48, ldc, rows, alpha, beta_now, post_now,
                          row0, jc + jr + 48);
            } else if (direct && cols > 48) {
              micro_kernel<4, 1, true>(kc, ap, bp, b_step, c_row + jr, ldc, rows, lanes(cols - 48), alpha,
                                       beta_now, post_now, row0, jc + jr, lda);
            } else if (direct) {
              micro_kernel<3, 1, true>(kc, ap, bp, b_step, c_row + jr, ldc, rows, lanes(cols - 32), alpha,
                                       beta_now, post_now, row0, jc + jr, lda);
            } else if (cols > 48) {
              micro_kernel<4, 1>(kc, ap, bp, b_step, c_row + jr, ldc, rows, lanes(cols - 48), alpha, beta_now,
                                 post_now, row0, jc + jr);
            } else {
              micro_kernel<3, 1>(kc, ap, bp, b_step, c_row + jr, ldc, rows, lanes(cols - 32), alpha, beta_now,
                                 post_now, row0, jc + jr);
            }
          }
        }
        if (wide_end < nc) {
          const std::int64_t cols = nc - wide_end;
          const float* bp = b_at + wide_end * b_col;
          if (cols > 16) {
            panel_column<2, 2>(kc, a_block, 0, mc, bp, b_step, c, ldc, ic, jc, wide_end, lanes(cols - 16),
                               alpha, beta_now, post_now);
          } else {
            panel_column<1, 4>(kc, a_block, 0, mc, bp, b_step, c, ldc, ic, jc, wide_end, lanes(cols), alpha,
                               beta_now, post_now);
          }
        }
      }
    }
  }
}

// C[1 x n] = alpha * a[1 x k] * B^T + beta * C with B given as n rows of k (a fully connected
// layer at batch 1): four dot products at a time over contiguous rows of B. The blocked path would
// pack B column by column, one float per store, which costs several times the product itself.
void row_times_transposed(std::int64_t n, std::int64_t k, float alpha, const float* a, const float* b,
                          std::int64_t ldb, float beta, float* c) {
  std::int64_t j = 0;
  const auto finish = [&](std::int64_t col, __m512 acc) {
    // The 16 lanes summed pairwise through memory, once per column: GCC 12 warns of an undefined
    // operand inside _mm512_reduce_add_ps and the lane shuffles.
    alignas(64) float lane[16];
    _mm512_store_ps(lane, acc);
    for (int width = 8; width > 0; width /= 2) {
      for (int i = 0; i < width; ++i) lane[i] += lane[i + width];
    }
    const float dot = alpha * lane[0];
    c[col] = beta == 0.0f ? dot : dot + beta * c[col];
  };
  for (; j + 4 <= n; j += 4) {
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (std::int64_t p = 0; p < k; p += 16) {
      const __mmask16 m = lanes(k - p);
      const __m512 av = _mm512_maskz_loadu_ps(m, a + p);
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {
        acc[i] = _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(m, b + (j + i) * ldb + p), acc[i]);
      }
    }
    for (int i = 0; i < 4; ++i) finish(j + i, acc[i]);
  }
  for (; j < n; ++j) {
    __m512 acc = _mm512_setzero_ps();
    for (std::int64_t p = 0; p < k; p += 16) {
      const __mmask16 m = lanes(k - p);
      acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + p), _mm512_maskz_loadu_ps(m, b + j * ldb + p), acc);
    }
    finish(j, acc);
  }
}

}  // namespace

void sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
           const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c,
           std::int64_t ldc, float* pack, const PostOps* post) {
  if (m == 1 && !trans_a && trans_b && k > 0 && alpha != 0.0f) {
    row_times_transposed(n, k, alpha, a, b, ldb, beta, c);
    if (post != nullptr) scale_rows(1, n, 1.0f, c, ldc, post);  // beta 1: each element as it is
    return;
  }
  gemm_blocked(trans_a, trans_b, m, n, k, alpha, a, lda, nullptr, m, 0, b, ldb, beta, c, ldc, pack, post);
}

// beta 1 keeps each element as it is (NaN and -0 included) before the post-ops.
void apply_post_ops(std::int64_t m, std::int64_t n, float* c, std::int64_t ldc, const PostOps& post) {
  scale_rows(m, n, 1.0f, c, ldc, &post);
}

// A narrow column tail takes up to 4 A panels per kernel call (panel_column<1, 4>), so the last
// block may read up to 3 panels past the rows: they exist, zero, and their products are dropped.
constexpr std::int64_t kPackedASlack = 3 * kMr * kKc;

std::int64_t packed_a_floats(std::int64_t m, std::int64_t k) {
  return (m + kMr - 1) / kMr * kMr * k + kPackedASlack;
}

void pack_a_rows(const float* a, std::int64_t lda, std::int64_t m, std::int64_t k, std::int64_t r0,
                 std::int64_t r1, float* out) {
  const std::int64_t m_panels = (m + kMr - 1) / kMr * kMr;
  r1 = min64(r1, m);
  if (r0 >= r1) return;
  for (std::int64_t pc = 0; pc < k; pc += kKc) {
    const std::int64_t kc = min64(kKc, k - pc);
    pack_a(false, a, lda, r0, r1 - r0, pc, kc, out + pc * m_panels + r0 * kc);
  }
  if (r1 == m) {
    float* slack = out + m_panels * k;
    for (std::int64_t i = 0; i < kPackedASlack; ++i) slack[i] = 0.0f;
  }
}

void sgemm_packed_a(std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a_packed,
                    const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc, float* pack,
                    const PostOps* post) {
  gemm_blocked(false, false, m, n, k, alpha, nullptr, 0, a_packed, m, 0, b, ldb, beta, c, ldc, pack, post);
}

void sgemm_packed_a_rows(std::int64_t whole_rows, std::int64_t r0, std::int64_t m, std::int64_t n,
                         std::int64_t k, float alpha, const float* a_packed, const float* b, std::int64_t ldb,
                         float beta, float* c, std::int64_t ldc, float* pack, const PostOps* post) {
  gemm_blocked(false, false, m, n, k, alpha, nullptr, 0, a_packed, whole_rows, r0, b, ldb, beta, c, ldc, pack,
               post);
}

}  // namespace galley::backends::cpu::avx512
