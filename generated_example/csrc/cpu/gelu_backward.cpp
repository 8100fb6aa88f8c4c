// Hand-written CPU kernel for example::gelu_backward (tanh approximation,
// user-owned): grad * d/dx gelu(x).
//
// With s = sigmoid(2u) = (1 + tanh u) / 2, u = sqrt(2/pi)(x + 0.044715 x^3):
//   gelu(x)  = x s
//   gelu'(x) = s + 2 x s (1 - s) sqrt(2/pi) (1 + 3*0.044715 x^2)
//            = s (1 + x (1 - s) * 2 sqrt(2/pi) (1 + 0.134145 x^2))
// which equals 0.5(1+t) + 0.5 x (1-t^2) u'(x) with t = tanh(u).
#include "../gelu_backward.h"
#include "kernel_utils.h"

#include <cmath>
#include <type_traits>

namespace example {
namespace {

using kutil::Tensor;

constexpr double kBeta = 0.7978845608028654;  // sqrt(2/pi)
constexpr double kKappa = 0.044715;

template <typename T>
void gelu_bwd_scalar(const T* __restrict g, const T* __restrict x, T* __restrict o,
                     int64_t n) {
  const T beta = T(kBeta), kappa = T(kKappa);
  for (int64_t i = 0; i < n; ++i) {
    const T v = x[i];
    const T v2 = v * v;
    const T t = std::tanh(beta * (v + kappa * v2 * v));
    const T du = beta * (T(1) + T(3) * kappa * v2);
    o[i] = g[i] * (T(0.5) * (T(1) + t) + T(0.5) * v * (T(1) - t * t) * du);
  }
}

#if EXAMPLE_X86
EXAMPLE_AVX512 inline __m512 gelu_bwd16(__m512 g, __m512 x) {
  const __m512 c1 = _mm512_set1_ps(float(-2.0 * kBeta));
  const __m512 c3 = _mm512_set1_ps(float(-2.0 * kBeta * kKappa));
  const __m512 d1 = _mm512_set1_ps(float(2.0 * kBeta));
  const __m512 d3 = _mm512_set1_ps(float(2.0 * kBeta * 3.0 * kKappa));
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 x2 = _mm512_mul_ps(x, x);
  const __m512 e = kutil::exp512_ps(_mm512_mul_ps(x, _mm512_fmadd_ps(x2, c3, c1)));
  const __m512 s = _mm512_div_ps(one, _mm512_add_ps(one, e));
  const __m512 du2 = _mm512_fmadd_ps(x2, d3, d1);            // 2 u'(x)
  const __m512 xs1 = _mm512_mul_ps(x, _mm512_sub_ps(one, s));  // x (1 - s)
  return _mm512_mul_ps(g, _mm512_mul_ps(s, _mm512_fmadd_ps(xs1, du2, one)));
}

EXAMPLE_AVX512 void gelu_bwd_avx512(const float* __restrict g, const float* __restrict x,
                                    float* __restrict o, int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 a = gelu_bwd16(_mm512_loadu_ps(g + i), _mm512_loadu_ps(x + i));
    const __m512 b = gelu_bwd16(_mm512_loadu_ps(g + i + 16), _mm512_loadu_ps(x + i + 16));
    _mm512_storeu_ps(o + i, a);
    _mm512_storeu_ps(o + i + 16, b);
  }
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(o + i, gelu_bwd16(_mm512_loadu_ps(g + i), _mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 m = kutil::tail_mask16(n - i);
    _mm512_mask_storeu_ps(o + i, m, gelu_bwd16(_mm512_maskz_loadu_ps(m, g + i),
                                               _mm512_maskz_loadu_ps(m, x + i)));
  }
}

EXAMPLE_AVX2 inline __m256 gelu_bwd8(__m256 g, __m256 x) {
  const __m256 c1 = _mm256_set1_ps(float(-2.0 * kBeta));
  const __m256 c3 = _mm256_set1_ps(float(-2.0 * kBeta * kKappa));
  const __m256 d1 = _mm256_set1_ps(float(2.0 * kBeta));
  const __m256 d3 = _mm256_set1_ps(float(2.0 * kBeta * 3.0 * kKappa));
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 x2 = _mm256_mul_ps(x, x);
  const __m256 e = kutil::exp256_ps(_mm256_mul_ps(x, _mm256_fmadd_ps(x2, c3, c1)));
  const __m256 s = _mm256_div_ps(one, _mm256_add_ps(one, e));
  const __m256 du2 = _mm256_fmadd_ps(x2, d3, d1);           // 2 u'(x)
  const __m256 xs1 = _mm256_mul_ps(x, _mm256_sub_ps(one, s)); // x (1 - s)
  const __m256 d = _mm256_mul_ps(s, _mm256_fmadd_ps(xs1, du2, one));
  return _mm256_mul_ps(g, d);
}

EXAMPLE_AVX2 inline __m256d gelu_bwd4(__m256d g, __m256d x) {
  const __m256d c1 = _mm256_set1_pd(-2.0 * kBeta);
  const __m256d c3 = _mm256_set1_pd(-2.0 * kBeta * kKappa);
  const __m256d d1 = _mm256_set1_pd(2.0 * kBeta);
  const __m256d d3 = _mm256_set1_pd(2.0 * kBeta * 3.0 * kKappa);
  const __m256d one = _mm256_set1_pd(1.0);
  const __m256d x2 = _mm256_mul_pd(x, x);
  const __m256d e = kutil::exp256_pd(_mm256_mul_pd(x, _mm256_fmadd_pd(x2, c3, c1)));
  const __m256d s = _mm256_div_pd(one, _mm256_add_pd(one, e));
  const __m256d du2 = _mm256_fmadd_pd(x2, d3, d1);
  const __m256d xs1 = _mm256_mul_pd(x, _mm256_sub_pd(one, s));
  const __m256d d = _mm256_mul_pd(s, _mm256_fmadd_pd(xs1, du2, one));
  return _mm256_mul_pd(g, d);
}

EXAMPLE_AVX2 void gelu_bwd_avx2(const float* __restrict g, const float* __restrict x,
                                float* __restrict o, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a = gelu_bwd8(_mm256_loadu_ps(g + i), _mm256_loadu_ps(x + i));
    const __m256 b = gelu_bwd8(_mm256_loadu_ps(g + i + 8), _mm256_loadu_ps(x + i + 8));
    _mm256_storeu_ps(o + i, a);
    _mm256_storeu_ps(o + i + 8, b);
  }
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(o + i, gelu_bwd8(_mm256_loadu_ps(g + i), _mm256_loadu_ps(x + i)));
  if (i < n) {
    const __m256i m = kutil::tail_mask_ps(n - i);
    _mm256_maskstore_ps(o + i, m, gelu_bwd8(_mm256_maskload_ps(g + i, m),
                                            _mm256_maskload_ps(x + i, m)));
  }
}

EXAMPLE_AVX2 void gelu_bwd_avx2(const double* __restrict g, const double* __restrict x,
                                double* __restrict o, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256d a = gelu_bwd4(_mm256_loadu_pd(g + i), _mm256_loadu_pd(x + i));
    const __m256d b = gelu_bwd4(_mm256_loadu_pd(g + i + 4), _mm256_loadu_pd(x + i + 4));
    _mm256_storeu_pd(o + i, a);
    _mm256_storeu_pd(o + i + 4, b);
  }
  for (; i + 4 <= n; i += 4)
    _mm256_storeu_pd(o + i, gelu_bwd4(_mm256_loadu_pd(g + i), _mm256_loadu_pd(x + i)));
  if (i < n) {
    const __m256i m = kutil::tail_mask_pd(n - i);
    _mm256_maskstore_pd(o + i, m, gelu_bwd4(_mm256_maskload_pd(g + i, m),
                                            _mm256_maskload_pd(x + i, m)));
  }
}
#endif

