// Hand-written CPU kernel for example::layer_norm (user-owned).
// Normalises over the last dimension: y = (x - mean) * rstd * weight + bias,
// rstd = 1 / sqrt(var + eps) with the biased variance (as F.layer_norm).
//
// One row (N elements) at a time: mean and variance in two passes (the second
// pass reads the row from L1, and the centred sum of squares has no
// cancellation), then a third pass writes y. Rows are split across threads.
#include "../layer_norm.h"
#include "kernel_utils.h"

#include <cmath>
#include <type_traits>

namespace example {
namespace {

using kutil::Tensor;

template <typename T>
void ln_rows_scalar(const T* x, const T* w, const T* b, T* y, int64_t r0,
                    int64_t r1, int64_t N, T eps) {
  for (int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * N;
    T* yr = y + r * N;
    T s = 0;
    for (int64_t j = 0; j < N; ++j) s += xr[j];
    const T mean = s / T(N);
    T v = 0;
    for (int64_t j = 0; j < N; ++j) {
      const T d = xr[j] - mean;
      v += d * d;
    }
    const T rstd = T(1) / std::sqrt(v / T(N) + eps);
    for (int64_t j = 0; j < N; ++j) yr[j] = (xr[j] - mean) * rstd * w[j] + b[j];
  }
}

#if EXAMPLE_X86
EXAMPLE_AVX512 void ln_rows_avx512(const float* x, const float* w, const float* b, float* y,
                                   int64_t r0, int64_t r1, int64_t N, float eps) {
  const int64_t N16 = N & ~int64_t(15);
  const int64_t N64 = N & ~int64_t(63);
  const __mmask16 tail = kutil::tail_mask16(N - N16);
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * N;
    float* yr = y + r * N;
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t j = 0;
    for (; j < N64; j += 64) {
      s0 = _mm512_add_ps(s0, _mm512_loadu_ps(xr + j));
      s1 = _mm512_add_ps(s1, _mm512_loadu_ps(xr + j + 16));
      s2 = _mm512_add_ps(s2, _mm512_loadu_ps(xr + j + 32));
      s3 = _mm512_add_ps(s3, _mm512_loadu_ps(xr + j + 48));
    }
    for (; j < N16; j += 16) s0 = _mm512_add_ps(s0, _mm512_loadu_ps(xr + j));
    s1 = _mm512_add_ps(s1, _mm512_maskz_loadu_ps(tail, xr + j));
    const float mean =
        _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3))) /
        float(N);
    const __m512 vm = _mm512_set1_ps(mean);
    s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (j = 0; j < N64; j += 64) {
      const __m512 d0 = _mm512_sub_ps(_mm512_loadu_ps(xr + j), vm);
      const __m512 d1 = _mm512_sub_ps(_mm512_loadu_ps(xr + j + 16), vm);
      const __m512 d2 = _mm512_sub_ps(_mm512_loadu_ps(xr + j + 32), vm);
      const __m512 d3 = _mm512_sub_ps(_mm512_loadu_ps(xr + j + 48), vm);
      s0 = _mm512_fmadd_ps(d0, d0, s0);
      s1 = _mm512_fmadd_ps(d1, d1, s1);
      s2 = _mm512_fmadd_ps(d2, d2, s2);
      s3 = _mm512_fmadd_ps(d3, d3, s3);
    }
    for (; j < N16; j += 16) {
      const __m512 d0 = _mm512_sub_ps(_mm512_loadu_ps(xr + j), vm);
      s0 = _mm512_fmadd_ps(d0, d0, s0);
    }
    const __m512 dt = _mm512_maskz_sub_ps(tail, _mm512_maskz_loadu_ps(tail, xr + j), vm);
    s1 = _mm512_fmadd_ps(dt, dt, s1);
    const float v =
        _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
    const __m512 vr = _mm512_set1_ps(1.0f / std::sqrt(v / float(N) + eps));
    // While this row is written, the next one comes into L2 (rows start otherwise
    // waiting for memory).
    const char* next = r + 1 < r1 ? reinterpret_cast<const char*>(xr + N) : nullptr;
    for (j = 0; j < N16; j += 16) {
      if (next != nullptr) _mm_prefetch(next + 4 * j, _MM_HINT_T1);
      const __m512 xh = _mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(xr + j), vm), vr);
      _mm512_storeu_ps(yr + j,
                       _mm512_fmadd_ps(xh, _mm512_loadu_ps(w + j), _mm512_loadu_ps(b + j)));
    }
    if (j < N) {
      const __m512 xh = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, xr + j), vm), vr);
      _mm512_mask_storeu_ps(yr + j, tail, _mm512_fmadd_ps(xh, _mm512_maskz_loadu_ps(tail, w + j),
                                                          _mm512_maskz_loadu_ps(tail, b + j)));
    }
  }
}

