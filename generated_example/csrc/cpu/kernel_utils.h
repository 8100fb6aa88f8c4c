// Shared helpers for the hand-written CPU kernels (user-owned, not generated).
//
// - argument checks with clear messages (device, dtype, shape)
// - run-time CPU feature detection (AVX2 + FMA) so one binary runs on any
//   x86-64: AVX2 code lives in functions marked EXAMPLE_AVX2 and is only
//   called when cpu_has_avx2_fma() is true; every kernel has a scalar twin.
// - AVX2 exp() for float/double (used by gelu / gelu_backward).
#pragma once

#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define EXAMPLE_X86 1
#define EXAMPLE_AVX2 __attribute__((target("avx2,fma")))
#else
#define EXAMPLE_X86 0
#define EXAMPLE_AVX2
#endif

namespace example {
namespace kutil {

using torch::headeronly::ScalarType;
using torch::stable::Tensor;

// Elements per parallel_for task for memory-bound elementwise kernels: below
// ~64K elements the fork/join costs more than it saves.
constexpr int64_t kElementwiseGrain = 1 << 16;

inline bool cpu_has_avx2_fma() {
#if EXAMPLE_X86 && !defined(EXAMPLE_FORCE_SCALAR)  // -DEXAMPLE_FORCE_SCALAR: test the fallback
  static const bool ok =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return ok;
#else
  return false;
#endif
}

inline void check_cpu(const Tensor& t, const char* op, const char* name) {
  STD_TORCH_CHECK(
      t.is_cpu(), op, ": expected '", name, "' to be a CPU tensor");
}

inline bool is_float_or_double(ScalarType st) {
  return st == ScalarType::Float || st == ScalarType::Double;
}

inline void check_float_dtype(const Tensor& t, const char* op, const char* name) {
  const ScalarType st = t.scalar_type();
  STD_TORCH_CHECK(
      is_float_or_double(st),
      op, ": unsupported dtype ", torch::headeronly::toString(st),
      " for '", name, "'; supported dtypes are Float (float32) and Double (float64)");
}

inline void check_same_dtype(
    const Tensor& a, const Tensor& b, const char* op, const char* na, const char* nb) {
  STD_TORCH_CHECK(
      a.scalar_type() == b.scalar_type(),
      op, ": expected '", na, "' and '", nb, "' to have the same dtype, got ",
      torch::headeronly::toString(a.scalar_type()), " and ",
      torch::headeronly::toString(b.scalar_type()));
}

inline bool same_sizes(const Tensor& a, const Tensor& b) {
  const auto sa = a.sizes();
  const auto sb = b.sizes();
  if (sa.size() != sb.size()) return false;
  for (size_t i = 0; i < sa.size(); ++i)
    if (sa[i] != sb[i]) return false;
  return true;
}

inline void check_same_sizes(
    const Tensor& a, const Tensor& b, const char* op, const char* na, const char* nb) {
  STD_TORCH_CHECK(
      same_sizes(a, b), op, ": expected '", na, "' and '", nb,
      "' to have the same shape (dims ", a.dim(), " vs ", b.dim(),
      ", numel ", a.numel(), " vs ", b.numel(), ")");
}

// Contiguous view of t (no copy when already contiguous).
inline Tensor contig(const Tensor& t) {
  return t.is_contiguous() ? t : torch::stable::contiguous(t);
}

// Fresh, contiguous, uninitialised tensor with t's sizes/dtype/device.
inline Tensor empty_contig_like(const Tensor& t) {
  return torch::stable::new_empty(t, t.sizes());
}

// Common checks for binary elementwise float ops (device, dtype, shape).
inline void check_binary_elementwise(
    const Tensor& a, const Tensor& b, const char* op) {
  check_cpu(a, op, "a");
  check_cpu(b, op, "b");
  check_float_dtype(a, op, "a");
  check_same_dtype(a, b, op, "a", "b");
  check_same_sizes(a, b, op, "a", "b");
}

#if EXAMPLE_X86
// ---------------------------------------------------------------------------
// AVX2 exp. Cephes-style: x = n*ln2 + r, |r| <= ln2/2, exp(r) by polynomial,
// 2^n by exponent-field arithmetic. Inputs are clamped so the result is finite
// below the underflow limit (flushes to ~0) and +inf above the overflow limit
// (as std::exp); NaN in -> NaN out. ~1 ulp for float, ~2 ulp for double.
// ---------------------------------------------------------------------------
EXAMPLE_AVX2 inline __m256 exp256_ps(__m256 x) {
  const __m256 hi = _mm256_set1_ps(88.3762626647949f);
  const __m256 lo = _mm256_set1_ps(-87.3365447504f);
  const __m256 overflow = _mm256_cmp_ps(x, hi, _CMP_GT_OQ);
  const __m256 isnan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  x = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
  const __m256 log2e = _mm256_set1_ps(1.44269504088896341f);
  __m256 n = _mm256_round_ps(
      _mm256_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // r = x - n*ln2 (ln2 split in two for precision)
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500E-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507E-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073E-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894E-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459E-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201E-1f));
  const __m256 r2 = _mm256_mul_ps(r, r);
  p = _mm256_fmadd_ps(p, r2, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // 2^n: n in [-127, 128]; split so each factor is a normal float.
  __m256i ni = _mm256_cvtps_epi32(n);
  __m256i n1 = _mm256_srai_epi32(ni, 1);
  __m256i n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  __m256 res = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
  res = _mm256_blendv_ps(res, _mm256_set1_ps(__builtin_inff()), overflow);
  return _mm256_blendv_ps(res, _mm256_set1_ps(__builtin_nanf("")), isnan);
}

EXAMPLE_AVX2 inline __m256d exp256_pd(__m256d x) {
  const __m256d hi = _mm256_set1_pd(709.0);
  const __m256d lo = _mm256_set1_pd(-708.0);
  const __m256d overflow = _mm256_cmp_pd(x, hi, _CMP_GT_OQ);
  const __m256d isnan = _mm256_cmp_pd(x, x, _CMP_UNORD_Q);
  x = _mm256_min_pd(_mm256_max_pd(x, lo), hi);
  __m256d n = _mm256_round_pd(
      _mm256_mul_pd(x, _mm256_set1_pd(1.4426950408889634)),
      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256d r = _mm256_fnmadd_pd(n, _mm256_set1_pd(6.93145751953125e-1), x);
  r = _mm256_fnmadd_pd(n, _mm256_set1_pd(1.42860682030941723212e-6), r);
  // Taylor series to degree 13 (|r| <= 0.347: truncation < 1e-17).
  __m256d p = _mm256_set1_pd(1.0 / 6227020800.0);
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 479001600.0));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 39916800.0));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 3628800.0));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 362880.0));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 40320.0));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 5040.0));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 720.0));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 120.0));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 24.0));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 6.0));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(0.5));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0));
  // 2^n, n in [-1022, 1023]
  __m128i n32 = _mm256_cvtpd_epi32(n);
  __m256i n64 = _mm256_cvtepi32_epi64(n32);
  __m256i e = _mm256_slli_epi64(_mm256_add_epi64(n64, _mm256_set1_epi64x(1023)), 52);
  __m256d res = _mm256_mul_pd(p, _mm256_castsi256_pd(e));
  res = _mm256_blendv_pd(res, _mm256_set1_pd(__builtin_inf()), overflow);
  return _mm256_blendv_pd(res, _mm256_set1_pd(__builtin_nan("")), isnan);
}

EXAMPLE_AVX2 inline float hsum256_ps(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

EXAMPLE_AVX2 inline double hsum256_pd(__m256d v) {
  __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  s = _mm_add_sd(s, _mm_unpackhi_pd(s, s));
  return _mm_cvtsd_f64(s);
}

// Mask for the first `rem` (0..7) lanes of a float vector / (0..3) of double.
EXAMPLE_AVX2 inline __m256i tail_mask_ps(int64_t rem) {
  alignas(32) static const int32_t m[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                            0,  0,  0,  0,  0,  0,  0,  0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(m + 8 - rem));
}
EXAMPLE_AVX2 inline __m256i tail_mask_pd(int64_t rem) {
  alignas(32) static const int64_t m[8] = {-1, -1, -1, -1, 0, 0, 0, 0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(m + 4 - rem));
}
#endif  // EXAMPLE_X86

}  // namespace kutil
}  // namespace example
