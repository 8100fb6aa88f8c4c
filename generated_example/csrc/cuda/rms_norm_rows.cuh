// Row kernels shared by rms_norm.cu and fused_add_rms_norm.cu (user-owned).
//
// One block per row (grid-stride over rows); the sum of squares in float32 by a block
// reduction, then y = T(T(x * s) * w) with s = 1 / sqrt(ss / n + eps), the arithmetic of the
// CPU kernels (csrc/cpu/rms_norm_rows.h). A row is split into packs of W elements: 16 bytes
// (W = 16 / sizeof(T)) when the row length and the pointers allow it, else single elements.
//
// Rows of up to kPacksPerThread * kMaxCachedThreads packs (8192 float32 or 16384 16-bit values)
// are read from memory once: each thread keeps its packs (t, t + blockDim.x, ...) in registers
// from the load, through the reduction, to the store, and loads its weight packs once per block
// (a thread covers the same columns in every row). Longer rows take the two-pass kernels, which
// read the row again for the scaling. With a residual, the norm is of the unrounded float32
// sum z = x + residual (vLLM's RMSNorm.forward_native); residual gets T(z).
#pragma once

#include "cuda_utils.cuh"

namespace example {
namespace rmsnorm {

constexpr int kPacksPerThread = 4;
constexpr int kMaxThreads = 1024;
// The register-resident kernels need up to 128 registers a thread (16-bit types, ptxas -v):
// 512 threads is the most a block of them can have (64K registers per multiprocessor).
constexpr int kMaxCachedThreads = 512;

template <typename T, int W>
struct alignas(sizeof(T) * W) Pack {
  T v[W];
};

// Elements per 16-byte pack.
template <typename T>
constexpr int kVecWidth = 16 / int(sizeof(T));

__device__ __forceinline__ float inv_rms(float ss, int64_t n, float eps) {
  using cuutil::add_rn;
  using cuutil::div_rn;
  return div_rn(1.f, __fsqrt_rn(add_rn(div_rn(ss, static_cast<float>(n)), eps)));
}

// T(T(z * s) * w) for a float32 value z.
template <typename T>
__device__ __forceinline__ T scale_sum(float z, T w, float s) {
  using cuutil::mul_rn;
  return cuutil::from_f32<T>(mul_rn(cuutil::round_to<T>(mul_rn(z, s)), cuutil::to_f32(w)));
}

template <typename T>
__device__ __forceinline__ T scale(T x, T w, float s) {
  return scale_sum(cuutil::to_f32(x), w, s);
}

template <typename T, int W>
__device__ __forceinline__ float sum_squares(const Pack<T, W>& p) {
  float ss = 0.f;
#pragma unroll
  for (int k = 0; k < W; ++k) {
    const float v = cuutil::to_f32(p.v[k]);
    ss += v * v;
  }
  return ss;
}

template <typename T>
__device__ __forceinline__ float sum_f32(T x, T r) {
  return cuutil::add_rn(cuutil::to_f32(x), cuutil::to_f32(r));
}

// The sum of squares of z = x + r, unrounded.
template <typename T, int W>
__device__ __forceinline__ float sum_squares_of_sum(const Pack<T, W>& x, const Pack<T, W>& r) {
  float ss = 0.f;
#pragma unroll
  for (int k = 0; k < W; ++k) {
    const float z = sum_f32(x.v[k], r.v[k]);
    ss += z * z;
  }
  return ss;
}

// The new residual T(x + r).
template <typename T, int W>
__device__ __forceinline__ Pack<T, W> rounded_sum(const Pack<T, W>& x, const Pack<T, W>& r) {
  Pack<T, W> o;
#pragma unroll
  for (int k = 0; k < W; ++k) o.v[k] = cuutil::from_f32<T>(sum_f32(x.v[k], r.v[k]));
  return o;
}

template <typename T, int W>
__device__ __forceinline__ Pack<T, W> scale_sum_pack(const Pack<T, W>& x, const Pack<T, W>& r,
                                                     const Pack<T, W>& w, float s) {
  Pack<T, W> o;
#pragma unroll
  for (int k = 0; k < W; ++k) o.v[k] = scale_sum(sum_f32(x.v[k], r.v[k]), w.v[k], s);
  return o;
}

template <typename T, int W>
__device__ __forceinline__ Pack<T, W> scale_pack(const Pack<T, W>& x, const Pack<T, W>& w, float s) {
  Pack<T, W> o;
#pragma unroll
  for (int k = 0; k < W; ++k) o.v[k] = scale(x.v[k], w.v[k], s);
  return o;
}

// ---- rows held in registers ------------------------------------------------------------------

// out = rms_norm(x) * w. out may be x itself: every thread reads its packs of a row before the
// reduction's barriers and writes only those packs after them.
template <typename T, int W>
__global__ void __launch_bounds__(kMaxCachedThreads)
rms_norm_cached_kernel(T* out, const T* x, const T* __restrict__ w, int64_t rows, int64_t n, float eps) {
  using P = Pack<T, W>;
  constexpr int kP = kPacksPerThread;
  __shared__ float shm[32];
  const int64_t packs = n / W;
  P wv[kP];
#pragma unroll
  for (int j = 0; j < kP; ++j) {
    const int64_t i = threadIdx.x + int64_t(j) * blockDim.x;
    if (i < packs) wv[j] = reinterpret_cast<const P*>(w)[i];
  }
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const P* xr = reinterpret_cast<const P*>(x + row * n);
    P* yr = reinterpret_cast<P*>(out + row * n);
    P xv[kP];
#pragma unroll
    for (int j = 0; j < kP; ++j) {  // all loads first: kP independent loads in flight
      const int64_t i = threadIdx.x + int64_t(j) * blockDim.x;
      if (i < packs) xv[j] = xr[i];
    }
    float ss = 0.f;
#pragma unroll
    for (int j = 0; j < kP; ++j)
      if (threadIdx.x + int64_t(j) * blockDim.x < packs) ss += sum_squares(xv[j]);
    const float s = inv_rms(cuutil::block_sum(ss, shm), n, eps);
#pragma unroll
    for (int j = 0; j < kP; ++j) {
      const int64_t i = threadIdx.x + int64_t(j) * blockDim.x;
      if (i < packs) yr[i] = scale_pack(xv[j], wv[j], s);
    }
  }
}

// residual = T(x + residual); x = rms_norm(x + residual) * w.
template <typename T, int W>
__global__ void __launch_bounds__(kMaxCachedThreads)
fused_add_rms_norm_cached_kernel(T* x, T* residual, const T* __restrict__ w, int64_t rows, int64_t n, float eps) {
  using P = Pack<T, W>;
  constexpr int kP = kPacksPerThread;
  __shared__ float shm[32];
  const int64_t packs = n / W;
  P wv[kP];
#pragma unroll
  for (int j = 0; j < kP; ++j) {
    const int64_t i = threadIdx.x + int64_t(j) * blockDim.x;
    if (i < packs) wv[j] = reinterpret_cast<const P*>(w)[i];
  }
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    P* xr = reinterpret_cast<P*>(x + row * n);
    P* rr = reinterpret_cast<P*>(residual + row * n);
    P xv[kP], rv[kP];
#pragma unroll
    for (int j = 0; j < kP; ++j) {
      const int64_t i = threadIdx.x + int64_t(j) * blockDim.x;
      if (i < packs) {
        xv[j] = xr[i];
        rv[j] = rr[i];
      }
    }
    float ss = 0.f;
#pragma unroll
    for (int j = 0; j < kP; ++j) {
      const int64_t i = threadIdx.x + int64_t(j) * blockDim.x;
      if (i < packs) {
        ss += sum_squares_of_sum(xv[j], rv[j]);
        rr[i] = rounded_sum(xv[j], rv[j]);
      }
    }
    const float s = inv_rms(cuutil::block_sum(ss, shm), n, eps);
#pragma unroll
    for (int j = 0; j < kP; ++j) {
      const int64_t i = threadIdx.x + int64_t(j) * blockDim.x;
      if (i < packs) xr[i] = scale_sum_pack(xv[j], rv[j], wv[j], s);
    }
  }
}

