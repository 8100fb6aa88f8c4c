// Hand-written CPU kernel for example::layer_norm_backward (user-owned).
//
// Given dy (grad), x, weight and eps, returns (dx, dweight, dbias) of
// y = layer_norm(x, weight, bias, eps) over the last dim. mean/rstd are
// recomputed per row: the row (N elements) is then in L1, so the extra
// pass costs no memory traffic, and the forward keeps a single output.
//
//   xhat = (x - mean) * rstd,  g = dy * weight
//   dx   = rstd * (g - mean_j(g) - xhat * mean_j(g * xhat))
//   dweight = sum_rows dy * xhat,  dbias = sum_rows dy
//
// Rows are split into one chunk per thread; each chunk accumulates its own
// dweight/dbias partial (in L1 for typical N), reduced at the end.
#include "../layer_norm_backward.h"
#include "kernel_utils.h"

#include <cmath>
#include <type_traits>
#include <vector>

namespace example {
namespace {

using kutil::Tensor;

template <typename T>
void row_moments_scalar(const T* xr, int64_t N, T eps, T& mean, T& rstd) {
  T s = 0;
  for (int64_t j = 0; j < N; ++j) s += xr[j];
  mean = s / T(N);
  T v = 0;
  for (int64_t j = 0; j < N; ++j) v += (xr[j] - mean) * (xr[j] - mean);
  rstd = T(1) / std::sqrt(v / T(N) + eps);
}

template <typename T>
void lnb_rows_scalar(const T* dy, const T* x, const T* w, T* dx, T* dw, T* db,
                     int64_t r0, int64_t r1, int64_t N, T eps) {
  for (int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * N;
    const T* gr = dy + r * N;
    T mean, rstd;
    row_moments_scalar(xr, N, eps, mean, rstd);
    T s1 = 0, s2 = 0;
    for (int64_t j = 0; j < N; ++j) {
      const T xh = (xr[j] - mean) * rstd;
      const T g = gr[j] * w[j];
      s1 += g;
      s2 += g * xh;
      dw[j] += gr[j] * xh;
      db[j] += gr[j];
    }
    const T a = s1 / T(N), c = s2 / T(N);
    T* dxr = dx + r * N;
    for (int64_t j = 0; j < N; ++j) {
      const T xh = (xr[j] - mean) * rstd;
      dxr[j] = rstd * (gr[j] * w[j] - a - xh * c);
    }
  }
}

#if EXAMPLE_X86
EXAMPLE_AVX512 void lnb_rows_avx512(const float* dy, const float* x, const float* w, float* dx,
                                    float* dw, float* db, int64_t r0, int64_t r1, int64_t N,
                                    float eps) {
  const int64_t N16 = N & ~int64_t(15);
  const int64_t N32 = N & ~int64_t(31);
  const __mmask16 tail = kutil::tail_mask16(N - N16);
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * N;
    const float* gr = dy + r * N;
    float* dxr = dx + r * N;
    // mean
    __m512 s0 = _mm512_setzero_ps(), s1 = s0;
    int64_t j = 0;
    for (; j < N32; j += 32) {
      s0 = _mm512_add_ps(s0, _mm512_loadu_ps(xr + j));
      s1 = _mm512_add_ps(s1, _mm512_loadu_ps(xr + j + 16));
    }
    for (; j < N16; j += 16) s0 = _mm512_add_ps(s0, _mm512_loadu_ps(xr + j));
    s1 = _mm512_add_ps(s1, _mm512_maskz_loadu_ps(tail, xr + j));
    const float mean = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1)) / float(N);
    const __m512 vm = _mm512_set1_ps(mean);
    // variance
    s0 = _mm512_setzero_ps(), s1 = s0;
    for (j = 0; j < N32; j += 32) {
      const __m512 d0 = _mm512_sub_ps(_mm512_loadu_ps(xr + j), vm);
      const __m512 d1 = _mm512_sub_ps(_mm512_loadu_ps(xr + j + 16), vm);
      s0 = _mm512_fmadd_ps(d0, d0, s0);
      s1 = _mm512_fmadd_ps(d1, d1, s1);
    }
    for (; j < N16; j += 16) {
      const __m512 d0 = _mm512_sub_ps(_mm512_loadu_ps(xr + j), vm);
      s0 = _mm512_fmadd_ps(d0, d0, s0);
    }
    const __m512 dt = _mm512_maskz_sub_ps(tail, _mm512_maskz_loadu_ps(tail, xr + j), vm);
    s1 = _mm512_fmadd_ps(dt, dt, s1);
    const float v = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
    const float rstd = 1.0f / std::sqrt(v / float(N) + eps);
    const __m512 vr = _mm512_set1_ps(rstd);
    // row sums + dweight/dbias partials (the masked tail adds zeros)
    __m512 a0 = _mm512_setzero_ps(), c0 = a0;
    for (j = 0; j < N; j += 16) {
      const __mmask16 m = j < N16 ? __mmask16(0xFFFF) : tail;
      const __m512 xh = _mm512_maskz_mul_ps(
          m, _mm512_sub_ps(_mm512_maskz_loadu_ps(m, xr + j), vm), vr);
      const __m512 gy = _mm512_maskz_loadu_ps(m, gr + j);
      const __m512 g = _mm512_mul_ps(gy, _mm512_maskz_loadu_ps(m, w + j));
      a0 = _mm512_add_ps(a0, g);
      c0 = _mm512_fmadd_ps(g, xh, c0);
      _mm512_mask_storeu_ps(dw + j, m, _mm512_fmadd_ps(gy, xh, _mm512_maskz_loadu_ps(m, dw + j)));
      _mm512_mask_storeu_ps(db + j, m, _mm512_add_ps(gy, _mm512_maskz_loadu_ps(m, db + j)));
    }
    // dx = rstd*g - rstd*mean(g) - xhat*rstd*mean(g*xhat)
    const __m512 vka = _mm512_set1_ps(rstd * _mm512_reduce_add_ps(a0) / float(N));
    const __m512 vkc = _mm512_set1_ps(rstd * _mm512_reduce_add_ps(c0) / float(N));
    // While dx is written, the next rows of x and dy come into L2.
    const bool last = r + 1 == r1;
    for (j = 0; j < N; j += 16) {
      if (!last) {
        _mm_prefetch(reinterpret_cast<const char*>(xr + N + j), _MM_HINT_T1);
        _mm_prefetch(reinterpret_cast<const char*>(gr + N + j), _MM_HINT_T1);
      }
      const __mmask16 m = j < N16 ? __mmask16(0xFFFF) : tail;
      const __m512 xh = _mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, xr + j), vm), vr);
      const __m512 g =
          _mm512_mul_ps(_mm512_maskz_loadu_ps(m, gr + j), _mm512_maskz_loadu_ps(m, w + j));
      _mm512_mask_storeu_ps(dxr + j, m, _mm512_fnmadd_ps(xh, vkc, _mm512_fmsub_ps(g, vr, vka)));
    }
  }
}