template <typename T>
void gelu_bwd_impl(const T* g, const T* x, T* o, int64_t n) {
  const bool simd = kutil::cpu_has_avx2_fma();
  const bool wide = std::is_same_v<T, float> && kutil::cpu_has_avx512();
  torch::stable::parallel_for(0, n, kutil::kElementwiseGrain, [&](int64_t begin, int64_t end) {
#if EXAMPLE_X86
    if constexpr (std::is_same_v<T, float>) {
      if (wide) {
        gelu_bwd_avx512(g + begin, x + begin, o + begin, end - begin);
        return;
      }
    }
    if (simd) {
      gelu_bwd_avx2(g + begin, x + begin, o + begin, end - begin);
      return;
    }
#endif
    gelu_bwd_scalar(g + begin, x + begin, o + begin, end - begin);
  });
}

}  // namespace

torch::stable::Tensor gelu_backward_cpu(const torch::stable::Tensor& grad_,
                                        const torch::stable::Tensor& x_) {
  constexpr const char* op = "example::gelu_backward";
  kutil::check_cpu(grad_, op, "grad");
  kutil::check_cpu(x_, op, "x");
  kutil::check_float_dtype(x_, op, "x");
  kutil::check_same_dtype(grad_, x_, op, "grad", "x");
  kutil::check_same_sizes(grad_, x_, op, "grad", "x");
  const Tensor g = kutil::contig(grad_);
  const Tensor x = kutil::contig(x_);
  Tensor out = kutil::empty_contig_like(x);
  const int64_t n = x.numel();
  if (n == 0) return out;
  if (x.scalar_type() == kutil::ScalarType::Float) {
    gelu_bwd_impl(g.const_data_ptr<float>(), x.const_data_ptr<float>(),
                  out.mutable_data_ptr<float>(), n);
  } else {
    gelu_bwd_impl(g.const_data_ptr<double>(), x.const_data_ptr<double>(),
                  out.mutable_data_ptr<double>(), n);
  }
  return out;
}

}  // namespace example
