// AVX2 vocabulary for the roi_align kernels: one vector holds one value of
// L consecutive channels (L = 8 floats or 4 doubles), read from L feature
// planes H * W apart with one gather. Overloads by element type keep the
// kernels single templates.
#pragma once

#include "roi_align_common.h"

#if EXAMPLE_X86
namespace example {
namespace roialign {

template <typename T>
struct Lanes;
template <>
struct Lanes<float> {
  static constexpr int L = 8;
};
template <>
struct Lanes<double> {
  static constexpr int L = 4;
};

EXAMPLE_AVX2 inline __m256 vset1(float v) { return _mm256_set1_ps(v); }
EXAMPLE_AVX2 inline __m256d vset1(double v) { return _mm256_set1_pd(v); }
EXAMPLE_AVX2 inline __m256 vzero(const float*) { return _mm256_setzero_ps(); }
EXAMPLE_AVX2 inline __m256d vzero(const double*) { return _mm256_setzero_pd(); }
EXAMPLE_AVX2 inline __m256 vadd(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
EXAMPLE_AVX2 inline __m256d vadd(__m256d a, __m256d b) { return _mm256_add_pd(a, b); }
EXAMPLE_AVX2 inline __m256 vmul(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
EXAMPLE_AVX2 inline __m256d vmul(__m256d a, __m256d b) { return _mm256_mul_pd(a, b); }
EXAMPLE_AVX2 inline __m256 vdiv(__m256 a, __m256 b) { return _mm256_div_ps(a, b); }
EXAMPLE_AVX2 inline __m256d vdiv(__m256d a, __m256d b) { return _mm256_div_pd(a, b); }
EXAMPLE_AVX2 inline __m256 vload(const float* p) { return _mm256_loadu_ps(p); }
EXAMPLE_AVX2 inline __m256d vload(const double* p) { return _mm256_loadu_pd(p); }
EXAMPLE_AVX2 inline void vstore(float* p, __m256 v) { _mm256_storeu_ps(p, v); }
EXAMPLE_AVX2 inline void vstore(double* p, __m256d v) { _mm256_storeu_pd(p, v); }

// Element offsets of the L channel planes: (0, hw, 2 hw, ...).
EXAMPLE_AVX2 inline __m256i plane_offsets(const float*, int32_t hw) {
  return _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(hw));
}
EXAMPLE_AVX2 inline __m128i plane_offsets(const double*, int32_t hw) {
  return _mm_mullo_epi32(_mm_setr_epi32(0, 1, 2, 3), _mm_set1_epi32(hw));
}
// (the masked form with an explicit zero source: GCC's unmasked one warns under -Wall)
EXAMPLE_AVX2 inline __m256 vgather(const float* base, __m256i offsets) {
  const __m256 all = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
  return _mm256_mask_i32gather_ps(_mm256_setzero_ps(), base, offsets, all, 4);
}
EXAMPLE_AVX2 inline __m256d vgather(const double* base, __m128i offsets) {
  const __m256d all = _mm256_castsi256_pd(_mm256_set1_epi64x(-1));
  return _mm256_mask_i32gather_pd(_mm256_setzero_pd(), base, offsets, all, 8);
}

// L values p[0], p[stride], p[2 stride], ... (one per channel).
EXAMPLE_AVX2 inline __m256 vload_strided(const float* p, int64_t stride) {
  return _mm256_setr_ps(p[0], p[stride], p[2 * stride], p[3 * stride], p[4 * stride], p[5 * stride],
                        p[6 * stride], p[7 * stride]);
}
EXAMPLE_AVX2 inline __m256d vload_strided(const double* p, int64_t stride) {
  return _mm256_setr_pd(p[0], p[stride], p[2 * stride], p[3 * stride]);
}

// In-register transposes: r[i] holds row i; afterwards r[j] holds column j.
EXAMPLE_AVX2 inline void transpose(__m256 r[8]) {
  __m256 t[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  __m256 u[8];
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}
EXAMPLE_AVX2 inline void transpose(__m256d r[4]) {
  const __m256d t0 = _mm256_unpacklo_pd(r[0], r[1]), t1 = _mm256_unpackhi_pd(r[0], r[1]);
  const __m256d t2 = _mm256_unpacklo_pd(r[2], r[3]), t3 = _mm256_unpackhi_pd(r[2], r[3]);
  r[0] = _mm256_permute2f128_pd(t0, t2, 0x20);
  r[1] = _mm256_permute2f128_pd(t1, t3, 0x20);
  r[2] = _mm256_permute2f128_pd(t0, t2, 0x31);
  r[3] = _mm256_permute2f128_pd(t1, t3, 0x31);
}

// pack_channels / unpack_channels (roi_align_common.h) for whole L x L tiles;
// return the number of pixels done per image (the caller does the rest).
template <typename T>
EXAMPLE_AVX2 int64_t pack_tiles(const T* x, int64_t batch, int64_t channels, int64_t hw, int64_t c0, int64_t cb,
                                T* buf) {
  constexpr int L = Lanes<T>::L;
  using V = decltype(vzero(x));
  const int64_t full = hw / L * L;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t c = 0; c + L <= cb; c += L) {
      const T* plane = x + (b * channels + c0 + c) * hw;
      T* o = buf + b * hw * cb + c;
      for (int64_t p = 0; p < full; p += L) {
        V r[L];
        for (int i = 0; i < L; ++i) r[i] = vload(plane + i * hw + p);
        transpose(r);
        for (int j = 0; j < L; ++j) vstore(o + (p + j) * cb, r[j]);
      }
    }
  return full;
}

template <typename T>
EXAMPLE_AVX2 int64_t unpack_tiles(const T* buf, int64_t batch, int64_t channels, int64_t hw, int64_t c0,
                                  int64_t cb, T* x) {
  constexpr int L = Lanes<T>::L;
  using V = decltype(vzero(x));
  const int64_t full = hw / L * L;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t c = 0; c + L <= cb; c += L) {
      T* plane = x + (b * channels + c0 + c) * hw;
      const T* in = buf + b * hw * cb + c;
      for (int64_t p = 0; p < full; p += L) {
        V r[L];
        for (int j = 0; j < L; ++j) r[j] = vload(in + (p + j) * cb);
        transpose(r);
        for (int i = 0; i < L; ++i) vstore(plane + i * hw + p, r[i]);
      }
    }
  return full;
}

}  // namespace roialign
}  // namespace example
#endif  // EXAMPLE_X86