EXAMPLE_AVX2 void lnb_rows_avx2(const float* dy, const float* x, const float* w,
                                float* dx, float* dw, float* db, int64_t r0,
                                int64_t r1, int64_t N, float eps) {
  const int64_t N8 = N & ~int64_t(7);
  const int64_t N16 = N & ~int64_t(15);
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * N;
    const float* gr = dy + r * N;
    float* dxr = dx + r * N;
    // mean
    __m256 s0 = _mm256_setzero_ps(), s1 = s0;
    int64_t j = 0;
    for (; j < N16; j += 16) {
      s0 = _mm256_add_ps(s0, _mm256_loadu_ps(xr + j));
      s1 = _mm256_add_ps(s1, _mm256_loadu_ps(xr + j + 8));
    }
    for (; j < N8; j += 8) s0 = _mm256_add_ps(s0, _mm256_loadu_ps(xr + j));
    float s = kutil::hsum256_ps(_mm256_add_ps(s0, s1));
    for (; j < N; ++j) s += xr[j];
    const float mean = s / float(N);
    const __m256 vm = _mm256_set1_ps(mean);
    // variance
    s0 = _mm256_setzero_ps(), s1 = s0;
    for (j = 0; j < N16; j += 16) {
      const __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(xr + j), vm);
      const __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(xr + j + 8), vm);
      s0 = _mm256_fmadd_ps(d0, d0, s0);
      s1 = _mm256_fmadd_ps(d1, d1, s1);
    }
    for (; j < N8; j += 8) {
      const __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(xr + j), vm);
      s0 = _mm256_fmadd_ps(d0, d0, s0);
    }
    float v = kutil::hsum256_ps(_mm256_add_ps(s0, s1));
    for (; j < N; ++j) v += (xr[j] - mean) * (xr[j] - mean);
    const float rstd = 1.0f / std::sqrt(v / float(N) + eps);
    const __m256 vr = _mm256_set1_ps(rstd);
    // row sums + dweight/dbias partials
    __m256 a0 = _mm256_setzero_ps(), c0 = a0;
    for (j = 0; j < N8; j += 8) {
      const __m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(xr + j), vm), vr);
      const __m256 gy = _mm256_loadu_ps(gr + j);
      const __m256 g = _mm256_mul_ps(gy, _mm256_loadu_ps(w + j));
      a0 = _mm256_add_ps(a0, g);
      c0 = _mm256_fmadd_ps(g, xh, c0);
      _mm256_storeu_ps(dw + j, _mm256_fmadd_ps(gy, xh, _mm256_loadu_ps(dw + j)));
      _mm256_storeu_ps(db + j, _mm256_add_ps(gy, _mm256_loadu_ps(db + j)));
    }
    float sa = kutil::hsum256_ps(a0), sc = kutil::hsum256_ps(c0);
    for (; j < N; ++j) {
      const float xh = (xr[j] - mean) * rstd;
      const float g = gr[j] * w[j];
      sa += g;
      sc += g * xh;
      dw[j] += gr[j] * xh;
      db[j] += gr[j];
    }
    // dx = rstd*g - rstd*mean(g) - xhat*rstd*mean(g*xhat)
    const float ka = rstd * sa / float(N), kc = rstd * sc / float(N);
    const __m256 vka = _mm256_set1_ps(ka), vkc = _mm256_set1_ps(kc);
    for (j = 0; j < N8; j += 8) {
      const __m256 xh = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(xr + j), vm), vr);
      const __m256 g = _mm256_mul_ps(_mm256_loadu_ps(gr + j), _mm256_loadu_ps(w + j));
      const __m256 t = _mm256_fmsub_ps(g, vr, vka);
      _mm256_storeu_ps(dxr + j, _mm256_fnmadd_ps(xh, vkc, t));
    }
    for (; j < N; ++j) {
      const float xh = (xr[j] - mean) * rstd;
      dxr[j] = gr[j] * w[j] * rstd - ka - xh * kc;
    }
  }
}

