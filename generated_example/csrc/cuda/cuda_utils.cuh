// Shared helpers for the hand-written CUDA kernels (user-owned, not generated).
//
// Stable ABI (TORCH_TARGET_VERSION 2.10) notes:
// - the current cudaStream_t comes from the C shim
//   aoti_torch_get_current_cuda_stream(), which shim.h only declares when
//   USE_CUDA is defined: compile .cu files with -DUSE_CUDA.
//   (torch::stable::accelerator::Stream::nativeHandle() needs target >= 2.13.)
// - device guard: torch::stable::accelerator::DeviceGuard (2.9+).
// - launch/runtime errors: STD_CUDA_CHECK / STD_CUDA_KERNEL_LAUNCH_CHECK (2.10+).
//
// Note [Rounded device arithmetic]
// nvcc contracts a*b + c into one FMA by default. Where a kernel must give
// the CPU kernel's (and the reference's) bits, e.g. the IoU compared with the
// nms threshold, bilinear weights, the rotation of fp16/bf16 values, it uses
// the explicitly rounded mul/add/sub/div below, which nvcc never fuses.
#pragma once

#ifndef USE_CUDA
#error "Compile the CUDA kernels with -DUSE_CUDA (the stable C shim only declares aoti_torch_get_current_cuda_stream under USE_CUDA)."
#endif

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/c/shim.h>
#include <torch/csrc/stable/macros.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>
#include <torch/headeronly/util/shim_utils.h>

#include <algorithm>
#include <cstdint>

namespace example {
namespace cuutil {

using torch::headeronly::ScalarType;
using torch::stable::Tensor;

inline const char* dtype_name(ScalarType st) { return torch::headeronly::toString(st); }

inline void check_cuda(const Tensor& t, const char* op, const char* name) {
  STD_TORCH_CHECK(t.is_cuda(), op, ": expected '", name, "' to be a CUDA tensor");
}

inline void check_same_device(const Tensor& a, const Tensor& b, const char* op,
                              const char* na, const char* nb) {
  STD_TORCH_CHECK(a.get_device_index() == b.get_device_index(), op, ": expected '", na,
                  "' and '", nb, "' on the same CUDA device, got cuda:",
                  a.get_device_index(), " and cuda:", b.get_device_index());
}

inline void check_float_dtype(const Tensor& t, const char* op, const char* name) {
  const ScalarType st = t.scalar_type();
  STD_TORCH_CHECK(st == ScalarType::Float || st == ScalarType::Double, op,
                  ": unsupported dtype ", torch::headeronly::toString(st), " for '", name,
                  "'; supported dtypes are Float (float32) and Double (float64)");
}

inline void check_llm_dtype(const Tensor& t, const char* op, const char* name) {
  const ScalarType st = t.scalar_type();
  STD_TORCH_CHECK(st == ScalarType::Float || st == ScalarType::Half || st == ScalarType::BFloat16,
                  op, ": unsupported dtype ", dtype_name(st), " for '", name,
                  "'; supported dtypes are float32, float16 and bfloat16");
}

inline void check_same_dtype(const Tensor& a, const Tensor& b, const char* op,
                             const char* na, const char* nb) {
  STD_TORCH_CHECK(a.scalar_type() == b.scalar_type(), op, ": expected '", na, "' and '",
                  nb, "' to have the same dtype, got ",
                  torch::headeronly::toString(a.scalar_type()), " and ",
                  torch::headeronly::toString(b.scalar_type()));
}

inline bool same_sizes(const Tensor& a, const Tensor& b) {
  const auto sa = a.sizes();
  const auto sb = b.sizes();
  if (sa.size() != sb.size()) return false;
  for (size_t i = 0; i < sa.size(); ++i)
    if (sa[i] != sb[i]) return false;
  return true;
}

inline void check_same_sizes(const Tensor& a, const Tensor& b, const char* op,
                             const char* na, const char* nb) {
  STD_TORCH_CHECK(same_sizes(a, b), op, ": expected '", na, "' and '", nb,
                  "' to have the same shape (dims ", a.dim(), " vs ", b.dim(), ", numel ",
                  a.numel(), " vs ", b.numel(), ")");
}

inline Tensor contig(const Tensor& t) {
  return t.is_contiguous() ? t : torch::stable::contiguous(t);
}

// A mutated argument is computed in place when contiguous, else in a contiguous
// copy that write_back() copies into it (same contract as the CPU kernels).
inline Tensor mutable_contig(const Tensor& t) { return contig(t); }

inline void write_back(const Tensor& target, const Tensor& computed) {
  if (computed.numel() > 0 && computed.data_ptr() != target.data_ptr()) {
    Tensor dst = target;
    torch::stable::copy_(dst, computed);
  }
}

inline Tensor empty_contig_like(const Tensor& t) {
  return torch::stable::new_empty(t, t.sizes());
}

// The caller's current stream on `device_index` (never the legacy default
// stream unless that is what the caller made current).
inline cudaStream_t current_stream(int32_t device_index) {
  void* stream = nullptr;
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_current_cuda_stream(device_index, &stream));
  return static_cast<cudaStream_t>(stream);
}

// Multiprocessors of the current device: sizes persistent grids and tile choices.
inline int multiprocessor_count() {
  int device = 0, sms = 0;
  STD_CUDA_CHECK(cudaGetDevice(&device));
  STD_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

inline bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

// Grid for a grid-stride loop over `work` items with `threads` per block
// (capped: the loop covers the rest).
inline unsigned grid_for(int64_t work, int threads, int64_t cap = int64_t(1) << 16) {
  const int64_t blocks = (work + threads - 1) / threads;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(blocks, cap)));
}

