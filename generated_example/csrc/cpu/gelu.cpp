// Hand-written CPU kernel for example::gelu (tanh approximation, user-owned).
//
//   gelu(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
//
// computed as x * sigmoid(2u) = x / (1 + exp(-2u)), which is algebraically
// identical, needs one exp and one division, and has no cancellation for
// negative x.
#include "../gelu.h"
#include "kernel_utils.h"

#include <cmath>
#include <type_traits>

namespace example {
namespace {

using kutil::Tensor;

constexpr double kBeta = 0.7978845608028654;  // sqrt(2/pi)
constexpr double kKappa = 0.044715;

template <typename T>
void gelu_scalar(const T* __restrict x, T* __restrict y, int64_t n) {
  const T beta = T(kBeta), kappa = T(kKappa);
  for (int64_t i = 0; i < n; ++i) {
    const T v = x[i];
    const T u = beta * (v + kappa * v * v * v);
    y[i] = T(0.5) * v * (T(1) + std::tanh(u));
  }
}

#if EXAMPLE_X86
EXAMPLE_AVX512 inline __m512 gelu16(__m512 x) {
  const __m512 c1 = _mm512_set1_ps(float(-2.0 * kBeta));
  const __m512 c3 = _mm512_set1_ps(float(-2.0 * kBeta * kKappa));
  const __m512 x2 = _mm512_mul_ps(x, x);
  const __m512 e = kutil::exp512_ps(_mm512_mul_ps(x, _mm512_fmadd_ps(x2, c3, c1)));  // exp(-2u)
  return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

EXAMPLE_AVX512 void gelu_avx512(const float* __restrict x, float* __restrict y, int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 a = gelu16(_mm512_loadu_ps(x + i));
    const __m512 b = gelu16(_mm512_loadu_ps(x + i + 16));
    _mm512_storeu_ps(y + i, a);
    _mm512_storeu_ps(y + i + 16, b);
  }
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, gelu16(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 m = kutil::tail_mask16(n - i);
    _mm512_mask_storeu_ps(y + i, m, gelu16(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

EXAMPLE_AVX2 inline __m256 gelu8(__m256 x) {
  const __m256 c1 = _mm256_set1_ps(float(-2.0 * kBeta));
  const __m256 c3 = _mm256_set1_ps(float(-2.0 * kBeta * kKappa));
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 x2 = _mm256_mul_ps(x, x);
  const __m256 m2u = _mm256_mul_ps(x, _mm256_fmadd_ps(x2, c3, c1));  // -2u
  const __m256 e = kutil::exp256_ps(m2u);
  return _mm256_div_ps(x, _mm256_add_ps(one, e));
}

EXAMPLE_AVX2 inline __m256d gelu4(__m256d x) {
  const __m256d c1 = _mm256_set1_pd(-2.0 * kBeta);
  const __m256d c3 = _mm256_set1_pd(-2.0 * kBeta * kKappa);
  const __m256d one = _mm256_set1_pd(1.0);
  const __m256d x2 = _mm256_mul_pd(x, x);
  const __m256d m2u = _mm256_mul_pd(x, _mm256_fmadd_pd(x2, c3, c1));
  const __m256d e = kutil::exp256_pd(m2u);
  return _mm256_div_pd(x, _mm256_add_pd(one, e));
}

EXAMPLE_AVX2 void gelu_avx2(const float* __restrict x, float* __restrict y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a = gelu8(_mm256_loadu_ps(x + i));
    const __m256 b = gelu8(_mm256_loadu_ps(x + i + 8));
    _mm256_storeu_ps(y + i, a);
    _mm256_storeu_ps(y + i + 8, b);
  }
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, gelu8(_mm256_loadu_ps(x + i)));
  if (i < n) {
    const __m256i m = kutil::tail_mask_ps(n - i);
    _mm256_maskstore_ps(y + i, m, gelu8(_mm256_maskload_ps(x + i, m)));
  }
}

EXAMPLE_AVX2 void gelu_avx2(const double* __restrict x, double* __restrict y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256d a = gelu4(_mm256_loadu_pd(x + i));
    const __m256d b = gelu4(_mm256_loadu_pd(x + i + 4));
    _mm256_storeu_pd(y + i, a);
    _mm256_storeu_pd(y + i + 4, b);
  }
  for (; i + 4 <= n; i += 4) _mm256_storeu_pd(y + i, gelu4(_mm256_loadu_pd(x + i)));
  if (i < n) {
    const __m256i m = kutil::tail_mask_pd(n - i);
    _mm256_maskstore_pd(y + i, m, gelu4(_mm256_maskload_pd(x + i, m)));
  }
}
#endif

template <typename T>
void gelu_impl(const T* x, T* y, int64_t n) {
  const bool simd = kutil::cpu_has_avx2_fma();
  const bool wide = std::is_same_v<T, float> && kutil::cpu_has_avx512();
  torch::stable::parallel_for(0, n, kutil::kElementwiseGrain, [&](int64_t begin, int64_t end) {
#if EXAMPLE_X86
    if constexpr (std::is_same_v<T, float>) {
      if (wide) {
        gelu_avx512(x + begin, y + begin, end - begin);
        return;
      }
    }
    if (simd) {
      gelu_avx2(x + begin, y + begin, end - begin);
      return;
    }
#endif
    gelu_scalar(x + begin, y + begin, end - begin);
  });
}

}  // namespace

torch::stable::Tensor gelu_cpu(const torch::stable::Tensor& x_) {
  constexpr const char* op = "example::gelu";
  kutil::check_cpu(x_, op, "x");
  kutil::check_float_dtype(x_, op, "x");
  const Tensor x = kutil::contig(x_);
  Tensor out = kutil::empty_contig_like(x);
  const int64_t n = x.numel();
  if (n == 0) return out;
  if (x.scalar_type() == kutil::ScalarType::Float) {
    gelu_impl(x.const_data_ptr<float>(), out.mutable_data_ptr<float>(), n);
  } else {
    gelu_impl(x.const_data_ptr<double>(), out.mutable_data_ptr<double>(), n);
  }
  return out;
}

}  // namespace example