EXAMPLE_AVX2 void lnb_rows_avx2(const double* dy, const double* x, const double* w,
                                double* dx, double* dw, double* db, int64_t r0,
                                int64_t r1, int64_t N, double eps) {
  const int64_t N4 = N & ~int64_t(3);
  for (int64_t r = r0; r < r1; ++r) {
    const double* xr = x + r * N;
    const double* gr = dy + r * N;
    double* dxr = dx + r * N;
    __m256d s0 = _mm256_setzero_pd();
    int64_t j = 0;
    for (; j < N4; j += 4) s0 = _mm256_add_pd(s0, _mm256_loadu_pd(xr + j));
    double s = kutil::hsum256_pd(s0);
    for (; j < N; ++j) s += xr[j];
    const double mean = s / double(N);
    const __m256d vm = _mm256_set1_pd(mean);
    s0 = _mm256_setzero_pd();
    for (j = 0; j < N4; j += 4) {
      const __m256d d0 = _mm256_sub_pd(_mm256_loadu_pd(xr + j), vm);
      s0 = _mm256_fmadd_pd(d0, d0, s0);
    }
    double v = kutil::hsum256_pd(s0);
    for (; j < N; ++j) v += (xr[j] - mean) * (xr[j] - mean);
    const double rstd = 1.0 / std::sqrt(v / double(N) + eps);
    const __m256d vr = _mm256_set1_pd(rstd);
    __m256d a0 = _mm256_setzero_pd(), c0 = a0;
    for (j = 0; j < N4; j += 4) {
      const __m256d xh = _mm256_mul_pd(_mm256_sub_pd(_mm256_loadu_pd(xr + j), vm), vr);
      const __m256d gy = _mm256_loadu_pd(gr + j);
      const __m256d g = _mm256_mul_pd(gy, _mm256_loadu_pd(w + j));
      a0 = _mm256_add_pd(a0, g);
      c0 = _mm256_fmadd_pd(g, xh, c0);
      _mm256_storeu_pd(dw + j, _mm256_fmadd_pd(gy, xh, _mm256_loadu_pd(dw + j)));
      _mm256_storeu_pd(db + j, _mm256_add_pd(gy, _mm256_loadu_pd(db + j)));
    }
    double sa = kutil::hsum256_pd(a0), sc = kutil::hsum256_pd(c0);
    for (; j < N; ++j) {
      const double xh = (xr[j] - mean) * rstd;
      const double g = gr[j] * w[j];
      sa += g;
      sc += g * xh;
      dw[j] += gr[j] * xh;
      db[j] += gr[j];
    }
    const double ka = rstd * sa / double(N), kc = rstd * sc / double(N);
    const __m256d vka = _mm256_set1_pd(ka), vkc = _mm256_set1_pd(kc);
    for (j = 0; j < N4; j += 4) {
      const __m256d xh = _mm256_mul_pd(_mm256_sub_pd(_mm256_loadu_pd(xr + j), vm), vr);
      const __m256d g = _mm256_mul_pd(_mm256_loadu_pd(gr + j), _mm256_loadu_pd(w + j));
      const __m256d t = _mm256_fmsub_pd(g, vr, vka);
      _mm256_storeu_pd(dxr + j, _mm256_fnmadd_pd(xh, vkc, t));
    }
    for (; j < N; ++j) {
      const double xh = (xr[j] - mean) * rstd;
      dxr[j] = gr[j] * w[j] * rstd - ka - xh * kc;
    }
  }
}
#endif

