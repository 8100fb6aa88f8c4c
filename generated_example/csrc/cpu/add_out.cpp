// Hand-written CPU kernel for example::add_out (user-owned): out <- a + b.
// Schema: add_out(Tensor a, Tensor b, Tensor(a!) out) -> ()
// `out` must already have a's shape and dtype; it may alias a or b (the
// kernel is strictly elementwise, so no __restrict here), and may be
// non-contiguous (result is then computed contiguously and copied in).
#include "../add_out.h"
#include "kernel_utils.h"

namespace example {
namespace {

using kutil::Tensor;

template <typename T>
void add_scalar(const T* a, const T* b, T* o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = a[i] + b[i];
}

#if EXAMPLE_X86
EXAMPLE_AVX2 void add_avx2(const float* a, const float* b, float* o, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 x0 = _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i));
    const __m256 x1 = _mm256_add_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8));
    _mm256_storeu_ps(o + i, x0);
    _mm256_storeu_ps(o + i + 8, x1);
  }
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(o + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  if (i < n) {
    const __m256i m = kutil::tail_mask_ps(n - i);
    _mm256_maskstore_ps(o + i, m, _mm256_add_ps(_mm256_maskload_ps(a + i, m),
                                                _mm256_maskload_ps(b + i, m)));
  }
}

EXAMPLE_AVX2 void add_avx2(const double* a, const double* b, double* o, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256d x0 = _mm256_add_pd(_mm256_loadu_pd(a + i), _mm256_loadu_pd(b + i));
    const __m256d x1 = _mm256_add_pd(_mm256_loadu_pd(a + i + 4), _mm256_loadu_pd(b + i + 4));
    _mm256_storeu_pd(o + i, x0);
    _mm256_storeu_pd(o + i + 4, x1);
  }
  for (; i + 4 <= n; i += 4)
    _mm256_storeu_pd(o + i, _mm256_add_pd(_mm256_loadu_pd(a + i), _mm256_loadu_pd(b + i)));
  if (i < n) {
    const __m256i m = kutil::tail_mask_pd(n - i);
    _mm256_maskstore_pd(o + i, m, _mm256_add_pd(_mm256_maskload_pd(a + i, m),
                                                _mm256_maskload_pd(b + i, m)));
  }
}
#endif

template <typename T>
void add_impl(const T* a, const T* b, T* o, int64_t n) {
  const bool simd = kutil::cpu_has_avx2_fma();
  torch::stable::parallel_for(0, n, kutil::kElementwiseGrain, [&](int64_t begin, int64_t end) {
#if EXAMPLE_X86
    if (simd) {
      add_avx2(a + begin, b + begin, o + begin, end - begin);
      return;
    }
#endif
    add_scalar(a + begin, b + begin, o + begin, end - begin);
  });
}

void add_into(const Tensor& a, const Tensor& b, Tensor& o) {
  const int64_t n = a.numel();
  if (n == 0) return;
  if (a.scalar_type() == kutil::ScalarType::Float) {
    add_impl(a.const_data_ptr<float>(), b.const_data_ptr<float>(),
             o.mutable_data_ptr<float>(), n);
  } else {
    add_impl(a.const_data_ptr<double>(), b.const_data_ptr<double>(),
             o.mutable_data_ptr<double>(), n);
  }
}

}  // namespace

void add_out_cpu(const torch::stable::Tensor& a_, const torch::stable::Tensor& b_,
                 const torch::stable::Tensor& out_) {
  constexpr const char* op = "example::add_out";
  kutil::check_binary_elementwise(a_, b_, op);
  kutil::check_cpu(out_, op, "out");
  kutil::check_same_dtype(a_, out_, op, "a", "out");
  kutil::check_same_sizes(a_, out_, op, "a", "out");
  const Tensor a = kutil::contig(a_);
  const Tensor b = kutil::contig(b_);
  Tensor out = out_;  // shares the handle: writes land in the caller's tensor
  if (out.is_contiguous()) {
    add_into(a, b, out);
  } else {
    Tensor tmp = kutil::empty_contig_like(a);
    add_into(a, b, tmp);
    torch::stable::copy_(out, tmp);
  }
}

}  // namespace example
