// Hand-written CUDA kernel for example::layer_norm (user-owned), last dim.
// One block per row (grid-stride over rows): mean and centred variance by two
// block reductions (warp shuffles + one shared-memory hop), then the
// normalised row is written. 16-byte (float4 / double2) accesses when N and
// the pointers allow it.
//
// Rows of up to kPacksPerThread * kMaxCachedThreads 16-byte packs (8192 float32,
// 4096 float64 values; as many single elements when packs are ruled out) are
// read from memory once: each thread keeps its packs (t, t + blockDim.x, ...) in
// registers for the mean, the variance and the output, and loads its weight and
// bias packs once per block. Longer rows take ln_fwd_kernel, whose second and
// third passes reread the row (from L1/L2).
#include "../layer_norm.h"
#include "cuda_utils.cuh"

namespace example {
namespace {

constexpr int kPacksPerThread = 4;
// The register-resident kernel needs up to 128 registers a thread: at most 512 threads a block.
constexpr int kMaxCachedThreads = 512;

template <typename T, int W>
struct alignas(sizeof(T) * W) Pack {
  T v[W];
};

template <typename T, int W>
__global__ void __launch_bounds__(kMaxCachedThreads)
ln_fwd_cached_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b,
                     T* __restrict__ y, int64_t rows, int64_t N, T eps) {
  using P = Pack<T, W>;
  constexpr int kP = kPacksPerThread;
  __shared__ T shm[32];
  const int64_t packs = N / W;
  P wv[kP], bv[kP];
#pragma unroll
  for (int j = 0; j < kP; ++j) {
    const int64_t i = threadIdx.x + int64_t(j) * blockDim.x;
    if (i < packs) {
      wv[j] = reinterpret_cast<const P*>(w)[i];
      bv[j] = reinterpret_cast<const P*>(b)[i];
    }
  }
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const P* xr = reinterpret_cast<const P*>(x + row * N);
    P* yr = reinterpret_cast<P*>(y + row * N);
    P xv[kP];
#pragma unroll
    for (int j = 0; j < kP; ++j) {  // all loads first: kP independent loads in flight
      const int64_t i = threadIdx.x + int64_t(j) * blockDim.x;
      if (i < packs) xv[j] = xr[i];
    }
    T s = 0;
#pragma unroll
    for (int j = 0; j < kP; ++j)
      if (threadIdx.x + int64_t(j) * blockDim.x < packs)
#pragma unroll
        for (int k = 0; k < W; ++k) s += xv[j].v[k];
    const T mean = cuutil::block_sum(s, shm) / T(N);
    T q = 0;
#pragma unroll
    for (int j = 0; j < kP; ++j)
      if (threadIdx.x + int64_t(j) * blockDim.x < packs)
#pragma unroll
        for (int k = 0; k < W; ++k) {
          const T d = xv[j].v[k] - mean;
          q += d * d;
        }
    const T rstd = T(1) / sqrt(cuutil::block_sum(q, shm) / T(N) + eps);
#pragma unroll
    for (int j = 0; j < kP; ++j) {
      const int64_t i = threadIdx.x + int64_t(j) * blockDim.x;
      if (i < packs) {
        P o;
#pragma unroll
        for (int k = 0; k < W; ++k) o.v[k] = (xv[j].v[k] - mean) * rstd * wv[j].v[k] + bv[j].v[k];
        yr[i] = o;
      }
    }
  }
}

template <typename T, bool kVec>
__global__ void ln_fwd_kernel(const T* __restrict__ x, const T* __restrict__ w,
                              const T* __restrict__ b, T* __restrict__ y, int64_t rows,
                              int64_t N, T eps) {
  using V = cuutil::Vec16<T>;
  constexpr int W = V::N;
  __shared__ T shm[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * N;
    T* yr = y + row * N;
    T s = 0;
    if constexpr (kVec) {
      for (int64_t i = threadIdx.x; i < N / W; i += blockDim.x) {
        const V v = reinterpret_cast<const V*>(xr)[i];
#pragma unroll
        for (int k = 0; k < W; ++k) s += v.v[k];
      }
    } else {
      for (int64_t i = threadIdx.x; i < N; i += blockDim.x) s += xr[i];
    }
    const T mean = cuutil::block_sum(s, shm) / T(N);
    T q = 0;
    if constexpr (kVec) {
      for (int64_t i = threadIdx.x; i < N / W; i += blockDim.x) {
        const V v = reinterpret_cast<const V*>(xr)[i];
#pragma unroll
        for (int k = 0; k < W; ++k) {
          const T d = v.v[k] - mean;
          q += d * d;
        }
      }
    } else {
      for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
        const T d = xr[i] - mean;
        q += d * d;
      }
    }
    const T rstd = T(1) / sqrt(cuutil::block_sum(q, shm) / T(N) + eps);
    if constexpr (kVec) {
      for (int64_t i = threadIdx.x; i < N / W; i += blockDim.x) {
        const V v = reinterpret_cast<const V*>(xr)[i];
        const V wv = reinterpret_cast<const V*>(w)[i];
        const V bv = reinterpret_cast<const V*>(b)[i];
        V o;
#pragma unroll
        for (int k = 0; k < W; ++k) o.v[k] = (v.v[k] - mean) * rstd * wv.v[k] + bv.v[k];
        reinterpret_cast<V*>(yr)[i] = o;
      }
    } else {
      for (int64_t i = threadIdx.x; i < N; i += blockDim.x)
        yr[i] = (xr[i] - mean) * rstd * w[i] + b[i];
    }
  }
}

