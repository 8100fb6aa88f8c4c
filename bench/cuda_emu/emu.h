// Runs the reference set's CUDA kernels on the CPU, for checking their logic where no GPU is.
//
// Force-included (g++ -include emu.h) before each kernel file, whose `kernel<<<...>>>(args)`
// launches build.py has rewritten to `::emu::Launch(...).run(kernel, args)`. Each block's threads
// run as cooperative fibers, one block after another: __syncthreads and the warp shuffles are
// real barriers between them, so a missing barrier, a barrier not every thread reaches or a
// shuffle in a partial warp shows up (as a deadlock report, or as results that change with
// EMU_ORDER=forward|reverse|random, the order in which the fibers run each phase). __shared__
// arrays are function statics (one block at a time), so AddressSanitizer sees their bounds too.
// Host side: CPU tensors pass for CUDA tensors (the C shim's device queries are renamed to
// stubs here), the stream is null, and the few CUDA runtime calls are answered by emu.cpp
// (EMU_SMS multiprocessors, default 3, so that persistent grids loop). EMU_TRACE=1 prints each
// launch: the kernel as written, the function that launched it (template arguments resolved).
#pragma once

#define __global__
#define __device__
#define __host__
#define __shared__ static
#define __launch_bounds__(...)

#define aoti_torch_get_device_type emu_aoti_torch_get_device_type
#define aoti_torch_create_device_guard emu_aoti_torch_create_device_guard
#define aoti_torch_delete_device_guard emu_aoti_torch_delete_device_guard
#define aoti_torch_device_guard_set_index emu_aoti_torch_device_guard_set_index
#define aoti_torch_get_current_cuda_stream emu_aoti_torch_get_current_cuda_stream
#define torch_c10_cuda_check_msg emu_torch_c10_cuda_check_msg
#define torch_c10_cuda_free_error_msg emu_torch_c10_cuda_free_error_msg

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <math.h>  // the float overloads of fma, sqrt, ... in the global namespace
#include <cstdint>
#include <cstring>
#include <functional>
#include <type_traits>

namespace emu {

struct Thread {
  uint3 idx;
  int linear;
};

extern Thread* g_thread;  // the running fiber
extern uint3 g_block_idx;
extern dim3 g_block_dim, g_grid_dim;

void syncthreads();
void syncwarp(unsigned mask);
uint64_t shfl_bits(unsigned mask, uint64_t bits, int src_lane_or_mask, int width, int mode);
enum { kShflXor = 0, kShflDown = 1, kShflIdx = 2, kShflUp = 3 };
void launch(dim3 grid, dim3 block, size_t shared_bytes, const char* kernel, const char* caller,
            const std::function<void()>& body);
[[noreturn]] void fail(const char* what);

struct Launch {
  dim3 grid, block;
  size_t shared_bytes;
  Launch(dim3 g, dim3 b, size_t s = 0, cudaStream_t = nullptr) : grid(g), block(b), shared_bytes(s) {}
  template <typename Body>
  void run(const char* kernel, const char* caller, const Body& body) {
    launch(grid, block, shared_bytes, kernel, caller, std::function<void()>(body));
  }
};

template <typename T>
T shfl(unsigned mask, T v, int arg, int width, int mode) {
  static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "shuffle of a 1..8-byte value");
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  bits = shfl_bits(mask, bits, arg, width, mode);
  T r;
  std::memcpy(&r, &bits, sizeof(T));
  return r;
}

}  // namespace emu

#define threadIdx (::emu::g_thread->idx)
#define blockIdx (::emu::g_block_idx)
#define blockDim (::emu::g_block_dim)
#define gridDim (::emu::g_grid_dim)

inline void __syncthreads() { ::emu::syncthreads(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { ::emu::syncwarp(mask); }
template <typename T>
inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  return ::emu::shfl(mask, v, lane_mask, width, ::emu::kShflXor);
}
template <typename T>
inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return ::emu::shfl(mask, v, int(delta), width, ::emu::kShflDown);
}
template <typename T>
inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return ::emu::shfl(mask, v, int(delta), width, ::emu::kShflUp);
}
template <typename T>
inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  return ::emu::shfl(mask, v, src, width, ::emu::kShflIdx);
}

// Correctly rounded arithmetic: the host's IEEE operations (compiled with -ffp-contract=off).
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
inline float __frcp_rn(float a) { return 1.f / a; }
inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __dsqrt_rn(double a) { return std::sqrt(a); }
inline double __fma_rn(double a, double b, double c) { return std::fma(a, b, c); }
inline float rsqrtf(float a) { return 1.f / std::sqrt(a); }
inline double rsqrt(double a) { return 1.0 / std::sqrt(a); }
inline float __expf(float a) { return std::exp(a); }
inline float __fdividef(float a, float b) { return a / b; }

template <typename T>
inline T __ldg(const T* p) { return *p; }
template <typename T>
inline T __ldcs(const T* p) { return *p; }
template <typename T>
inline T __ldcg(const T* p) { return *p; }
template <typename T>
inline void __stcs(T* p, T v) { *p = v; }
template <typename T>
inline void __stcg(T* p, T v) { *p = v; }

// One block runs at a time and its fibers switch only at barriers: a plain add is atomic here.
inline float atomicAdd(float* p, float v) {
  const float old = *p;
  *p = old + v;
  return old;
}
inline double atomicAdd(double* p, double v) {
  const double old = *p;
  *p = old + v;
  return old;
}
inline __half atomicAdd(__half* p, __half v) {
  const __half old = *p;
  *p = __float2half_rn(__half2float(old) + __half2float(v));
  return old;
}
