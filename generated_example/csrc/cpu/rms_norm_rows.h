// Row kernels shared by rms_norm and fused_add_rms_norm (user-owned).
//
// vLLM's arithmetic (RMSNorm.forward_native), reproduced step by step in
// float32 for every dtype:
//   s = 1 / sqrt(sum(x^2) / n + epsilon)        (float32 accumulation)
//   y = T(T(x * s) * w)                          (T: the tensor dtype)
// The two roundings to T are forward_native's `.to(orig_dtype)` and the
// product with weight in T; for float32 they are no-ops. With a residual, x is
// the float32 sum input + residual, unrounded: forward_native normalises it
// and stores only residual = T(x).
#pragma once

#include "kernel_utils.h"

#include <cmath>
#include <type_traits>
#include <vector>

namespace example {
namespace rmsnorm {

using kutil::from_f32;
using kutil::round_to;
using kutil::to_f32;

template <typename T>
inline float sumsq_scalar(const T* x, int64_t n) {
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  int64_t j = 0;
  for (; j + 4 <= n; j += 4)
    for (int k = 0; k < 4; ++k) {
      const float v = to_f32(x[j + k]);
      acc[k] += v * v;
    }
  for (; j < n; ++j) {
    const float v = to_f32(x[j]);
    acc[0] += v * v;
  }
  return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

// The sum of squares of the float32 sums x + r (unrounded).
template <typename T>
inline float sumsq_of_sum_scalar(const T* x, const T* r, int64_t n) {
  float acc = 0.f;
  for (int64_t j = 0; j < n; ++j) {
    const float z = to_f32(x[j]) + to_f32(r[j]);
    acc += z * z;
  }
  return acc;
}

// z = x + r in float32; r = T(z) and y = T(T(z * s) * w) (y may be x).
template <typename T>
inline void add_scale_row_scalar(const T* x, T* r, const T* w, T* y, int64_t n, float s) {
  for (int64_t j = 0; j < n; ++j) {
    const float z = to_f32(x[j]) + to_f32(r[j]);
    r[j] = from_f32<T>(z);
    y[j] = from_f32<T>(round_to<T>(z * s) * to_f32(w[j]));
  }
}

template <typename T>
inline void scale_row_scalar(const T* x, const T* w, T* y, int64_t n, float s) {
  for (int64_t j = 0; j < n; ++j)
    y[j] = from_f32<T>(round_to<T>(to_f32(x[j]) * s) * to_f32(w[j]));
}

inline float inv_rms(float sumsq, int64_t n, double epsilon) {
  return 1.0f / std::sqrt(sumsq / static_cast<float>(n) + static_cast<float>(epsilon));
}

#if EXAMPLE_X86
template <typename T>
EXAMPLE_AVX2 float sumsq_avx2(const T* x, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) {
    const __m256 v0 = kutil::load8(x + j), v1 = kutil::load8(x + j + 8);
    const __m256 v2 = kutil::load8(x + j + 16), v3 = kutil::load8(x + j + 24);
    a0 = _mm256_fmadd_ps(v0, v0, a0);
    a1 = _mm256_fmadd_ps(v1, v1, a1);
    a2 = _mm256_fmadd_ps(v2, v2, a2);
    a3 = _mm256_fmadd_ps(v3, v3, a3);
  }
  for (; j + 8 <= n; j += 8) {
    const __m256 v = kutil::load8(x + j);
    a0 = _mm256_fmadd_ps(v, v, a0);
  }
  if (j < n) {
    const __m256 v = kutil::load_n(x + j, n - j);
    a1 = _mm256_fmadd_ps(v, v, a1);
  }
  return kutil::hsum256_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
}

template <typename T>
EXAMPLE_AVX2 float sumsq_of_sum_avx2(const T* x, const T* r, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0;
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m256 z0 = _mm256_add_ps(kutil::load8(x + j), kutil::load8(r + j));
    const __m256 z1 = _mm256_add_ps(kutil::load8(x + j + 8), kutil::load8(r + j + 8));
    a0 = _mm256_fmadd_ps(z0, z0, a0);
    a1 = _mm256_fmadd_ps(z1, z1, a1);
  }
  for (; j + 8 <= n; j += 8) {
    const __m256 z = _mm256_add_ps(kutil::load8(x + j), kutil::load8(r + j));
    a0 = _mm256_fmadd_ps(z, z, a0);
  }
  if (j < n) {
    const __m256 z = _mm256_add_ps(kutil::load_n(x + j, n - j), kutil::load_n(r + j, n - j));
    a1 = _mm256_fmadd_ps(z, z, a1);  // the zero-filled lanes add nothing
  }
  return kutil::hsum256_ps(_mm256_add_ps(a0, a1));
}

template <typename T>
EXAMPLE_AVX2 void add_scale_row_avx2(const T* x, T* r, const T* w, T* y, int64_t n, float s) {
  const T* tag = nullptr;
  const __m256 vs = _mm256_set1_ps(s);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 z = _mm256_add_ps(kutil::load8(x + j), kutil::load8(r + j));
    kutil::store8(r + j, z);
    const __m256 t = kutil::round8(_mm256_mul_ps(z, vs), tag);
    kutil::store8(y + j, _mm256_mul_ps(t, kutil::load8(w + j)));
  }
  if (j < n) {
    const __m256 z = _mm256_add_ps(kutil::load_n(x + j, n - j), kutil::load_n(r + j, n - j));
    kutil::store_n(r + j, z, n - j);
    const __m256 t = kutil::round8(_mm256_mul_ps(z, vs), tag);
    kutil::store_n(y + j, _mm256_mul_ps(t, kutil::load_n(w + j, n - j)), n - j);
  }
}