template <typename T>
void launch(const T* x, const T* w, const T* b, T* y, int64_t rows, int64_t N, double eps,
            cudaStream_t stream) {
  constexpr int W = cuutil::Vec16<T>::N;
  const bool vec = N % W == 0 && cuutil::aligned16(x) && cuutil::aligned16(w) &&
                   cuutil::aligned16(b) && cuutil::aligned16(y);
  const int64_t per_row = vec ? N / W : N;
  const unsigned grid = unsigned(std::min<int64_t>(rows, int64_t(1) << 20));
  if (per_row <= int64_t(kPacksPerThread) * kMaxCachedThreads) {
    const int64_t per_thread = (per_row + kPacksPerThread - 1) / kPacksPerThread;
    const int threads = int(std::max<int64_t>(32, (per_thread + 31) / 32 * 32));  // <= 512
    if (vec)
      ln_fwd_cached_kernel<T, W><<<grid, threads, 0, stream>>>(x, w, b, y, rows, N, T(eps));
    else
      ln_fwd_cached_kernel<T, 1><<<grid, threads, 0, stream>>>(x, w, b, y, rows, N, T(eps));
  } else {
    const int threads = int(std::min<int64_t>(512, (per_row + 31) / 32 * 32));
    if (vec)
      ln_fwd_kernel<T, true><<<grid, threads, 0, stream>>>(x, w, b, y, rows, N, T(eps));
    else
      ln_fwd_kernel<T, false><<<grid, threads, 0, stream>>>(x, w, b, y, rows, N, T(eps));
  }
  STD_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

torch::stable::Tensor layer_norm_cuda(const torch::stable::Tensor& x_,
                                      const torch::stable::Tensor& weight_,
                                      const torch::stable::Tensor& bias_, double eps) {
  constexpr const char* op = "example::layer_norm";
  cuutil::check_cuda(x_, op, "x");
  cuutil::check_cuda(weight_, op, "weight");
  cuutil::check_cuda(bias_, op, "bias");
  cuutil::check_same_device(x_, weight_, op, "x", "weight");
  cuutil::check_same_device(x_, bias_, op, "x", "bias");
  cuutil::check_float_dtype(x_, op, "x");
  cuutil::check_same_dtype(x_, weight_, op, "x", "weight");
  cuutil::check_same_dtype(x_, bias_, op, "x", "bias");
  STD_TORCH_CHECK(x_.dim() >= 1, op, ": expected 'x' to have at least 1 dimension");
  const int64_t N = x_.size(x_.dim() - 1);
  STD_TORCH_CHECK(weight_.dim() == 1 && weight_.size(0) == N, op,
                  ": expected 'weight' of shape (", N, ",) (the last dim of x)");
  STD_TORCH_CHECK(bias_.dim() == 1 && bias_.size(0) == N, op,
                  ": expected 'bias' of shape (", N, ",) (the last dim of x)");
  STD_TORCH_CHECK(eps >= 0, op, ": expected eps >= 0, got ", eps);
  torch::stable::accelerator::DeviceGuard guard(x_.get_device_index());
  const torch::stable::Tensor x = cuutil::contig(x_);
  const torch::stable::Tensor w = cuutil::contig(weight_);
  const torch::stable::Tensor b = cuutil::contig(bias_);
  torch::stable::Tensor y = cuutil::empty_contig_like(x);
  if (x.numel() == 0) return y;
  const int64_t rows = x.numel() / N;
  cudaStream_t stream = cuutil::current_stream(x.get_device_index());
  if (x.scalar_type() == cuutil::ScalarType::Float) {
    launch(x.const_data_ptr<float>(), w.const_data_ptr<float>(), b.const_data_ptr<float>(),
           y.mutable_data_ptr<float>(), rows, N, eps, stream);
  } else {
    launch(x.const_data_ptr<double>(), w.const_data_ptr<double>(), b.const_data_ptr<double>(),
           y.mutable_data_ptr<double>(), rows, N, eps, stream);
  }
  return y;
}

}  // namespace example
