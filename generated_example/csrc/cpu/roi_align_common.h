// Sampling geometry shared by roi_align and _roi_align_backward (user-owned).
//
// torchvision's arithmetic, operation for operation (Note [No implicit FMA]),
// in the tensors' type: float16 as c10::Half, each operation rounded to float16:
// per roi the box in feature coordinates, the bin sizes and the sampling grid
// (sampling_ratio, or ceil(roi size / pooled size) when it is <= 0); per
// sample its bilinear taps: four pixel offsets and four weights
// (hy hx, hy lx, ly hx, ly lx). A sample outside [-1, size] is empty: the
// forward adds it with zero weights at offset 0 and the backward skips it,
// exactly as torchvision's CPU kernels do.
#pragma once

#include "kernel_utils.h"

#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

namespace example {
namespace roialign {

// float16 runs the scalar loops in c10::Half arithmetic (torchvision's CPU
// kernel for float16); float and double also have AVX2 paths.
template <typename T>
constexpr bool kHasAvx2Path = std::is_same_v<T, float> || std::is_same_v<T, double>;

// The dtypes torchvision's CPU roi_align kernels accept (not bfloat16).
inline void check_roi_dtype(const kutil::Tensor& t, const char* op, const char* name) {
  const kutil::ScalarType st = t.scalar_type();
  STD_TORCH_CHECK(st == kutil::ScalarType::Float || st == kutil::ScalarType::Double ||
                      st == kutil::ScalarType::Half,
                  op, ": unsupported dtype ", kutil::dtype_name(st), " for '", name,
                  "'; supported dtypes are float16, float32 and float64");
}

// Calls f(T{}) with T the C++ type of a float32 / float64 / float16 tensor.
template <typename F>
inline void dispatch_roi_dtype(kutil::ScalarType st, F&& f) {
  if (st == kutil::ScalarType::Float)
    f(float{});
  else if (st == kutil::ScalarType::Double)
    f(double{});
  else
    f(kutil::Half{});
}

template <typename T>
struct Tap {
  int32_t pos[4];
  T w[4];
  bool empty;
};

// The most samples per bin along one axis (sampling_ratio or the adaptive
// grid), and the most taps (samples times bins) of one roi.
constexpr int64_t kMaxGrid = int64_t(1) << 20;
constexpr int64_t kMaxRoiTaps = int64_t(1) << 28;

// sampling_ratio and the pooled sizes, before any product of them is taken:
// sampling_ratio >= 2^31 used to overflow the grid size (a crash), 2^40 gave zeros.
inline void check_sampling(int64_t sampling_ratio, int64_t pooled_height, int64_t pooled_width, const char* op) {
  STD_TORCH_CHECK(sampling_ratio <= kMaxGrid, op, ": sampling_ratio ", sampling_ratio,
                  " asks for more than 2^20 samples per bin along one axis; pass a smaller one (<= 0: adaptive)");
  STD_TORCH_CHECK(pooled_height >= 0 && pooled_width >= 0, op, ": expected pooled sizes >= 0, got ", pooled_height,
                  " x ", pooled_width);
  int64_t bins = 0;
  STD_TORCH_CHECK(!__builtin_mul_overflow(pooled_height, pooled_width, &bins), op, ": pooled sizes ", pooled_height,
                  " x ", pooled_width, " overflow int64; pass smaller ones");
}

template <typename T>
struct RoiGeometry {
  int64_t batch = 0;
  T start_h = 0, start_w = 0, bin_h = 0, bin_w = 0;
  int64_t grid_h = 0, grid_w = 0;  // samples per bin along y / x (<= 0: none)
  int64_t samples() const { return grid_h > 0 && grid_w > 0 ? grid_h * grid_w : 0; }
};

// (int) ceil(v), with what C++ leaves undefined (NaN, out of int range) as 0
// samples and a clear error for grids too large to sample. A float16 v is
// ceiled as a float, as torchvision's ceil(c10::Half) is.
template <typename T>
inline int64_t adaptive_grid(T value, const char* op) {
  using C = std::conditional_t<std::is_floating_point_v<T>, T, float>;
  const C v = static_cast<C>(value);
  if (!(v == v)) return 0;
  const C c = std::ceil(v);
  STD_TORCH_CHECK(c < C(kMaxGrid), op, ": a roi needs ", static_cast<double>(c),
                  " adaptive samples per bin along one axis; pass sampling_ratio > 0 or fix the roi");
  return c < C(-(1 << 20)) ? -(1 << 20) : static_cast<int64_t>(c);
}

template <typename T>
inline RoiGeometry<T> roi_geometry(const T* roi, T spatial_scale, int64_t pooled_height,
                                   int64_t pooled_width, int64_t sampling_ratio, bool aligned,
                                   int64_t batch_size, const char* op, int64_t index) {
  RoiGeometry<T> g;
  const T b = roi[0];  // truncated to an int, as torchvision
  STD_TORCH_CHECK(b > T(-1) && b < static_cast<T>(batch_size), op, ": roi ", index,
                  " has batch index ", static_cast<double>(b), ", outside [0, ", batch_size, ")");
  g.batch = static_cast<int64_t>(b);
  const T offset = aligned ? T(0.5) : T(0.0);
  g.start_w = roi[1] * spatial_scale - offset;
  g.start_h = roi[2] * spatial_scale - offset;
  const T end_w = roi[3] * spatial_scale - offset;
  const T end_h = roi[4] * spatial_scale - offset;
  T roi_w = end_w - g.start_w;
  T roi_h = end_h - g.start_h;
  if (!aligned) {  // malformed rois are forced to 1 x 1
    roi_w = std::max(roi_w, T(1));
    roi_h = std::max(roi_h, T(1));
  }
  g.bin_h = roi_h / static_cast<T>(pooled_height);
  g.bin_w = roi_w / static_cast<T>(pooled_width);
  g.grid_h = sampling_ratio > 0 ? sampling_ratio : adaptive_grid(roi_h / static_cast<T>(pooled_height), op);
  g.grid_w = sampling_ratio > 0 ? sampling_ratio : adaptive_grid(roi_w / static_cast<T>(pooled_width), op);
  // A roi's taps are held in memory at once (RoiChunk): bound them, and keep
  // the int64 products of grid and bins from overflowing.
  int64_t taps = 0;
  STD_TORCH_CHECK(!__builtin_mul_overflow(g.samples(), pooled_height * pooled_width, &taps) && taps <= kMaxRoiTaps,
                  op, ": roi ", index, " needs ", g.grid_h, " x ", g.grid_w, " samples in each of ", pooled_height,
                  " x ", pooled_width, " bins, more than 2^28 in all; pass a smaller sampling_ratio or pooled size");
  return g;
}

// The forward divides by max(grid_h * grid_w, 1), the backward by grid_h * grid_w.
template <typename T>
inline T forward_count(const RoiGeometry<T>& g) {
  return static_cast<T>(std::max<int64_t>(g.grid_h * g.grid_w, 1));
}

template <typename T>
inline Tap<T> bilinear_tap(T y, T x, int64_t height, int64_t width) {
  Tap<T> t;
  if (!(y >= -1.0 && y <= height && x >= -1.0 && x <= width)) {  // NaN: empty too
    for (int q = 0; q < 4; ++q) {
      t.pos[q] = 0;
      t.w[q] = 0;
    }
    t.empty = true;
    return t;
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
  const T ly = y - static_cast<T>(y_low);
  const T lx = x - static_cast<T>(x_low);
  const T hy = 1. - ly, hx = 1. - lx;
  t.w[0] = hy * hx;
  t.w[1] = hy * lx;
  t.w[2] = ly * hx;
  t.w[3] = ly * lx;
  t.pos[0] = static_cast<int32_t>(y_low * width + x_low);
  t.pos[1] = static_cast<int32_t>(y_low * width + x_high);
  t.pos[2] = static_cast<int32_t>(y_high * width + x_low);
  t.pos[3] = static_cast<int32_t>(y_high * width + x_high);
  t.empty = false;
  return t;
}

// Taps of every sample of every bin, bin-major (ph, pw), then (iy, ix).
template <typename T>
inline void roi_taps(const RoiGeometry<T>& g, int64_t pooled_height, int64_t pooled_width,
                     int64_t height, int64_t width, std::vector<Tap<T>>& taps) {
  const int64_t s = g.samples();
  taps.resize(static_cast<size_t>(pooled_height * pooled_width * s));
  size_t k = 0;
  for (int64_t ph = 0; ph < pooled_height; ++ph)
    for (int64_t pw = 0; pw < pooled_width; ++pw)
      for (int64_t iy = 0; iy < (s ? g.grid_h : 0); ++iy) {
        const T y = g.start_h + static_cast<T>(ph) * g.bin_h +
                    static_cast<T>(iy + .5f) * g.bin_h / static_cast<T>(g.grid_h);
        for (int64_t ix = 0; ix < g.grid_w; ++ix) {
          const T x = g.start_w + static_cast<T>(pw) * g.bin_w +
                      static_cast<T>(ix + .5f) * g.bin_w / static_cast<T>(g.grid_w);
          taps[k++] = bilinear_tap(y, x, height, width);
        }
      }
}

// Validates every roi (errors surface here, outside any parallel region) and
// returns the number of samples of all rois together, per bin.
template <typename T>
inline int64_t total_samples(const T* rois, int64_t num_rois, T spatial_scale, int64_t pooled_height,
                             int64_t pooled_width, int64_t sampling_ratio, bool aligned, int64_t batch,
                             const char* op) {
  int64_t total = 0;
  for (int64_t k = 0; k < num_rois; ++k)
    total += roi_geometry(rois + 5 * k, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned,
                          batch, op, k)
                 .samples();
  return total;
}

// Note [roi_align layouts]
// NCHW puts the L channels of one tap H * W apart: one gather (forward) or L
// scalar adds (backward) per tap and L channels, each touching its own cache
// line. When the rois sample the feature map densely, it pays to work on a
// channels-last copy instead, where a tap's channels are contiguous and read
// or updated with plain vector loads and stores. The copy is made per block
// of channels, in a buffer each thread keeps between calls: no full-size
// temporary (whose page faults alone would cost as much as the kernel), and
// the block's data stays in cache while every roi visits it. Packing costs a
// pass over the map, so the kernels use it when the taps outnumber the pixels.
inline bool use_channels_last(int64_t samples_per_bin_total, int64_t bins, int64_t batch, int64_t height,
                              int64_t width) {
  return samples_per_bin_total * bins * 4 >= batch * height * width;
}

// The taps of a run of rois [k0, k1): roi k's taps start at taps[start[k - k0]].
template <typename T>
struct RoiChunk {
  int64_t k0 = 0, k1 = 0;
  std::vector<RoiGeometry<T>> geometry;
  std::vector<int64_t> start;
  std::vector<Tap<T>> taps;
};

// Rois are processed in chunks of at most about a million taps (bounded memory
// even for large adaptive grids; one chunk in common detector settings).
constexpr int64_t kChunkTaps = int64_t(1) << 20;

// Fills `chunk` with the rois from k0 on until about kChunkTaps taps (at least one roi).
template <typename T>
inline void next_chunk(const T* rois, int64_t k0, int64_t num_rois, T spatial_scale, int64_t pooled_height,
                       int64_t pooled_width, int64_t sampling_ratio, bool aligned, int64_t batch,
                       int64_t height, int64_t width, const char* op, RoiChunk<T>& chunk) {
  const int64_t bins = pooled_height * pooled_width;
  chunk.k0 = k0;
  chunk.geometry.clear();
  chunk.start.clear();
  int64_t total = 0;
  int64_t k = k0;
  for (; k < num_rois && (k == k0 || total < kChunkTaps); ++k) {
    chunk.geometry.push_back(roi_geometry(rois + 5 * k, spatial_scale, pooled_height, pooled_width,
                                          sampling_ratio, aligned, batch, op, k));
    chunk.start.push_back(total);
    total += bins * chunk.geometry.back().samples();
  }
  chunk.k1 = k;
  chunk.taps.resize(static_cast<size_t>(total));
  // Below ~16K taps the work costs less than waking a second thread (which, on
  // a busy machine, can wait milliseconds for a core): one task then.
  const int64_t grain = total < (int64_t(1) << 14) ? std::max<int64_t>(k - k0, 1) : 1;
  torch::stable::parallel_for(0, k - k0, grain, [&](int64_t i0, int64_t i1) {
    std::vector<Tap<T>> taps;
    for (int64_t i = i0; i < i1; ++i) {
      roi_taps(chunk.geometry[i], pooled_height, pooled_width, height, width, taps);
      std::copy(taps.begin(), taps.end(), chunk.taps.begin() + chunk.start[i]);
    }
  });
}

// A scratch buffer of at least n elements owned by the calling thread and kept
// between calls (Note [roi_align layouts]); buffers above 64 MB are not kept.
template <typename T>
class ThreadBuffer {
 public:
  explicit ThreadBuffer(size_t n) {
    constexpr size_t kKeep = (size_t(64) << 20) / sizeof(T);
    thread_local std::vector<T> kept;
    if (n <= kKeep) {
      if (kept.size() < n) kept.resize(n);
      data_ = kept.data();
    } else {
      own_.resize(n);
      data_ = own_.data();
    }
  }
  T* data() const { return data_; }

 private:
  std::vector<T> own_;
  T* data_ = nullptr;
};

// Channels [c0, c0 + cb) of the N images, NCHW -> buf [N, H * W, cb]; pixels
// from p_start on (the AVX2 tiles in roi_align_simd.h do the ones before).
template <typename T>
inline void pack_channels(const T* x, int64_t batch, int64_t channels, int64_t hw, int64_t c0, int64_t cb, T* buf,
                          int64_t p_start = 0, int64_t c_start = 0) {
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t c = 0; c < cb; ++c) {
      const T* plane = x + (b * channels + c0 + c) * hw;
      T* o = buf + b * hw * cb + c;
      for (int64_t p = c < c_start ? p_start : 0; p < hw; ++p) o[p * cb] = plane[p];
    }
}

// The inverse: buf [N, H * W, cb] -> channels [c0, c0 + cb) of x (NCHW).
template <typename T>
inline void unpack_channels(const T* buf, int64_t batch, int64_t channels, int64_t hw, int64_t c0, int64_t cb, T* x,
                            int64_t p_start = 0, int64_t c_start = 0) {
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t c = 0; c < cb; ++c) {
      T* plane = x + (b * channels + c0 + c) * hw;
      const T* in = buf + b * hw * cb + c;
      for (int64_t p = c < c_start ? p_start : 0; p < hw; ++p) plane[p] = in[p * cb];
    }
}

inline void check_plane_size(int64_t height, int64_t width, int64_t lanes, const char* op) {
  STD_TORCH_CHECK(height * width * lanes < std::numeric_limits<int32_t>::max(), op,
                  ": feature maps of ", height, " x ", width, " are too large for this kernel");
}

}  // namespace roialign
}  // namespace example
