// Hand-written CPU kernel for example::matmul (user-owned): C = A (M x K) @ B (K x N).
//
// GotoBLAS-style blocking:
//   * B is packed once per call into NR-wide column slivers, one KC-deep
//     block after another (B_packed[kblock][sliver][k][NR], zero-padded);
//   * work is split into tasks = (block of rows of C) x (block of columns);
//     each task packs its MC x KC block of A into MR-row panels (zero-padded;
//     the AVX-512 panels through 16 x 16 register transposes) in a per-thread
//     buffer (L2) and, for every NR sliver of B (L1), runs the
//     register-blocked micro-kernel over every MR panel of A;
//   * micro-kernels (Note [Run-time ISA dispatch] in kernel_utils.h picks one):
//     AVX-512 float32: MR x NR = 14 x 32 (28 zmm accumulators, 2 B loads +
//       14 broadcasts + 28 FMA per k); products under ~160^3 skip the packing
//       and read A and B in place, in 8 x 32 tiles;
//     AVX2 FMA: 6 x 16 floats / 6 x 8 doubles (12 ymm accumulators, 2 B loads
//       + 6 broadcasts + 12 FMA per k);
//     scalar: the AVX2 blocking with a portable micro-kernel.
#include "../matmul.h"
#include "kernel_utils.h"

#include <cstdlib>
#include <memory>
#include <type_traits>

