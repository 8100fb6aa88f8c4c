// Row kernels shared by rms_norm.cu and fused_add_rms_norm.cu (user-owned).
// One block per row (grid-stride over rows); the sum of squares in float32 by
// a block reduction, then y = T(T(x * s) * w) with s = 1 / sqrt(ss / n + eps),
// the arithmetic of the CPU kernels (csrc/cpu/rms_norm_rows.h); with a
// residual, x is the unrounded float32 sum (vLLM's RMSNorm.forward_native). 16-byte packs
// of T when the row length and the pointers allow them.
#pragma once

#include "cuda_utils.cuh"

namespace example {
namespace rmsnorm {

template <typename T>
struct alignas(16) Pack {
  static constexpr int N = 16 / sizeof(T);
  T v[N];
};

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

// out = rms_norm(x) * w (out may be x itself).
template <typename T, bool kVec>
__global__ void rms_norm_kernel(T* out, const T* x, const T* __restrict__ w, int64_t rows, int64_t n,
                                float eps) {
  using P = Pack<T>;
  constexpr int W = P::N;
  __shared__ float shm[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * n;
    T* yr = out + row * n;
    float ss = 0.f;
    if constexpr (kVec) {
      for (int64_t i = threadIdx.x; i < n / W; i += blockDim.x) {
        const P p = reinterpret_cast<const P*>(xr)[i];
#pragma unroll
        for (int k = 0; k < W; ++k) {
          const float v = cuutil::to_f32(p.v[k]);
          ss += v * v;
        }
      }
    } else {
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const float v = cuutil::to_f32(xr[i]);
        ss += v * v;
      }
    }
    const float s = inv_rms(cuutil::block_sum(ss, shm), n, eps);
    if constexpr (kVec) {
      for (int64_t i = threadIdx.x; i < n / W; i += blockDim.x) {
        const P p = reinterpret_cast<const P*>(xr)[i];
        const P q = reinterpret_cast<const P*>(w)[i];
        P o;
#pragma unroll
        for (int k = 0; k < W; ++k) o.v[k] = scale(p.v[k], q.v[k], s);
        reinterpret_cast<P*>(yr)[i] = o;
      }
    } else {
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) yr[i] = scale(xr[i], w[i], s);
    }
  }
}

// z = x + residual in float32; residual = T(z); x = T(T(z * s) * w) with s from
// the sum of squares of the unrounded z (vLLM's RMSNorm.forward_native).
template <typename T, bool kVec>
__global__ void fused_add_rms_norm_kernel(T* x, T* residual, const T* __restrict__ w, int64_t rows,
                                          int64_t n, float eps) {
  using P = Pack<T>;
  constexpr int W = P::N;
  __shared__ float shm[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    T* xr = x + row * n;
    T* rr = residual + row * n;
    float ss = 0.f;
    if constexpr (kVec) {
      for (int64_t i = threadIdx.x; i < n / W; i += blockDim.x) {
        const P a = reinterpret_cast<const P*>(xr)[i];
        const P r = reinterpret_cast<const P*>(rr)[i];
#pragma unroll
        for (int k = 0; k < W; ++k) {
          const float z = cuutil::add_rn(cuutil::to_f32(a.v[k]), cuutil::to_f32(r.v[k]));
          ss += z * z;
        }
      }
    } else {
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const float z = cuutil::add_rn(cuutil::to_f32(xr[i]), cuutil::to_f32(rr[i]));
        ss += z * z;
      }
    }
    const float s = inv_rms(cuutil::block_sum(ss, shm), n, eps);
    // Each element is read and written by the same thread.
    if constexpr (kVec) {
      for (int64_t i = threadIdx.x; i < n / W; i += blockDim.x) {
        const P a = reinterpret_cast<const P*>(xr)[i];
        P r = reinterpret_cast<const P*>(rr)[i];
        const P q = reinterpret_cast<const P*>(w)[i];
        P o;
#pragma unroll
        for (int k = 0; k < W; ++k) {
          const float z = cuutil::add_rn(cuutil::to_f32(a.v[k]), cuutil::to_f32(r.v[k]));
          r.v[k] = cuutil::from_f32<T>(z);
          o.v[k] = scale_sum(z, q.v[k], s);
        }
        reinterpret_cast<P*>(rr)[i] = r;
        reinterpret_cast<P*>(xr)[i] = o;
      }
    } else {
      for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const float z = cuutil::add_rn(cuutil::to_f32(xr[i]), cuutil::to_f32(rr[i]));
        rr[i] = cuutil::from_f32<T>(z);
        xr[i] = scale_sum(z, w[i], s);
      }
    }
  }
}

// Threads per block for rows of `work` items (packs or elements): whole warps, 32..1024.
inline int row_threads(int64_t work) {
  return static_cast<int>(std::min<int64_t>(1024, std::max<int64_t>(32, (work + 31) / 32 * 32)));
}

inline unsigned row_blocks(int64_t rows) {
  return static_cast<unsigned>(std::min<int64_t>(rows, int64_t(1) << 20));
}

}  // namespace rmsnorm
}  // namespace example
