// Hand-written CPU kernel for example::muladd (user-owned): a * b + c.
#include "../muladd.h"
#include "kernel_utils.h"

#include <type_traits>

namespace example {
namespace {

using kutil::Tensor;

template <typename T>
void muladd_scalar(const T* __restrict a, const T* __restrict b, T c,
                   T* __restrict o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = a[i] * b[i] + c;
}

#if EXAMPLE_X86
EXAMPLE_AVX512 void muladd_avx512(const float* __restrict a, const float* __restrict b,
                                  float c, float* __restrict o, int64_t n) {
  const __m512 vc = _mm512_set1_ps(c);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 x0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), vc);
    const __m512 x1 =
        _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), vc);
    _mm512_storeu_ps(o + i, x0);
    _mm512_storeu_ps(o + i + 16, x1);
  }
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(o + i, _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), vc));
  if (i < n) {
    const __mmask16 m = kutil::tail_mask16(n - i);
    _mm512_mask_storeu_ps(o + i, m, _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i),
                                                    _mm512_maskz_loadu_ps(m, b + i), vc));
  }
}

EXAMPLE_AVX2 void muladd_avx2(const float* __restrict a, const float* __restrict b,
                              float c, float* __restrict o, int64_t n) {
  const __m256 vc = _mm256_set1_ps(c);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 x0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), vc);
    const __m256 x1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), vc);
    _mm256_storeu_ps(o + i, x0);
    _mm256_storeu_ps(o + i + 8, x1);
  }
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(o + i, _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), vc));
  if (i < n) {
    const __m256i m = kutil::tail_mask_ps(n - i);
    _mm256_maskstore_ps(o + i, m, _mm256_fmadd_ps(_mm256_maskload_ps(a + i, m),
                                                  _mm256_maskload_ps(b + i, m), vc));
  }
}

EXAMPLE_AVX2 void muladd_avx2(const double* __restrict a, const double* __restrict b,
                              double c, double* __restrict o, int64_t n) {
  const __m256d vc = _mm256_set1_pd(c);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256d x0 = _mm256_fmadd_pd(_mm256_loadu_pd(a + i), _mm256_loadu_pd(b + i), vc);
    const __m256d x1 = _mm256_fmadd_pd(_mm256_loadu_pd(a + i + 4), _mm256_loadu_pd(b + i + 4), vc);
    _mm256_storeu_pd(o + i, x0);
    _mm256_storeu_pd(o + i + 4, x1);
  }
  for (; i + 4 <= n; i += 4)
    _mm256_storeu_pd(o + i, _mm256_fmadd_pd(_mm256_loadu_pd(a + i), _mm256_loadu_pd(b + i), vc));
  if (i < n) {
    const __m256i m = kutil::tail_mask_pd(n - i);
    _mm256_maskstore_pd(o + i, m, _mm256_fmadd_pd(_mm256_maskload_pd(a + i, m),
                                                  _mm256_maskload_pd(b + i, m), vc));
  }
}
#endif

template <typename T>
void muladd_impl(const T* a, const T* b, T c, T* o, int64_t n) {
  const bool simd = kutil::cpu_has_avx2_fma();
  const bool wide = std::is_same_v<T, float> && kutil::cpu_has_avx512();
  torch::stable::parallel_for(0, n, kutil::kElementwiseGrain, [&](int64_t begin, int64_t end) {
#if EXAMPLE_X86
    if constexpr (std::is_same_v<T, float>) {
      if (wide) {
        muladd_avx512(a + begin, b + begin, c, o + begin, end - begin);
        return;
      }
    }
    if (simd) {
      muladd_avx2(a + begin, b + begin, c, o + begin, end - begin);
      return;
    }
#endif
    muladd_scalar(a + begin, b + begin, c, o + begin, end - begin);
  });
}

}  // namespace

torch::stable::Tensor muladd_cpu(const torch::stable::Tensor& a_,
                                 const torch::stable::Tensor& b_, double c) {
  kutil::check_binary_elementwise(a_, b_, "example::muladd");
  const Tensor a = kutil::contig(a_);
  const Tensor b = kutil::contig(b_);
  Tensor out = kutil::empty_contig_like(a);
  const int64_t n = a.numel();
  if (n == 0) return out;
  if (a.scalar_type() == kutil::ScalarType::Float) {
    muladd_impl(a.const_data_ptr<float>(), b.const_data_ptr<float>(), float(c),
                out.mutable_data_ptr<float>(), n);
  } else {
    muladd_impl(a.const_data_ptr<double>(), b.const_data_ptr<double>(), c,
                out.mutable_data_ptr<double>(), n);
  }
  return out;
}

}  // namespace example