namespace example {
namespace {

using kutil::Tensor;

constexpr int64_t kMR = 6;  // AVX2 and scalar micro-tiles
template <typename T> struct NRof;
template <> struct NRof<float> { static constexpr int64_t value = 16; };
template <> struct NRof<double> { static constexpr int64_t value = 8; };
constexpr int64_t kMR512 = 14, kNR512 = 32;  // AVX-512 float32 micro-tile

constexpr int64_t kKC = 256;       // depth of a packed block
// Rows of A per task, about (rounded to the micro-tile): the packed block (rows x kKC) stays in
// L2, 288 KB for the AVX-512 tile (L2 of 1-2 MB on those cores), 144 KB for the others.
constexpr int64_t kMCrows512 = 288, kMCrows = 144;

// A micro-kernel: C[0:mr, 0:nr] (+)= Ap (kc x MR, packed) @ Bp (kc x NR, packed).
template <typename T>
using Ukernel = void (*)(int64_t kc, const T* Ap, const T* Bp, T* C, int64_t ldc, int64_t mr,
                         int64_t nr, bool accumulate);

// Per-thread scratch buffer that grows and is reused across calls (a fresh
// multi-MB malloc per call costs page faults comparable to the compute).
struct Scratch {
  void* p = nullptr;
  size_t cap = 0;
  ~Scratch() { std::free(p); }
  // Keep small buffers for reuse, give big ones back after the call.
  void trim(size_t keep_bytes) {
    if (cap > keep_bytes) {
      std::free(p);
      p = nullptr;
      cap = 0;
    }
  }
  template <typename T>
  T* get(size_t n) {
    const size_t bytes = ((n * sizeof(T) + 63) / 64) * 64;
    if (bytes > cap) {
      std::free(p);
      p = std::aligned_alloc(64, bytes);
      STD_TORCH_CHECK(p != nullptr, "example::matmul: out of memory allocating ", bytes,
                      " bytes of packing scratch");
      cap = bytes;
    }
    return static_cast<T*>(p);
  }
};
thread_local Scratch tl_bpack;
thread_local Scratch tl_apack;

// ---- packing ---------------------------------------------------------------
// B block [k0, k0+kc) x sliver j -> dst[k][NR] (zero-padded past N).
template <typename T, int64_t NR>
void pack_b_sliver(const T* B, int64_t ldb, int64_t N, int64_t k0, int64_t kc,
                   int64_t n0, T* dst) {
  const int64_t nv = std::min<int64_t>(NR, N - n0);
  if (nv == NR) {
    for (int64_t k = 0; k < kc; ++k) {
      const T* src = B + (k0 + k) * ldb + n0;
      for (int64_t c = 0; c < NR; ++c) dst[k * NR + c] = src[c];
    }
  } else {
    for (int64_t k = 0; k < kc; ++k) {
      const T* src = B + (k0 + k) * ldb + n0;
      int64_t c = 0;
      for (; c < nv; ++c) dst[k * NR + c] = src[c];
      for (; c < NR; ++c) dst[k * NR + c] = T(0);
    }
  }
}

// A rows [i0, i0+mr) x cols [k0, k0+kc) -> dst[k][MR] (zero-padded past mr).
template <typename T, int64_t MR>
void pack_a_panel(const T* A, int64_t lda, int64_t i0, int64_t mr, int64_t k0,
                  int64_t kc, T* dst) {
  if constexpr (MR != kMR) {
    if (mr == MR) {
      // Row by row: reading MR rows side by side would touch MR lines lda apart at once,
      // which share one L1 set when lda is a multiple of 4 KB (1024 floats).
      for (int64_t r = 0; r < MR; ++r) {
        const T* a = A + (i0 + r) * lda + k0;
        for (int64_t k = 0; k < kc; ++k) dst[k * MR + r] = a[k];
      }
      return;
    }
    for (int64_t k = 0; k < kc; ++k) {
      T* d = dst + k * MR;
      int64_t r = 0;
      for (; r < mr; ++r) d[r] = A[(i0 + r) * lda + k0 + k];
      for (; r < MR; ++r) d[r] = T(0);
    }
    return;
  }
  if (mr == kMR) {
    const T* a0 = A + (i0 + 0) * lda + k0;
    const T* a1 = A + (i0 + 1) * lda + k0;
    const T* a2 = A + (i0 + 2) * lda + k0;
    const T* a3 = A + (i0 + 3) * lda + k0;
    const T* a4 = A + (i0 + 4) * lda + k0;
    const T* a5 = A + (i0 + 5) * lda + k0;
    for (int64_t k = 0; k < kc; ++k) {
      T* d = dst + k * kMR;
      d[0] = a0[k]; d[1] = a1[k]; d[2] = a2[k];
      d[3] = a3[k]; d[4] = a4[k]; d[5] = a5[k];
    }
  } else {
    for (int64_t k = 0; k < kc; ++k) {
      T* d = dst + k * kMR;
      int64_t r = 0;
      for (; r < mr; ++r) d[r] = A[(i0 + r) * lda + k0 + k];
      for (; r < kMR; ++r) d[r] = T(0);
    }
  }
}

#if EXAMPLE_X86
// v[k][r] = v[r][k] for the 16 x 16 block held in v (row r: 16 consecutive k).
EXAMPLE_AVX512 inline void transpose16x16(__m512 v[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i) {
    v[4 * i + 0] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0x44);
    v[4 * i + 1] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0xEE);
    v[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    v[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_f32x4(v[i], v[4 + i], 0x88);
    t[4 + i] = _mm512_shuffle_f32x4(v[i], v[4 + i], 0xDD);
    t[8 + i] = _mm512_shuffle_f32x4(v[8 + i], v[12 + i], 0x88);
    t[12 + i] = _mm512_shuffle_f32x4(v[8 + i], v[12 + i], 0xDD);
  }
  for (int i = 0; i < 8; ++i) {
    v[i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0x88);
    v[8 + i] = _mm512_shuffle_f32x4(t[i], t[8 + i], 0xDD);
  }
}

// A full panel of the AVX-512 micro-kernel, 16 columns of A at a time through a register
// transpose: all the packing of a 1024^3 product took 1.42 ms with the element-by-element
// copy (7 % of the product), 0.82 ms with this.
EXAMPLE_AVX512 void pack_a_panel_avx512(const float* A, int64_t lda, int64_t i0, int64_t k0,
                                        int64_t kc, float* dst) {
  constexpr int MR = int(kMR512);
  const __mmask16 rows = (1u << MR) - 1;
  int64_t k = 0;
  for (; k + 16 <= kc; k += 16) {
    __m512 v[16];
    for (int r = 0; r < MR; ++r) v[r] = _mm512_loadu_ps(A + (i0 + r) * lda + k0 + k);
    for (int r = MR; r < 16; ++r) v[r] = _mm512_setzero_ps();
    transpose16x16(v);
    for (int j = 0; j < 16; ++j) _mm512_mask_storeu_ps(dst + (k + j) * MR, rows, v[j]);
  }
  for (; k < kc; ++k)
    for (int r = 0; r < MR; ++r) dst[k * MR + r] = A[(i0 + r) * lda + k0 + k];
}
#endif

// Write an MR x NR accumulator tile (row-major in `acc`) to C, handling partial
// tiles and first-block (store) vs later-block (accumulate).
template <typename T, int64_t NR>
inline void store_tile(const T* acc, T* C, int64_t ldc, int64_t mr, int64_t nr,
                       bool accumulate) {
  for (int64_t r = 0; r < mr; ++r) {
    T* c = C + r * ldc;
    const T* a = acc + r * NR;
    if (accumulate)
      for (int64_t j = 0; j < nr; ++j) c[j] += a[j];
    else
      for (int64_t j = 0; j < nr; ++j) c[j] = a[j];
  }
}

// ---- micro-kernels -----------------------------------------------------------
template <typename T, int64_t NR>
void ukernel_scalar(int64_t kc, const T* __restrict Ap, const T* __restrict Bp,
                    T* C, int64_t ldc, int64_t mr, int64_t nr, bool accumulate) {
  T acc[kMR * NR];
  for (int64_t i = 0; i < kMR * NR; ++i) acc[i] = T(0);
  for (int64_t k = 0; k < kc; ++k) {
    const T* a = Ap + k * kMR;
    const T* b = Bp + k * NR;
    for (int64_t r = 0; r < kMR; ++r)
      for (int64_t j = 0; j < NR; ++j) acc[r * NR + j] += a[r] * b[j];
  }
  store_tile<T, NR>(acc, C, ldc, mr, nr, accumulate);
}

#if EXAMPLE_X86
// MR x 32: MR rows of 2 zmm accumulators (MR = 14: 28 of the 32 registers).
template <int MR>
EXAMPLE_AVX512 void ukernel_avx512(int64_t kc, const float* __restrict Ap,
                                   const float* __restrict Bp, float* C, int64_t ldc,
                                   int64_t mr, int64_t nr, bool accumulate) {
  __m512 c0[MR], c1[MR];
#pragma GCC unroll 14
  for (int r = 0; r < MR; ++r) {
    c0[r] = c1[r] = _mm512_setzero_ps();
    // The tile's rows lie ldc apart, often in one L1 set: fetch them while the loop runs.
    _mm_prefetch(reinterpret_cast<const char*>(C + r * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(C + r * ldc + 16), _MM_HINT_T0);
  }
  for (int64_t k = 0; k < kc; ++k) {
    const __m512 b0 = _mm512_load_ps(Bp);
    const __m512 b1 = _mm512_load_ps(Bp + 16);
#pragma GCC unroll 14
    for (int r = 0; r < MR; ++r) {
      const __m512 a = _mm512_set1_ps(Ap[r]);
      c0[r] = _mm512_fmadd_ps(a, b0, c0[r]);
      c1[r] = _mm512_fmadd_ps(a, b1, c1[r]);
    }
    Ap += MR;
    Bp += kNR512;
  }
  // Columns [0, 16) and [16, 32) of a partial tile are masked; rows past mr are not written.
  const __mmask16 m0 = nr >= 16 ? __mmask16(0xFFFF) : kutil::tail_mask16(nr);
  const __mmask16 m1 = nr >= 32 ? __mmask16(0xFFFF) : kutil::tail_mask16(std::max<int64_t>(0, nr - 16));
#pragma GCC unroll 14
  for (int r = 0; r < MR; ++r) {
    if (r >= mr) break;
    float* c = C + r * ldc;
    if (accumulate) {
      c0[r] = _mm512_add_ps(c0[r], _mm512_maskz_loadu_ps(m0, c));
      c1[r] = _mm512_add_ps(c1[r], _mm512_maskz_loadu_ps(m1, c + 16));
    }
    _mm512_mask_storeu_ps(c, m0, c0[r]);
    _mm512_mask_storeu_ps(c + 16, m1, c1[r]);
  }
}

// The same tile read straight from A and B (no packing): for small products, where
// packing costs as much as the math. Rows past mr re-read the last valid row (their
// results are not stored); columns past nr are masked off. A tile of full width loads B
// without masks (`Full`): with masked loads a 128^3 product took 15 % longer (27.5 against
// 23.9 us on one thread).
template <int MR, bool Full>
EXAMPLE_AVX512 void ukernel_avx512_direct(int64_t K, const float* A, int64_t lda, const float* B,
                                          int64_t ldb, float* C, int64_t ldc, int64_t mr,
                                          int64_t nr) {
  const __mmask16 m0 = nr >= 16 ? __mmask16(0xFFFF) : kutil::tail_mask16(nr);
  const __mmask16 m1 = nr >= 32 ? __mmask16(0xFFFF) : kutil::tail_mask16(std::max<int64_t>(0, nr - 16));
  const float* a[MR];
#pragma GCC unroll 14
  for (int r = 0; r < MR; ++r) a[r] = A + std::min<int64_t>(r, mr - 1) * lda;
  __m512 c0[MR], c1[MR];
#pragma GCC unroll 14
  for (int r = 0; r < MR; ++r) c0[r] = c1[r] = _mm512_setzero_ps();
  for (int64_t k = 0; k < K; ++k) {
    const __m512 b0 = Full ? _mm512_loadu_ps(B + k * ldb) : _mm512_maskz_loadu_ps(m0, B + k * ldb);
    const __m512 b1 =
        Full ? _mm512_loadu_ps(B + k * ldb + 16) : _mm512_maskz_loadu_ps(m1, B + k * ldb + 16);
#pragma GCC unroll 14
    for (int r = 0; r < MR; ++r) {
      const __m512 av = _mm512_set1_ps(a[r][k]);
      c0[r] = _mm512_fmadd_ps(av, b0, c0[r]);
      c1[r] = _mm512_fmadd_ps(av, b1, c1[r]);
    }
  }
#pragma GCC unroll 14
  for (int r = 0; r < MR; ++r) {
    if (r >= mr) break;
    _mm512_mask_storeu_ps(C + r * ldc, m0, c0[r]);
    _mm512_mask_storeu_ps(C + r * ldc + 16, m1, c1[r]);
  }
}

EXAMPLE_AVX2 void ukernel_avx2(int64_t kc, const float* __restrict Ap,
                               const float* __restrict Bp, float* C, int64_t ldc,
                               int64_t mr, int64_t nr, bool accumulate) {
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00,
         c21 = c00, c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_load_ps(Bp);
    const __m256 b1 = _mm256_load_ps(Bp + 8);
    __m256 a;
    a = _mm256_broadcast_ss(Ap + 0);
    c00 = _mm256_fmadd_ps(a, b0, c00); c01 = _mm256_fmadd_ps(a, b1, c01);
    a = _mm256_broadcast_ss(Ap + 1);
    c10 = _mm256_fmadd_ps(a, b0, c10); c11 = _mm256_fmadd_ps(a, b1, c11);
    a = _mm256_broadcast_ss(Ap + 2);
    c20 = _mm256_fmadd_ps(a, b0, c20); c21 = _mm256_fmadd_ps(a, b1, c21);
    a = _mm256_broadcast_ss(Ap + 3);
    c30 = _mm256_fmadd_ps(a, b0, c30); c31 = _mm256_fmadd_ps(a, b1, c31);
    a = _mm256_broadcast_ss(Ap + 4);
    c40 = _mm256_fmadd_ps(a, b0, c40); c41 = _mm256_fmadd_ps(a, b1, c41);
    a = _mm256_broadcast_ss(Ap + 5);
    c50 = _mm256_fmadd_ps(a, b0, c50); c51 = _mm256_fmadd_ps(a, b1, c51);
    Ap += kMR;
    Bp += 16;
  }
  if (mr == kMR && nr == 16) {
#define EX_ROW(r, v0, v1)                                                    \
  {                                                                          \
    float* c = C + (r) * ldc;                                                \
    if (accumulate) {                                                        \
      v0 = _mm256_add_ps(v0, _mm256_loadu_ps(c));                            \
      v1 = _mm256_add_ps(v1, _mm256_loadu_ps(c + 8));                        \
    }                                                                        \
    _mm256_storeu_ps(c, v0);                                                 \
    _mm256_storeu_ps(c + 8, v1);                                             \
  }
    EX_ROW(0, c00, c01) EX_ROW(1, c10, c11) EX_ROW(2, c20, c21)
    EX_ROW(3, c30, c31) EX_ROW(4, c40, c41) EX_ROW(5, c50, c51)
#undef EX_ROW
  } else {
    alignas(32) float acc[kMR * 16];
    _mm256_store_ps(acc + 0, c00);  _mm256_store_ps(acc + 8, c01);
    _mm256_store_ps(acc + 16, c10); _mm256_store_ps(acc + 24, c11);
    _mm256_store_ps(acc + 32, c20); _mm256_store_ps(acc + 40, c21);
    _mm256_store_ps(acc + 48, c30); _mm256_store_ps(acc + 56, c31);
    _mm256_store_ps(acc + 64, c40); _mm256_store_ps(acc + 72, c41);
    _mm256_store_ps(acc + 80, c50); _mm256_store_ps(acc + 88, c51);
    store_tile<float, 16>(acc, C, ldc, mr, nr, accumulate);
  }
}

EXAMPLE_AVX2 void ukernel_avx2(int64_t kc, const double* __restrict Ap,
                               const double* __restrict Bp, double* C, int64_t ldc,
                               int64_t mr, int64_t nr, bool accumulate) {
  __m256d c00 = _mm256_setzero_pd(), c01 = c00, c10 = c00, c11 = c00, c20 = c00,
          c21 = c00, c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  for (int64_t k = 0; k < kc; ++k) {
    const __m256d b0 = _mm256_load_pd(Bp);
    const __m256d b1 = _mm256_load_pd(Bp + 4);
    __m256d a;
    a = _mm256_broadcast_sd(Ap + 0);
    c00 = _mm256_fmadd_pd(a, b0, c00); c01 = _mm256_fmadd_pd(a, b1, c01);
    a = _mm256_broadcast_sd(Ap + 1);
    c10 = _mm256_fmadd_pd(a, b0, c10); c11 = _mm256_fmadd_pd(a, b1, c11);
    a = _mm256_broadcast_sd(Ap + 2);
    c20 = _mm256_fmadd_pd(a, b0, c20); c21 = _mm256_fmadd_pd(a, b1, c21);
    a = _mm256_broadcast_sd(Ap + 3);
    c30 = _mm256_fmadd_pd(a, b0, c30); c31 = _mm256_fmadd_pd(a, b1, c31);
    a = _mm256_broadcast_sd(Ap + 4);
    c40 = _mm256_fmadd_pd(a, b0, c40); c41 = _mm256_fmadd_pd(a, b1, c41);
    a = _mm256_broadcast_sd(Ap + 5);
    c50 = _mm256_fmadd_pd(a, b0, c50); c51 = _mm256_fmadd_pd(a, b1, c51);
    Ap += kMR;
    Bp += 8;
  }
  if (mr == kMR && nr == 8) {
#define EX_ROW(r, v0, v1)                                                    \
  {                                                                          \
    double* c = C + (r) * ldc;                                               \
    if (accumulate) {                                                        \
      v0 = _mm256_add_pd(v0, _mm256_loadu_pd(c));                            \
      v1 = _mm256_add_pd(v1, _mm256_loadu_pd(c + 4));                        \
    }                                                                        \
    _mm256_storeu_pd(c, v0);                                                 \
    _mm256_storeu_pd(c + 4, v1);                                             \
  }
    EX_ROW(0, c00, c01) EX_ROW(1, c10, c11) EX_ROW(2, c20, c21)
    EX_ROW(3, c30, c31) EX_ROW(4, c40, c41) EX_ROW(5, c50, c51)
#undef EX_ROW
  } else {
    alignas(32) double acc[kMR * 8];
    _mm256_store_pd(acc + 0, c00);  _mm256_store_pd(acc + 4, c01);
    _mm256_store_pd(acc + 8, c10);  _mm256_store_pd(acc + 12, c11);
    _mm256_store_pd(acc + 16, c20); _mm256_store_pd(acc + 20, c21);
    _mm256_store_pd(acc + 24, c30); _mm256_store_pd(acc + 28, c31);
    _mm256_store_pd(acc + 32, c40); _mm256_store_pd(acc + 36, c41);
    _mm256_store_pd(acc + 40, c50); _mm256_store_pd(acc + 44, c51);
    store_tile<double, 8>(acc, C, ldc, mr, nr, accumulate);
  }
}
#endif

// ---- matrix-vector shapes (packing would cost more than the math) ----------
// N == 1: c[i] = dot(A[i, :], b)
template <typename T>
void dot_rows_scalar(const T* A, const T* b, T* c, int64_t i0, int64_t i1, int64_t K) {
  for (int64_t i = i0; i < i1; ++i) {
    const T* a = A + i * K;
    T s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int64_t k = 0;
    for (; k + 4 <= K; k += 4) {
      s0 += a[k] * b[k]; s1 += a[k + 1] * b[k + 1];
      s2 += a[k + 2] * b[k + 2]; s3 += a[k + 3] * b[k + 3];
    }
    for (; k < K; ++k) s0 += a[k] * b[k];
    c[i] = (s0 + s1) + (s2 + s3);
  }
}
// M == 1: c[n0:n1] = sum_k a[k] * B[k, n0:n1]
template <typename T>
void axpy_rows_scalar(const T* a, const T* B, T* c, int64_t n0, int64_t n1, int64_t K,
                      int64_t N) {
  for (int64_t n = n0; n < n1; ++n) c[n] = T(0);
  for (int64_t k = 0; k < K; ++k) {
    const T ak = a[k];
    const T* b = B + k * N;
    for (int64_t n = n0; n < n1; ++n) c[n] += ak * b[n];
  }
}

#if EXAMPLE_X86
EXAMPLE_AVX2 void dot_rows_avx2(const float* A, const float* b, float* c, int64_t i0,
                                int64_t i1, int64_t K) {
  for (int64_t i = i0; i < i1; ++i) {
    const float* a = A + i * K;
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t k = 0;
    for (; k + 32 <= K; k += 32) {
      s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), s0);
      s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 8), _mm256_loadu_ps(b + k + 8), s1);
      s2 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 16), _mm256_loadu_ps(b + k + 16), s2);
      s3 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 24), _mm256_loadu_ps(b + k + 24), s3);
    }
    for (; k + 8 <= K; k += 8)
      s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), s0);
    float s = kutil::hsum256_ps(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; k < K; ++k) s += a[k] * b[k];
    c[i] = s;
  }
}
EXAMPLE_AVX2 void dot_rows_avx2(const double* A, const double* b, double* c, int64_t i0,
                                int64_t i1, int64_t K) {
  for (int64_t i = i0; i < i1; ++i) {
    const double* a = A + i * K;
    __m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
    int64_t k = 0;
    for (; k + 16 <= K; k += 16) {
      s0 = _mm256_fmadd_pd(_mm256_loadu_pd(a + k), _mm256_loadu_pd(b + k), s0);
      s1 = _mm256_fmadd_pd(_mm256_loadu_pd(a + k + 4), _mm256_loadu_pd(b + k + 4), s1);
      s2 = _mm256_fmadd_pd(_mm256_loadu_pd(a + k + 8), _mm256_loadu_pd(b + k + 8), s2);
      s3 = _mm256_fmadd_pd(_mm256_loadu_pd(a + k + 12), _mm256_loadu_pd(b + k + 12), s3);
    }
    for (; k + 4 <= K; k += 4)
      s0 = _mm256_fmadd_pd(_mm256_loadu_pd(a + k), _mm256_loadu_pd(b + k), s0);
    double s = kutil::hsum256_pd(_mm256_add_pd(_mm256_add_pd(s0, s1), _mm256_add_pd(s2, s3)));
    for (; k < K; ++k) s += a[k] * b[k];
    c[i] = s;
  }
}
EXAMPLE_AVX2 void axpy_rows_avx2(const float* a, const float* B, float* c, int64_t n0,
                                 int64_t n1, int64_t K, int64_t N) {
  const int64_t n8 = n0 + ((n1 - n0) & ~int64_t(7));
  for (int64_t n = n0; n < n1; ++n) c[n] = 0.0f;
  for (int64_t k = 0; k < K; ++k) {
    const __m256 ak = _mm256_set1_ps(a[k]);
    const float* b = B + k * N;
    int64_t n = n0;
    for (; n < n8; n += 8)
      _mm256_storeu_ps(c + n, _mm256_fmadd_ps(ak, _mm256_loadu_ps(b + n), _mm256_loadu_ps(c + n)));
    for (; n < n1; ++n) c[n] += a[k] * b[n];
  }
}
EXAMPLE_AVX2 void axpy_rows_avx2(const double* a, const double* B, double* c, int64_t n0,
                                 int64_t n1, int64_t K, int64_t N) {
  const int64_t n4 = n0 + ((n1 - n0) & ~int64_t(3));
  for (int64_t n = n0; n < n1; ++n) c[n] = 0.0;
  for (int64_t k = 0; k < K; ++k) {
    const __m256d ak = _mm256_set1_pd(a[k]);
    const double* b = B + k * N;
    int64_t n = n0;
    for (; n < n4; n += 4)
      _mm256_storeu_pd(c + n, _mm256_fmadd_pd(ak, _mm256_loadu_pd(b + n), _mm256_loadu_pd(c + n)));
    for (; n < n1; ++n) c[n] += a[k] * b[n];
  }
}
#endif