// ---- element types: the CUDA twin of each torch dtype ------------------------------
template <typename F>
inline void dispatch_llm_dtype(ScalarType st, F&& f) {
  switch (st) {
    case ScalarType::Float:
      f(float{});
      break;
    case ScalarType::Half:
      f(__half{});
      break;
    case ScalarType::BFloat16:
      f(__nv_bfloat16{});
      break;
    default:
      STD_TORCH_CHECK(false, "unsupported dtype ", dtype_name(st));
  }
}

__device__ __forceinline__ float to_f32(float v) { return v; }
__device__ __forceinline__ float to_f32(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) { return v; }
template <>
__device__ __forceinline__ __half from_f32<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// v rounded to T and back: the result of one operation in dtype T.
template <typename T>
__device__ __forceinline__ float round_to(float v) {
  return to_f32(from_f32<T>(v));
}

// ---- explicitly rounded arithmetic (Note [Rounded device arithmetic]) ----------------

__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add_rn(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float sub_rn(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ double sub_rn(double a, double b) { return __dsub_rn(a, b); }
__device__ __forceinline__ float div_rn(float a, float b) { return __fdiv_rn(a, b); }
__device__ __forceinline__ double div_rn(double a, double b) { return __ddiv_rn(a, b); }


// ---- reductions and elementwise maps ----------------------------------------
// 16-byte vector of T (float4 / double2) for coalesced 128-bit accesses.
template <typename T>
struct alignas(16) Vec16 {
  static constexpr int N = 16 / sizeof(T);
  T v[N];
};

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// Sum over the block; every thread gets the result. `shm` needs 32 slots.
// Safe to call repeatedly with the same `shm` (leading __syncthreads()).
template <typename T>
__device__ __forceinline__ T block_sum(T v, T* shm) {
  const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
  const int nwarps = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) shm[wid] = v;
  __syncthreads();
  T r = lane < nwarps ? shm[lane] : T(0);
  return warp_sum(r);
}

// Grid-stride elementwise map over n elements: out[i] = f(in0[i], in1[i]).
// Vectorised (16-byte) body when every pointer is 16-byte aligned.
template <typename T, bool kVec, typename F>
__global__ void map2_kernel(const T* __restrict__ a, const T* __restrict__ b,
                            T* __restrict__ o, int64_t n, F f) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if constexpr (kVec) {
    using V = Vec16<T>;
    constexpr int W = V::N;
    const int64_t nv = n / W;
    const V* av = reinterpret_cast<const V*>(a);
    const V* bv = reinterpret_cast<const V*>(b);
    V* ov = reinterpret_cast<V*>(o);
    for (int64_t i = tid; i < nv; i += stride) {
      const V x = av[i], y = bv[i];
      V r;
#pragma unroll
      for (int k = 0; k < W; ++k) r.v[k] = f(x.v[k], y.v[k]);
      ov[i] = r;
    }
    for (int64_t i = nv * W + tid; i < n; i += stride) o[i] = f(a[i], b[i]);
  } else {
    for (int64_t i = tid; i < n; i += stride) o[i] = f(a[i], b[i]);
  }
}

// Launch map2_kernel on the current stream of a's device; a/b/o contiguous.
template <typename T, typename F>
void launch_map2(const T* a, const T* b, T* o, int64_t n, F f, cudaStream_t stream) {
  if (n == 0) return;
  constexpr int kThreads = 256;
  const bool vec = aligned16(a) && aligned16(b) && aligned16(o);
  if (vec) {
    const unsigned grid = grid_for(n / Vec16<T>::N + 1, kThreads);
    map2_kernel<T, true><<<grid, kThreads, 0, stream>>>(a, b, o, n, f);
  } else {
    const unsigned grid = grid_for(n, kThreads);
    map2_kernel<T, false><<<grid, kThreads, 0, stream>>>(a, b, o, n, f);
  }
  STD_CUDA_KERNEL_LAUNCH_CHECK();
}

// Unary variant: out[i] = f(in[i]).
template <typename T, bool kVec, typename F>
__global__ void map1_kernel(const T* __restrict__ a, T* __restrict__ o, int64_t n, F f) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if constexpr (kVec) {
    using V = Vec16<T>;
    constexpr int W = V::N;
    const int64_t nv = n / W;
    const V* av = reinterpret_cast<const V*>(a);
    V* ov = reinterpret_cast<V*>(o);
    for (int64_t i = tid; i < nv; i += stride) {
      const V x = av[i];
      V r;
#pragma unroll
      for (int k = 0; k < W; ++k) r.v[k] = f(x.v[k]);
      ov[i] = r;
    }
    for (int64_t i = nv * W + tid; i < n; i += stride) o[i] = f(a[i]);
  } else {
    for (int64_t i = tid; i < n; i += stride) o[i] = f(a[i]);
  }
}

template <typename T, typename F>
void launch_map1(const T* a, T* o, int64_t n, F f, cudaStream_t stream) {
  if (n == 0) return;
  constexpr int kThreads = 256;
  if (aligned16(a) && aligned16(o)) {
    const unsigned grid = grid_for(n / Vec16<T>::N + 1, kThreads);
    map1_kernel<T, true><<<grid, kThreads, 0, stream>>>(a, o, n, f);
  } else {
    const unsigned grid = grid_for(n, kThreads);
    map1_kernel<T, false><<<grid, kThreads, 0, stream>>>(a, o, n, f);
  }
  STD_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace cuutil
}  // namespace example
