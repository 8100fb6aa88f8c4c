// Device twin of csrc/cpu/roi_align_common.h (user-owned): torchvision's roi
// geometry and bilinear taps, with explicitly rounded arithmetic (Note
// [Rounded device arithmetic]) so both devices sample the same points with
// the same weights. float16 tensors compute as c10::Half does (torchvision's
// kernels for float16): each operation in float, its result rounded to
// float16 (Half16 below).
//
// The device cannot raise: a roi whose batch index is outside [0, N), or whose
// adaptive grid is not finite or above 2^20 per axis, samples nothing (the
// forward writes 0, the backward adds nothing); the CPU kernels raise instead.
#pragma once

#include "cuda_utils.cuh"

#include <type_traits>

namespace example {
namespace roialign {

// The host checks sampling_ratio before any launch, as the CPU kernels do:
// a grid above 2^20 per axis would loop for ages per bin (and overflow the
// int64 grid size from 2^31 on).
inline void check_sampling_ratio(int64_t sampling_ratio, const char* op) {
  STD_TORCH_CHECK(sampling_ratio <= (int64_t(1) << 20), op, ": sampling_ratio ", sampling_ratio,
                  " asks for more than 2^20 samples per bin along one axis; pass a smaller one (<= 0: adaptive)");
}

// A float16 value held in a float; every operation on it rounds its result to
// float16, as c10::Half arithmetic does. Implicit conversions from and to
// float give the code below torchvision's mixed expressions (Half vs int,
// double) unchanged.
struct Half16 {
  float v;
  Half16() = default;
  __host__ __device__ __forceinline__ Half16(float f) : v(__half2float(__float2half_rn(f))) {}
  __host__ __device__ __forceinline__ explicit Half16(__half h) : v(__half2float(h)) {}
  __host__ __device__ __forceinline__ operator float() const { return v; }
};

// The float and double overloads join the Half16 ones: a name declared in this namespace hides
// cuutil's from code here (and from a kernel's `using roialign::mul_rn`), which would otherwise
// round float and double arithmetic to float16 through Half16's implicit conversion.
using cuutil::add_rn;
using cuutil::div_rn;
using cuutil::mul_rn;
using cuutil::sub_rn;

__device__ __forceinline__ Half16 mul_rn(Half16 a, Half16 b) { return Half16(__fmul_rn(a.v, b.v)); }
__device__ __forceinline__ Half16 add_rn(Half16 a, Half16 b) { return Half16(__fadd_rn(a.v, b.v)); }
__device__ __forceinline__ Half16 sub_rn(Half16 a, Half16 b) { return Half16(__fsub_rn(a.v, b.v)); }
__device__ __forceinline__ Half16 div_rn(Half16 a, Half16 b) { return Half16(__fdiv_rn(a.v, b.v)); }

// The type a kernel computes in for tensors of element type T.
template <typename T>
struct Compute {
  using type = T;
};
template <>
struct Compute<__half> {
  using type = Half16;
};

__device__ __forceinline__ float load(const float* p) { return *p; }
__device__ __forceinline__ double load(const double* p) { return *p; }
__device__ __forceinline__ Half16 load(const __half* p) { return Half16(*p); }

__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(double* p, double v) { *p = v; }
__device__ __forceinline__ void store(__half* p, Half16 v) { *p = __float2half_rn(v.v); }

__device__ __forceinline__ void atomic_add(float* p, float v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(double* p, double v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(__half* p, Half16 v) { atomicAdd(p, __float2half_rn(v.v)); }

template <typename T>
struct Geometry {
  int64_t batch;
  T start_h, start_w, bin_h, bin_w;
  int64_t grid_h, grid_w;  // samples per bin along y / x; <= 0: none
};

template <typename T>
__device__ __forceinline__ int64_t adaptive_grid(T value) {
  using F = std::conditional_t<std::is_same_v<T, Half16>, float, T>;  // ceil(c10::Half) is a float ceil
  const F v = value;
  if (!(v == v)) return 0;
  const F c = ceil(v);
  if (c >= F(1 << 20)) return 0;
  return c < F(-(1 << 20)) ? -(1 << 20) : static_cast<int64_t>(c);
}

template <typename T, typename S>
__device__ __forceinline__ Geometry<T> geometry(const S* roi, T scale, int64_t pooled_height,
                                                int64_t pooled_width, int64_t sampling_ratio, bool aligned,
                                                int64_t batch_size) {
  using namespace cuutil;
  Geometry<T> g;
  const T b = load(roi);
  const bool valid = b > T(-1) && b < static_cast<T>(batch_size);
  g.batch = valid ? static_cast<int64_t>(b) : 0;
  const T offset = aligned ? T(0.5) : T(0.0);
  g.start_w = sub_rn(mul_rn(load(roi + 1), scale), offset);
  g.start_h = sub_rn(mul_rn(load(roi + 2), scale), offset);
  T roi_w = sub_rn(sub_rn(mul_rn(load(roi + 3), scale), offset), g.start_w);
  T roi_h = sub_rn(sub_rn(mul_rn(load(roi + 4), scale), offset), g.start_h);
  if (!aligned) {  // std::max(size, 1)
    roi_w = roi_w < T(1) ? T(1) : roi_w;
    roi_h = roi_h < T(1) ? T(1) : roi_h;
  }
  g.bin_h = div_rn(roi_h, static_cast<T>(pooled_height));
  g.bin_w = div_rn(roi_w, static_cast<T>(pooled_width));
  g.grid_h = sampling_ratio > 0 ? sampling_ratio : adaptive_grid(g.bin_h);
  g.grid_w = sampling_ratio > 0 ? sampling_ratio : adaptive_grid(g.bin_w);
  if (!valid) g.grid_h = g.grid_w = 0;
  return g;
}

// start + p * bin + T(i + 0.5f) * bin / grid, in that order.
template <typename T>
__device__ __forceinline__ T sample_coord(T start, int64_t p, T bin, int64_t i, int64_t grid) {
  using namespace cuutil;
  return add_rn(add_rn(start, mul_rn(static_cast<T>(p), bin)),
                div_rn(mul_rn(static_cast<T>(static_cast<float>(i) + .5f), bin), static_cast<T>(grid)));
}

// The four taps of the sample at (y, x); false (zero weights, offsets 0) when it is empty.
template <typename T>
__device__ __forceinline__ bool bilinear_tap(T y, T x, int64_t height, int64_t width, int64_t pos[4], T w[4]) {
  using namespace cuutil;
  if (!(y >= -1.0 && y <= height && x >= -1.0 && x <= width)) {
    for (int q = 0; q < 4; ++q) {
      pos[q] = 0;
      w[q] = 0;
    }
    return false;
  }
  if (y <= 0) y = 0;
  if (x <= 0) x = 0;
  int64_t y_low = static_cast<int64_t>(y), x_low = static_cast<int64_t>(x);
  int64_t y_high, x_high;
  if (y_low >= height - 1) {
    y_high = y_low = height - 1;
    y = static_cast<T>(y_low);
  } else {
    y_high = y_low + 1;
  }
  if (x_low >= width - 1) {
    x_high = x_low = width - 1;
    x = static_cast<T>(x_low);
  } else {
    x_high = x_low + 1;
  }
  const T ly = sub_rn(y, static_cast<T>(y_low)), lx = sub_rn(x, static_cast<T>(x_low));
  const T hy = sub_rn(T(1), ly), hx = sub_rn(T(1), lx);
  w[0] = mul_rn(hy, hx);
  w[1] = mul_rn(hy, lx);
  w[2] = mul_rn(ly, hx);
  w[3] = mul_rn(ly, lx);
  pos[0] = y_low * width + x_low;
  pos[1] = y_low * width + x_high;
  pos[2] = y_high * width + x_low;
  pos[3] = y_high * width + x_high;
  return true;
}

// ---- host side -------------------------------------------------------------------

// The dtypes torchvision's CUDA roi_align kernels accept (not bfloat16).
inline void check_roi_dtype(const cuutil::Tensor& t, const char* op, const char* name) {
  const cuutil::ScalarType st = t.scalar_type();
  STD_TORCH_CHECK(st == cuutil::ScalarType::Float || st == cuutil::ScalarType::Double ||
                      st == cuutil::ScalarType::Half,
                  op, ": unsupported dtype ", cuutil::dtype_name(st), " for '", name,
                  "'; supported dtypes are float16, float32 and float64");
}

// Calls f(S{}) with S the element type of a float32 / float64 / float16 tensor.
template <typename F>
inline void dispatch_roi_dtype(cuutil::ScalarType st, F&& f) {
  if (st == cuutil::ScalarType::Float)
    f(float{});
  else if (st == cuutil::ScalarType::Double)
    f(double{});
  else
    f(__half{});
}

// spatial_scale in the compute type (torchvision passes it as the kernel's `const T`).
template <typename S>
inline typename Compute<S>::type scale_of(double spatial_scale) {
  return static_cast<typename Compute<S>::type>(static_cast<float>(spatial_scale));
}
template <>
inline double scale_of<double>(double spatial_scale) {
  return spatial_scale;
}

}  // namespace roialign
}  // namespace example