EXAMPLE_AVX2 void ln_rows_avx2(const float* x, const float* w, const float* b,
                               float* y, int64_t r0, int64_t r1, int64_t N,
                               float eps) {
  const int64_t N8 = N & ~int64_t(7);
  const int64_t N32 = N & ~int64_t(31);
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * N;
    float* yr = y + r * N;
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    int64_t j = 0;
    for (; j < N32; j += 32) {
      s0 = _mm256_add_ps(s0, _mm256_loadu_ps(xr + j));
      s1 = _mm256_add_ps(s1, _mm256_loadu_ps(xr + j + 8));
      s2 = _mm256_add_ps(s2, _mm256_loadu_ps(xr + j + 16));
      s3 = _mm256_add_ps(s3, _mm256_loadu_ps(xr + j + 24));
    }
    for (; j < N8; j += 8) s0 = _mm256_add_ps(s0, _mm256_loadu_ps(xr + j));
    float s = kutil::hsum256_ps(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; j < N; ++j) s += xr[j];
    const float mean = s / float(N);
    const __m256 vm = _mm256_set1_ps(mean);
    s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    for (j = 0; j < N32; j += 32) {
      __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(xr + j), vm);
      __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(xr + j + 8), vm);
      __m256 d2 = _mm256_sub_ps(_mm256_loadu_ps(xr + j + 16), vm);
      __m256 d3 = _mm256_sub_ps(_mm256_loadu_ps(xr + j + 24), vm);
      s0 = _mm256_fmadd_ps(d0, d0, s0);
      s1 = _mm256_fmadd_ps(d1, d1, s1);
      s2 = _mm256_fmadd_ps(d2, d2, s2);
      s3 = _mm256_fmadd_ps(d3, d3, s3);
    }
    for (; j < N8; j += 8) {
      __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(xr + j), vm);
      s0 = _mm256_fmadd_ps(d0, d0, s0);
    }
    float v = kutil::hsum256_ps(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    for (; j < N; ++j) v += (xr[j] - mean) * (xr[j] - mean);
    const float rstd = 1.0f / std::sqrt(v / float(N) + eps);
    const __m256 vr = _mm256_set1_ps(rstd);
    for (j = 0; j < N8; j += 8) {
      const __m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(xr + j), vm), vr);
      _mm256_storeu_ps(yr + j, _mm256_fmadd_ps(xh, _mm256_loadu_ps(w + j), _mm256_loadu_ps(b + j)));
    }
    for (; j < N; ++j) yr[j] = (xr[j] - mean) * rstd * w[j] + b[j];
  }
}

EXAMPLE_AVX2 void ln_rows_avx2(const double* x, const double* w, const double* b,
                               double* y, int64_t r0, int64_t r1, int64_t N,
                               double eps) {
  const int64_t N4 = N & ~int64_t(3);
  const int64_t N16 = N & ~int64_t(15);
  for (int64_t r = r0; r < r1; ++r) {
    const double* xr = x + r * N;
    double* yr = y + r * N;
    __m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
    int64_t j = 0;
    for (; j < N16; j += 16) {
      s0 = _mm256_add_pd(s0, _mm256_loadu_pd(xr + j));
      s1 = _mm256_add_pd(s1, _mm256_loadu_pd(xr + j + 4));
      s2 = _mm256_add_pd(s2, _mm256_loadu_pd(xr + j + 8));
      s3 = _mm256_add_pd(s3, _mm256_loadu_pd(xr + j + 12));
    }
    for (; j < N4; j += 4) s0 = _mm256_add_pd(s0, _mm256_loadu_pd(xr + j));
    double s = kutil::hsum256_pd(_mm256_add_pd(_mm256_add_pd(s0, s1), _mm256_add_pd(s2, s3)));
    for (; j < N; ++j) s += xr[j];
    const double mean = s / double(N);
    const __m256d vm = _mm256_set1_pd(mean);
    s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
    for (j = 0; j < N16; j += 16) {
      __m256d d0 = _mm256_sub_pd(_mm256_loadu_pd(xr + j), vm);
      __m256d d1 = _mm256_sub_pd(_mm256_loadu_pd(xr + j + 4), vm);
      __m256d d2 = _mm256_sub_pd(_mm256_loadu_pd(xr + j + 8), vm);
      __m256d d3 = _mm256_sub_pd(_mm256_loadu_pd(xr + j + 12), vm);
      s0 = _mm256_fmadd_pd(d0, d0, s0);
      s1 = _mm256_fmadd_pd(d1, d1, s1);
      s2 = _mm256_fmadd_pd(d2, d2, s2);
      s3 = _mm256_fmadd_pd(d3, d3, s3);
    }
    for (; j < N4; j += 4) {
      __m256d d0 = _mm256_sub_pd(_mm256_loadu_pd(xr + j), vm);
      s0 = _mm256_fmadd_pd(d0, d0, s0);
    }
    double v = kutil::hsum256_pd(_mm256_add_pd(_mm256_add_pd(s0, s1), _mm256_add_pd(s2, s3)));
    for (; j < N; ++j) v += (xr[j] - mean) * (xr[j] - mean);
    const double rstd = 1.0 / std::sqrt(v / double(N) + eps);
    const __m256d vr = _mm256_set1_pd(rstd);
    for (j = 0; j < N4; j += 4) {
      const __m256d xh = _mm256_mul_pd(_mm256_sub_pd(_mm256_loadu_pd(xr + j), vm), vr);
      _mm256_storeu_pd(yr + j, _mm256_fmadd_pd(xh, _mm256_loadu_pd(w + j), _mm256_loadu_pd(b + j)));
    }
    for (; j < N; ++j) yr[j] = (xr[j] - mean) * rstd * w[j] + b[j];
  }
}
#endif