template <typename T>
void gemv_impl(const T* A, const T* B, T* C, int64_t M, int64_t N, int64_t K) {
  const bool simd = kutil::cpu_has_avx2_fma();
  if (N == 1) {
    torch::stable::parallel_for(0, M, std::max<int64_t>(1, 16384 / K), [&](int64_t i0, int64_t i1) {
#if EXAMPLE_X86
      if (simd) return dot_rows_avx2(A, B, C, i0, i1, K);
#endif
      dot_rows_scalar(A, B, C, i0, i1, K);
    });
  } else {  // M == 1: column chunks of 512 (the C chunk stays in L1)
    constexpr int64_t kChunk = 512;
    const int64_t nchunks = (N + kChunk - 1) / kChunk;
    torch::stable::parallel_for(0, nchunks, std::max<int64_t>(1, 16384 / (K * kChunk)),
                                [&](int64_t c0, int64_t c1) {
      for (int64_t ch = c0; ch < c1; ++ch) {
        const int64_t n0 = ch * kChunk, n1 = std::min(N, n0 + kChunk);
#if EXAMPLE_X86
        if (simd) {
          axpy_rows_avx2(A, B, C, n0, n1, K, N);
          continue;
        }
#endif
        axpy_rows_scalar(A, B, C, n0, n1, K, N);
      }
    });
  }
}