namespace example {
namespace roialign {

// Channels [c0, c0 + cb) of the N images into / out of the channels-last block
// buffer [N, H * W, cb]: AVX2 tile transposes where whole tiles fit, scalar
// copies for the rest.
template <typename T>
inline void pack_block(const T* x, int64_t batch, int64_t channels, int64_t hw, int64_t c0, int64_t cb, T* buf,
                       bool simd) {
  int64_t pixels = 0, lanes = 0;
#if EXAMPLE_X86
  if (simd) {
    pixels = pack_tiles(x, batch, channels, hw, c0, cb, buf);
    lanes = cb / Lanes<T>::L * Lanes<T>::L;
  }
#endif
  pack_channels(x, batch, channels, hw, c0, cb, buf, pixels, lanes);
}

template <typename T>
inline void unpack_block(const T* buf, int64_t batch, int64_t channels, int64_t hw, int64_t c0, int64_t cb, T* x,
                         bool simd) {
  int64_t pixels = 0, lanes = 0;
#if EXAMPLE_X86
  if (simd) {
    pixels = unpack_tiles(buf, batch, channels, hw, c0, cb, x);
    lanes = cb / Lanes<T>::L * Lanes<T>::L;
  }
#endif
  unpack_channels(buf, batch, channels, hw, c0, cb, x, pixels, lanes);
}

}  // namespace roialign
}  // namespace example