template <typename T>
void ln_impl(const T* x, const T* w, const T* b, T* y, int64_t rows, int64_t N,
             double eps) {
  const bool simd = kutil::cpu_has_avx2_fma();
  const bool wide = std::is_same_v<T, float> && kutil::cpu_has_avx512();
  // ~32K elements of work per task at least.
  const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 15) / N);
  torch::stable::parallel_for(0, rows, grain, [&](int64_t r0, int64_t r1) {
#if EXAMPLE_X86
    if constexpr (std::is_same_v<T, float>) {
      if (wide) {
        ln_rows_avx512(x, w, b, y, r0, r1, N, T(eps));
        return;
      }
    }
    if (simd) {
      ln_rows_avx2(x, w, b, y, r0, r1, N, T(eps));
      return;
    }
#endif
    ln_rows_scalar(x, w, b, y, r0, r1, N, T(eps));
  });
}

}  // namespace

torch::stable::Tensor layer_norm_cpu(const torch::stable::Tensor& x_,
                                     const torch::stable::Tensor& weight_,
                                     const torch::stable::Tensor& bias_,
                                     double eps) {
  constexpr const char* op = "example::layer_norm";
  kutil::check_cpu(x_, op, "x");
  kutil::check_cpu(weight_, op, "weight");
  kutil::check_cpu(bias_, op, "bias");
  kutil::check_float_dtype(x_, op, "x");
  kutil::check_same_dtype(x_, weight_, op, "x", "weight");
  kutil::check_same_dtype(x_, bias_, op, "x", "bias");
  STD_TORCH_CHECK(x_.dim() >= 1, op, ": expected 'x' to have at least 1 dimension");
  const int64_t N = x_.size(x_.dim() - 1);
  STD_TORCH_CHECK(weight_.dim() == 1 && weight_.size(0) == N, op,
                  ": expected 'weight' of shape (", N, ",) (the last dim of x)");
  STD_TORCH_CHECK(bias_.dim() == 1 && bias_.size(0) == N, op,
                  ": expected 'bias' of shape (", N, ",) (the last dim of x)");
  STD_TORCH_CHECK(eps >= 0, op, ": expected eps >= 0, got ", eps);
  const Tensor x = kutil::contig(x_);
  const Tensor w = kutil::contig(weight_);
  const Tensor b = kutil::contig(bias_);
  Tensor y = kutil::empty_contig_like(x);
  if (x.numel() == 0) return y;
  const int64_t rows = x.numel() / N;
  if (x.scalar_type() == kutil::ScalarType::Float) {
    ln_impl(x.const_data_ptr<float>(), w.const_data_ptr<float>(), b.const_data_ptr<float>(),
            y.mutable_data_ptr<float>(), rows, N, eps);
  } else {
    ln_impl(x.const_data_ptr<double>(), w.const_data_ptr<double>(), b.const_data_ptr<double>(),
            y.mutable_data_ptr<double>(), rows, N, eps);
  }
  return y;
}

}  // namespace example