// ---- driver --------------------------------------------------------------------
// C = A @ B with MR x NR micro-tiles computed by `uk`.
template <typename T, int64_t MR, int64_t NR>
void gemm_packed(const T* A, const T* B, T* C, int64_t M, int64_t N, int64_t K, Ukernel<T> uk) {
  const int64_t nthreads = std::max<int64_t>(1, torch::stable::get_num_threads());

  // K blocks of (nearly) equal depth <= kKC.
  const int64_t nkb = (K + kKC - 1) / kKC;
  const int64_t nsl = (N + NR - 1) / NR;  // B slivers
  const int64_t Npad = nsl * NR;

  // Pack all of B: block starting at k0 occupies [k0*Npad, (k0+kc)*Npad).
  T* Bp = tl_bpack.get<T>(size_t(K) * Npad);
  torch::stable::parallel_for(0, nsl, std::max<int64_t>(1, 4096 / std::max<int64_t>(K, 1)),
                              [&](int64_t s0, int64_t s1) {
    for (int64_t kb = 0; kb < nkb; ++kb) {
      const int64_t k0 = K * kb / nkb, k1 = K * (kb + 1) / nkb, kc = k1 - k0;
      for (int64_t s = s0; s < s1; ++s)
        pack_b_sliver<T, NR>(B, N, N, k0, kc, s * NR, Bp + k0 * Npad + s * kc * NR);
    }
  });

  // Task grid: row blocks (boundaries on MR multiples, sizes differ by <= MR)
  // x column blocks (only split when there are too few row blocks).
  // Rows first: a column block repacks its row block of A, a row block packs only its own.
  const int64_t npanels = (M + MR - 1) / MR;
  const int64_t mc_panels = std::max<int64_t>(1, (MR == kMR512 ? kMCrows512 : kMCrows) / MR);
  int64_t mb = std::max<int64_t>(1, (npanels + mc_panels - 1) / mc_panels);
  mb = std::min(npanels, ((mb + nthreads - 1) / nthreads) * nthreads);
  int64_t nb = 1;
  if (mb < nthreads) nb = std::min<int64_t>(nsl, (nthreads + mb - 1) / mb);
  const int64_t ntasks = mb * nb;
  const int64_t flops_per_task = 2 * M * N * K / std::max<int64_t>(ntasks, 1);
  const int64_t grain = flops_per_task >= (int64_t(1) << 17) ? 1 : ntasks;

  torch::stable::parallel_for(0, ntasks, grain, [&](int64_t t0, int64_t t1) {
    const int64_t max_panels = (npanels + mb - 1) / mb + 1;
    T* Ap = tl_apack.get<T>(size_t(max_panels) * MR * std::min(K, kKC + 1));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t ib = t / nb, jb = t % nb;
      const int64_t i0 = (npanels * ib / mb) * MR;
      const int64_t i1 = std::min(M, (npanels * (ib + 1) / mb) * MR);
      const int64_t s0 = nsl * jb / nb, s1 = nsl * (jb + 1) / nb;
      for (int64_t kb = 0; kb < nkb; ++kb) {
        const int64_t k0 = K * kb / nkb, k1 = K * (kb + 1) / nkb, kc = k1 - k0;
        // pack A[i0:i1, k0:k1]
        int64_t np = 0;
        for (int64_t i = i0; i < i1; i += MR, ++np) {
          T* panel = Ap + np * kc * MR;
#if EXAMPLE_X86
          if constexpr (MR == kMR512) {  // only the AVX-512 kernel has this height
            if (i1 - i >= MR) {
              pack_a_panel_avx512(A, K, i, k0, kc, panel);
              continue;
            }
          }
#endif
          pack_a_panel<T, MR>(A, K, i, std::min(MR, i1 - i), k0, kc, panel);
        }
        for (int64_t s = s0; s < s1; ++s) {
          const T* bs = Bp + k0 * Npad + s * kc * NR;
          const int64_t n0 = s * NR, nr = std::min(NR, N - n0);
          for (int64_t p = 0; p < np; ++p) {
            const int64_t i = i0 + p * MR, mr = std::min(MR, i1 - i);
            uk(kc, Ap + p * kc * MR, bs, C + i * N + n0, N, mr, nr, kb > 0);
          }
        }
      }
    }
  });
  tl_bpack.trim(size_t(64) << 20);
}