template <typename T>
EXAMPLE_AVX2 void scale_row_avx2(const T* x, const T* w, T* y, int64_t n, float s) {
  const T* tag = nullptr;
  const __m256 vs = _mm256_set1_ps(s);
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m256 t0 = kutil::round8(_mm256_mul_ps(kutil::load8(x + j), vs), tag);
    const __m256 t1 = kutil::round8(_mm256_mul_ps(kutil::load8(x + j + 8), vs), tag);
    kutil::store8(y + j, _mm256_mul_ps(t0, kutil::load8(w + j)));
    kutil::store8(y + j + 8, _mm256_mul_ps(t1, kutil::load8(w + j + 8)));
  }
  for (; j + 8 <= n; j += 8) {
    const __m256 t = kutil::round8(_mm256_mul_ps(kutil::load8(x + j), vs), tag);
    kutil::store8(y + j, _mm256_mul_ps(t, kutil::load8(w + j)));
  }
  if (j < n) {
    const __m256 t = kutil::round8(_mm256_mul_ps(kutil::load_n(x + j, n - j), vs), tag);
    kutil::store_n(y + j, _mm256_mul_ps(t, kutil::load_n(w + j, n - j)), n - j);
  }
}

template <typename T>
EXAMPLE_AVX512 float sumsq_avx512(const T* x, int64_t n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t j = 0;
  for (; j + 64 <= n; j += 64) {
    const __m512 v0 = kutil::load16(x + j), v1 = kutil::load16(x + j + 16);
    const __m512 v2 = kutil::load16(x + j + 32), v3 = kutil::load16(x + j + 48);
    a0 = _mm512_fmadd_ps(v0, v0, a0);
    a1 = _mm512_fmadd_ps(v1, v1, a1);
    a2 = _mm512_fmadd_ps(v2, v2, a2);
    a3 = _mm512_fmadd_ps(v3, v3, a3);
  }
  for (; j + 16 <= n; j += 16) {
    const __m512 v = kutil::load16(x + j);
    a0 = _mm512_fmadd_ps(v, v, a0);
  }
  if (j < n) {
    const __m512 v = kutil::load16_n(x + j, n - j);
    a1 = _mm512_fmadd_ps(v, v, a1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

template <typename T>
EXAMPLE_AVX512 float add_sumsq_avx512(const T* x, T* r, int64_t n) {
  const T* tag = nullptr;
  __m512 a0 = _mm512_setzero_ps(), a1 = a0;
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) {
    const __m512 z0 =
        kutil::round16(_mm512_add_ps(kutil::load16(x + j), kutil::load16(r + j)), tag);
    const __m512 z1 =
        kutil::round16(_mm512_add_ps(kutil::load16(x + j + 16), kutil::load16(r + j + 16)), tag);
    kutil::store16(r + j, z0);
    kutil::store16(r + j + 16, z1);
    a0 = _mm512_fmadd_ps(z0, z0, a0);
    a1 = _mm512_fmadd_ps(z1, z1, a1);
  }
  for (; j + 16 <= n; j += 16) {
    const __m512 z = kutil::round16(_mm512_add_ps(kutil::load16(x + j), kutil::load16(r + j)), tag);
    kutil::store16(r + j, z);
    a0 = _mm512_fmadd_ps(z, z, a0);
  }
  if (j < n) {
    const __m512 z = kutil::round16(
        _mm512_add_ps(kutil::load16_n(x + j, n - j), kutil::load16_n(r + j, n - j)), tag);
    kutil::store16_n(r + j, z, n - j);
    a1 = _mm512_fmadd_ps(z, z, a1);  // the zero-filled lanes add nothing
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

// w: the weight in T, or (faster for float16 / bfloat16) already in float32.
// next, next2: rows the caller reads next (or nullptr), fetched into L2 while this
// row is written: the row loop otherwise waits for memory at each row's start.
template <typename T, typename W>
EXAMPLE_AVX512 void scale_row_avx512(const T* x, const W* w, T* y, int64_t n, float s,
                                     const T* next = nullptr, const T* next2 = nullptr) {
  const T* tag = nullptr;
  const __m512 vs = _mm512_set1_ps(s);
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) {
    for (const T* row : {next, next2}) {
      if (row == nullptr) continue;
      _mm_prefetch(reinterpret_cast<const char*>(row + j), _MM_HINT_T1);
      if constexpr (sizeof(T) == 4)
        _mm_prefetch(reinterpret_cast<const char*>(row + j + 16), _MM_HINT_T1);
    }
    const __m512 t0 = kutil::round16(_mm512_mul_ps(kutil::load16(x + j), vs), tag);
    const __m512 t1 = kutil::round16(_mm512_mul_ps(kutil::load16(x + j + 16), vs), tag);
    kutil::store32(y + j, _mm512_mul_ps(t0, kutil::load16(w + j)),
                   _mm512_mul_ps(t1, kutil::load16(w + j + 16)));
  }
  for (; j + 16 <= n; j += 16) {
    const __m512 t = kutil::round16(_mm512_mul_ps(kutil::load16(x + j), vs), tag);
    kutil::store16(y + j, _mm512_mul_ps(t, kutil::load16(w + j)));
  }
  if (j < n) {
    const __m512 t = kutil::round16(_mm512_mul_ps(kutil::load16_n(x + j, n - j), vs), tag);
    kutil::store16_n(y + j, _mm512_mul_ps(t, kutil::load16_n(w + j, n - j)), n - j);
  }
}

// The weight in float32 for the AVX-512 rows (read once per row otherwise, and
// converted each time); empty for float32, whose weight is used as it is.
template <typename T>
std::vector<float> float_weight(const T* w, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    return {};
  } else {
    std::vector<float> out(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) out[j] = to_f32(w[j]);
    return out;
  }
}
#endif  // EXAMPLE_X86

}  // namespace rmsnorm
}  // namespace example