// ---- longer rows: two passes -----------------------------------------------------------------

// out = rms_norm(x) * w (out may be x itself: each thread rereads only packs it alone writes).
template <typename T, int W>
__global__ void rms_norm_kernel(T* out, const T* x, const T* __restrict__ w, int64_t rows, int64_t n,
                                float eps) {
  using P = Pack<T, W>;
  __shared__ float shm[32];
  const int64_t packs = n / W;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const P* xr = reinterpret_cast<const P*>(x + row * n);
    P* yr = reinterpret_cast<P*>(out + row * n);
    float ss = 0.f;
    for (int64_t i = threadIdx.x; i < packs; i += blockDim.x) ss += sum_squares(xr[i]);
    const float s = inv_rms(cuutil::block_sum(ss, shm), n, eps);
    for (int64_t i = threadIdx.x; i < packs; i += blockDim.x)
      yr[i] = scale_pack(xr[i], reinterpret_cast<const P*>(w)[i], s);
  }
}

// residual = T(x + residual); x = rms_norm(x + residual) * w.
template <typename T, int W>
__global__ void fused_add_rms_norm_kernel(T* x, T* residual, const T* __restrict__ w, int64_t rows,
                                          int64_t n, float eps) {
  using P = Pack<T, W>;
  __shared__ float shm[32];
  const int64_t packs = n / W;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    P* xr = reinterpret_cast<P*>(x + row * n);
    P* rr = reinterpret_cast<P*>(residual + row * n);
    float ss = 0.f;
    for (int64_t i = threadIdx.x; i < packs; i += blockDim.x) ss += sum_squares_of_sum(xr[i], rr[i]);
    const float s = inv_rms(cuutil::block_sum(ss, shm), n, eps);
    // Each pack is read and written by the same thread.
    for (int64_t i = threadIdx.x; i < packs; i += blockDim.x) {
      const P a = xr[i], r = rr[i];
      rr[i] = rounded_sum(a, r);
      xr[i] = scale_sum_pack(a, r, reinterpret_cast<const P*>(w)[i], s);
    }
  }
}

// ---- launch shapes ---------------------------------------------------------------------------

// Threads per block for rows of `work` items per thread group: whole warps, 32..1024.
inline int row_threads(int64_t work) {
  return static_cast<int>(std::min<int64_t>(kMaxThreads, std::max<int64_t>(32, (work + 31) / 32 * 32)));
}

inline unsigned row_blocks(int64_t rows) {
  return static_cast<unsigned>(std::min<int64_t>(rows, int64_t(1) << 20));
}

// Whether a row of `packs` packs fits in the registers of one block.
inline bool row_fits_registers(int64_t packs) {
  return packs <= int64_t(kPacksPerThread) * kMaxCachedThreads;
}

// Threads for a row held in registers: kPacksPerThread packs each (at most kMaxCachedThreads
// for a row that fits).
inline int cached_row_threads(int64_t packs) {
  return row_threads((packs + kPacksPerThread - 1) / kPacksPerThread);
}

}  // namespace rmsnorm
}  // namespace example