#if EXAMPLE_X86
// Products up to this many multiply-adds (about 160^3) skip packing, in 8 x 32 tiles
// (8 divides the usual sizes, so no row of a tile is wasted).
constexpr int64_t kDirectMax = int64_t(1) << 22;
constexpr int kDirectMR = 8;

template <int DMR>
void gemm_direct_avx512(const float* A, const float* B, float* C, int64_t M, int64_t N,
                        int64_t K) {
  const int64_t npanels = (M + DMR - 1) / DMR;
  const int64_t nsl = (N + kNR512 - 1) / kNR512;
  // Tasks of at least ~1M multiply-adds: below that a second thread costs more than it saves.
  const int64_t tile = DMR * kNR512 * K;
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 20) / std::max<int64_t>(tile, 1));
  torch::stable::parallel_for(0, npanels * nsl, grain, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t i = (t / nsl) * DMR, n0 = (t % nsl) * kNR512;
      const int64_t mr = std::min<int64_t>(DMR, M - i), nr = std::min(kNR512, N - n0);
      const float* a = A + i * K;
      if (nr == kNR512)
        ukernel_avx512_direct<DMR, true>(K, a, K, B + n0, N, C + i * N + n0, N, mr, nr);
      else
        ukernel_avx512_direct<DMR, false>(K, a, K, B + n0, N, C + i * N + n0, N, mr, nr);
    }
  });
}
#endif