template <typename T>
void lnb_impl(const T* dy, const T* x, const T* w, T* dx, T* dw, T* db,
              int64_t rows, int64_t N, double eps) {
  const bool simd = kutil::cpu_has_avx2_fma();
  const bool wide = std::is_same_v<T, float> && kutil::cpu_has_avx512();
  const int64_t nthreads = std::max<int64_t>(1, torch::stable::get_num_threads());
  // Enough rows per chunk that the partial reduction (nchunks * N) stays small
  // next to the main work (rows * N).
  const int64_t nchunks = std::max<int64_t>(
      1, std::min<int64_t>(nthreads, rows * N / (int64_t(1) << 14)));
  // One (dw, db) partial per chunk; chunk 0 accumulates straight into the output.
  std::vector<T> partial(size_t(std::max<int64_t>(0, nchunks - 1)) * 2 * N, T(0));
  std::fill(dw, dw + N, T(0));
  std::fill(db, db + N, T(0));
  torch::stable::parallel_for(0, nchunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t r0 = rows * c / nchunks, r1 = rows * (c + 1) / nchunks;
      T* pdw = c == 0 ? dw : partial.data() + (c - 1) * 2 * N;
      T* pdb = c == 0 ? db : pdw + N;
#if EXAMPLE_X86
      if constexpr (std::is_same_v<T, float>) {
        if (wide) {
          lnb_rows_avx512(dy, x, w, dx, pdw, pdb, r0, r1, N, T(eps));
          continue;
        }
      }
      if (simd) {
        lnb_rows_avx2(dy, x, w, dx, pdw, pdb, r0, r1, N, T(eps));
        continue;
      }
#endif
      lnb_rows_scalar(dy, x, w, dx, pdw, pdb, r0, r1, N, T(eps));
    }
  });
  for (int64_t c = 1; c < nchunks; ++c) {
    const T* pdw = partial.data() + (c - 1) * 2 * N;
    const T* pdb = pdw + N;
    for (int64_t j = 0; j < N; ++j) {
      dw[j] += pdw[j];
      db[j] += pdb[j];
    }
  }
}

}  // namespace

std::tuple<torch::stable::Tensor, torch::stable::Tensor, torch::stable::Tensor>
layer_norm_backward_cpu(const torch::stable::Tensor& grad_,
                        const torch::stable::Tensor& x_,
                        const torch::stable::Tensor& weight_, double eps) {
  constexpr const char* op = "example::layer_norm_backward";
  kutil::check_cpu(grad_, op, "grad");
  kutil::check_cpu(x_, op, "x");
  kutil::check_cpu(weight_, op, "weight");
  kutil::check_float_dtype(x_, op, "x");
  kutil::check_same_dtype(grad_, x_, op, "grad", "x");
  kutil::check_same_dtype(x_, weight_, op, "x", "weight");
  kutil::check_same_sizes(grad_, x_, op, "grad", "x");
  STD_TORCH_CHECK(x_.dim() >= 1, op, ": expected 'x' to have at least 1 dimension");
  const int64_t N = x_.size(x_.dim() - 1);
  STD_TORCH_CHECK(weight_.dim() == 1 && weight_.size(0) == N, op,
                  ": expected 'weight' of shape (", N, ",) (the last dim of x)");
  const Tensor g = kutil::contig(grad_);
  const Tensor x = kutil::contig(x_);
  const Tensor w = kutil::contig(weight_);
  Tensor dx = kutil::empty_contig_like(x);
  Tensor dw = kutil::empty_contig_like(w);
  Tensor db = kutil::empty_contig_like(w);
  const int64_t rows = N == 0 ? 0 : x.numel() / N;
  if (x.scalar_type() == kutil::ScalarType::Float) {
    lnb_impl(g.const_data_ptr<float>(), x.const_data_ptr<float>(), w.const_data_ptr<float>(),
             dx.mutable_data_ptr<float>(), dw.mutable_data_ptr<float>(),
             db.mutable_data_ptr<float>(), rows, N, eps);
  } else {
    lnb_impl(g.const_data_ptr<double>(), x.const_data_ptr<double>(), w.const_data_ptr<double>(),
             dx.mutable_data_ptr<double>(), dw.mutable_data_ptr<double>(),
             db.mutable_data_ptr<double>(), rows, N, eps);
  }
  return std::make_tuple(dx, dw, db);
}

}  // namespace example