template <typename T>
void matmul_impl(const T* A, const T* B, T* C, int64_t M, int64_t N, int64_t K) {
  if (N == 1 || M == 1) return gemv_impl(A, B, C, M, N, K);
  constexpr int64_t NR = NRof<T>::value;
#if EXAMPLE_X86
  if constexpr (std::is_same_v<T, float>) {
    if (kutil::cpu_has_avx512()) {
      if (M * N * K <= kDirectMax) return gemm_direct_avx512<kDirectMR>(A, B, C, M, N, K);
      return gemm_packed<float, kMR512, kNR512>(A, B, C, M, N, K, ukernel_avx512<int(kMR512)>);
    }
  }
  if (kutil::cpu_has_avx2_fma()) {
    Ukernel<T> uk = ukernel_avx2;
    return gemm_packed<T, kMR, NR>(A, B, C, M, N, K, uk);
  }
#endif
  gemm_packed<T, kMR, NR>(A, B, C, M, N, K, ukernel_scalar<T, NR>);
}

}  // namespace

torch::stable::Tensor matmul_cpu(const torch::stable::Tensor& a_,
                                 const torch::stable::Tensor& b_) {
  constexpr const char* op = "example::matmul";
  kutil::check_cpu(a_, op, "a");
  kutil::check_cpu(b_, op, "b");
  kutil::check_float_dtype(a_, op, "a");
  kutil::check_same_dtype(a_, b_, op, "a", "b");
  STD_TORCH_CHECK(a_.dim() == 2 && b_.dim() == 2, op,
                  ": expected 2-D tensors, got a.dim()=", a_.dim(), " and b.dim()=", b_.dim());
  const int64_t M = a_.size(0), K = a_.size(1), N = b_.size(1);
  STD_TORCH_CHECK(b_.size(0) == K, op, ": shape mismatch: a is (", M, ", ", K,
                  ") but b is (", b_.size(0), ", ", N, ")");
  const Tensor a = kutil::contig(a_);
  const Tensor b = kutil::contig(b_);
  const int64_t out_sizes[2] = {M, N};
  Tensor c = torch::stable::new_empty(a, torch::headeronly::IntHeaderOnlyArrayRef(out_sizes, 2));
  if (M == 0 || N == 0) return c;
  if (K == 0) return torch::stable::zero_(c);
  if (a.scalar_type() == kutil::ScalarType::Float) {
    matmul_impl(a.const_data_ptr<float>(), b.const_data_ptr<float>(),
                c.mutable_data_ptr<float>(), M, N, K);
  } else {
    matmul_impl(a.const_data_ptr<double>(), b.const_data_ptr<double>(),
                c.mutable_data_ptr<double>(), M, N, K);
  }
  return c;
}

}  // namespace example
