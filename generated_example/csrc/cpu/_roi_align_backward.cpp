// CPU kernel of example::_roi_align_backward (user-owned), torchvision's semantics.
//
// Scatters each bin's gradient onto the taps of its samples:
//   grad_input[b, c, pos_q] += grad[k, c, bin] * w_q / count
// Threads own disjoint channel ranges (no atomics, no races), and every
// thread visits rois, bins, samples and taps in torchvision's order, so each
// element accumulates its contributions in the same order as torchvision's
// serial CPU kernel: the result is deterministic and bit-identical to it
// (float16 in c10::Half arithmetic, as torchvision's).
// Layouts (Note [roi_align layouts]): in NCHW the AVX2 path computes
// (g * w) / count for L channels at once and adds them one by one (they land
// in L planes); in a channels-last block buffer a tap's channels are
// contiguous and updated with vector loads and stores.
#include "../_roi_align_backward.h"
#include "roi_align_common.h"
#include "roi_align_simd.h"

namespace example {
namespace {

using kutil::Tensor;
using roialign::Tap;

constexpr const char* kOp = "example::_roi_align_backward";

// Channels [c0, c1) of one roi. grad: grad + (k * C) * bins; gi: grad_input + b * C * hw.
template <typename T>
void scatter_scalar(const T* grad, T* gi, int64_t c0, int64_t c1, int64_t hw, const Tap<T>* taps,
                    int64_t bins, int64_t samples, T count) {
  for (int64_t c = c0; c < c1; ++c) {
    const T* g = grad + c * bins;
    T* x = gi + c * hw;
    for (int64_t bin = 0; bin < bins; ++bin) {
      const T gb = g[bin];
      const Tap<T>* t = taps + bin * samples;
      for (int64_t s = 0; s < samples; ++s, ++t) {
        if (t->empty) continue;
        for (int q = 0; q < 4; ++q) x[t->pos[q]] += gb * t->w[q] / count;
      }
    }
  }
}

#if EXAMPLE_X86
// Channels [c0, c0 + L * blocks): returns the first channel it did not do.
template <typename T>
EXAMPLE_AVX2 int64_t scatter_avx2(const T* grad, T* gi, int64_t c0, int64_t c1, int64_t hw,
                                  const Tap<T>* taps, int64_t bins, int64_t samples, T count) {
  constexpr int L = roialign::Lanes<T>::L;
  const auto vcount = roialign::vset1(count);
  alignas(32) T add[4][L];
  int64_t c = c0;
  for (; c + L <= c1; c += L) {
    T* x = gi + c * hw;
    for (int64_t bin = 0; bin < bins; ++bin) {
      const auto gb = roialign::vload_strided(grad + c * bins + bin, bins);
      const Tap<T>* t = taps + bin * samples;
      for (int64_t s = 0; s < samples; ++s, ++t) {
        if (t->empty) continue;
        for (int q = 0; q < 4; ++q)
          roialign::vstore(add[q], roialign::vdiv(roialign::vmul(gb, roialign::vset1(t->w[q])), vcount));
        for (int l = 0; l < L; ++l) {
          T* xl = x + l * hw;
          for (int q = 0; q < 4; ++q) xl[t->pos[q]] += add[q][l];
        }
      }
    }
  }
  return c;
}
#endif

template <typename T>
void backward_nchw(const T* grad, const T* rois, T* gi, int64_t num_rois, int64_t batch, int64_t channels,
                   int64_t height, int64_t width, double spatial_scale, int64_t pooled_height,
                   int64_t pooled_width, int64_t sampling_ratio, bool aligned) {
  const int64_t hw = height * width;
  const int64_t bins = pooled_height * pooled_width;
  const T scale = static_cast<T>(spatial_scale);
  const bool simd = kutil::cpu_has_avx2_fma();
  constexpr int64_t block = 8;  // channels per task unit: whole AVX2 vectors
  const int64_t units = (channels + block - 1) / block;
  roialign::RoiChunk<T> chunk;
  for (int64_t k0 = 0; k0 < num_rois; k0 = chunk.k1) {
    roialign::next_chunk(rois, k0, num_rois, scale, pooled_height, pooled_width, sampling_ratio, aligned,
                         batch, height, width, kOp, chunk);
    torch::stable::parallel_for(0, units, 1, [&](int64_t u0, int64_t u1) {
      const int64_t c0 = u0 * block, c1 = std::min(channels, u1 * block);
      for (int64_t k = chunk.k0; k < chunk.k1; ++k) {
        const auto& g = chunk.geometry[k - chunk.k0];
        const int64_t samples = g.samples();
        if (samples == 0) continue;
        const Tap<T>* taps = chunk.taps.data() + chunk.start[k - chunk.k0];
        const T count = static_cast<T>(g.grid_h * g.grid_w);
        const T* gk = grad + k * channels * bins;
        T* gb = gi + g.batch * channels * hw;
        int64_t c = c0;
#if EXAMPLE_X86
        if constexpr (roialign::kHasAvx2Path<T>)
          if (simd) c = scatter_avx2(gk, gb, c0, c1, hw, taps, bins, samples, count);
#endif
        scatter_scalar(gk, gb, c, c1, hw, taps, bins, samples, count);
      }
    });
  }
}

// Channels [c0, c1) of one roi, channels-last: gi = the gradient of its image as
// [H * W, channels]; grad = grad of the roi from its channel 0, [channels, bins].
template <typename T>
void scatter_nhwc_scalar(const T* grad, T* gi, int64_t c0, int64_t c1, int64_t channels, const Tap<T>* taps,
                         int64_t bins, int64_t samples, T count) {
  for (int64_t bin = 0; bin < bins; ++bin) {
    const Tap<T>* t = taps + bin * samples;
    for (int64_t s = 0; s < samples; ++s, ++t) {
      if (t->empty) continue;
      for (int q = 0; q < 4; ++q) {
        T* x = gi + t->pos[q] * channels;
        for (int64_t c = c0; c < c1; ++c) x[c] += grad[c * bins + bin] * t->w[q] / count;
      }
    }
  }
}

#if EXAMPLE_X86
template <typename T>
EXAMPLE_AVX2 int64_t scatter_nhwc_avx2(const T* grad, T* gi, int64_t c0, int64_t c1, int64_t channels,
                                       const Tap<T>* taps, int64_t bins, int64_t samples, T count) {
  using namespace roialign;
  constexpr int L = Lanes<T>::L;
  constexpr int kMaxVectors = 8;
  using V = decltype(vzero(gi));
  const V vcount = vset1(count);
  const int64_t vectors = std::min<int64_t>((c1 - c0) / L, kMaxVectors);
  V g[kMaxVectors];
  for (int64_t bin = 0; bin < bins; ++bin) {
    for (int64_t u = 0; u < vectors; ++u) g[u] = vload_strided(grad + (c0 + u * L) * bins + bin, bins);
    const Tap<T>* t = taps + bin * samples;
    for (int64_t s = 0; s < samples; ++s, ++t) {
      if (t->empty) continue;
      for (int q = 0; q < 4; ++q) {
        const V w = vset1(t->w[q]);
        T* x = gi + t->pos[q] * channels + c0;
        for (int64_t u = 0; u < vectors; ++u)
          vstore(x + u * L, vadd(vload(x + u * L), vdiv(vmul(g[u], w), vcount)));
      }
    }
  }
  return c0 + vectors * L;
}
#endif

// Channels-last in blocks (Note [roi_align layouts]): threads own channel
// blocks; per block the gradient accumulates in the thread's buffer
// [N, H * W, cb] (zero for the first chunk of rois, the sums so far for the
// next ones, so each element still adds its terms in torchvision's order) and
// is then written to the block's planes of grad_input.
template <typename T>
void backward_blocked(const T* grad, const T* rois, T* gi, int64_t num_rois, int64_t batch, int64_t channels,
                      int64_t height, int64_t width, double spatial_scale, int64_t pooled_height,
                      int64_t pooled_width, int64_t sampling_ratio, bool aligned) {
  const int64_t hw = height * width;
  const int64_t bins = pooled_height * pooled_width;
  const T scale = static_cast<T>(spatial_scale);
  const bool simd = kutil::cpu_has_avx2_fma();
  const int64_t block = 4 * (32 / static_cast<int64_t>(sizeof(T)));  // 4 AVX2 vectors
  const int64_t units = (channels + block - 1) / block;
  roialign::RoiChunk<T> chunk;
  for (int64_t k0 = 0; k0 < num_rois; k0 = chunk.k1) {
    roialign::next_chunk(rois, k0, num_rois, scale, pooled_height, pooled_width, sampling_ratio, aligned,
                         batch, height, width, kOp, chunk);
    const bool first = k0 == 0;
    torch::stable::parallel_for(0, units, 1, [&](int64_t u0, int64_t u1) {
      const roialign::ThreadBuffer<T> buffer(static_cast<size_t>(batch * hw * block));
      for (int64_t u = u0; u < u1; ++u) {
        const int64_t c0 = u * block, cb = std::min(block, channels - c0);
        if (first)
          std::fill(buffer.data(), buffer.data() + batch * hw * cb, T(0));
        else
          roialign::pack_block(static_cast<const T*>(gi), batch, channels, hw, c0, cb, buffer.data(), simd);
        for (int64_t k = chunk.k0; k < chunk.k1; ++k) {
          const auto& g = chunk.geometry[k - chunk.k0];
          const int64_t samples = g.samples();
          if (samples == 0) continue;
          const Tap<T>* taps = chunk.taps.data() + chunk.start[k - chunk.k0];
          const T count = static_cast<T>(g.grid_h * g.grid_w);
          const T* gk = grad + (k * channels + c0) * bins;
          T* gb = buffer.data() + g.batch * hw * cb;
          int64_t c = 0;
#if EXAMPLE_X86
          if (simd) c = scatter_nhwc_avx2(gk, gb, 0, cb, cb, taps, bins, samples, count);
#endif
          scatter_nhwc_scalar(gk, gb, c, cb, cb, taps, bins, samples, count);
        }
        roialign::unpack_block(buffer.data(), batch, channels, hw, c0, cb, gi, simd);
      }
    });
  }
}

}  // namespace

torch::stable::Tensor _roi_align_backward_cpu(const torch::stable::Tensor& grad,
                                              const torch::stable::Tensor& rois, double spatial_scale,
                                              int64_t pooled_height, int64_t pooled_width,
                                              int64_t batch_size, int64_t channels, int64_t height,
                                              int64_t width, int64_t sampling_ratio, bool aligned) {
  kutil::check_cpu(grad, kOp, "grad");
  kutil::check_cpu(rois, kOp, "rois");
  kutil::check_same_dtype(grad, rois, kOp, "grad", "rois");
  STD_TORCH_CHECK(rois.dim() == 2 && rois.size(1) == 5, kOp,
                  ": expected 'rois' of shape [K, 5] (batch index, x1, y1, x2, y2)");
  STD_TORCH_CHECK(batch_size >= 0 && channels >= 0 && height >= 0 && width >= 0, kOp,
                  ": expected non-negative sizes, got ", batch_size, " x ", channels, " x ", height, " x ", width);
  roialign::check_sampling(sampling_ratio, pooled_height, pooled_width, kOp);
  int64_t plane = 0, numel = 0;
  STD_TORCH_CHECK(!__builtin_mul_overflow(height, width, &plane) &&
                      !__builtin_mul_overflow(plane, channels, &numel) &&
                      !__builtin_mul_overflow(numel, batch_size, &numel),
                  kOp, ": the input size ", batch_size, " x ", channels, " x ", height, " x ", width,
                  " overflows int64; pass the sizes of the forward's input");
  const int64_t num_rois = rois.size(0);
  STD_TORCH_CHECK(grad.dim() == 4 && grad.size(0) == num_rois && grad.size(1) == channels &&
                      grad.size(2) == pooled_height && grad.size(3) == pooled_width,
                  kOp, ": expected 'grad' of shape [", num_rois, ", ", channels, ", ", pooled_height,
                  ", ", pooled_width, "]");
  if (grad.numel() > 0) roialign::check_roi_dtype(grad, kOp, "grad");  // as torchvision
  if (grad.numel() == 0 || numel == 0)
    return torch::stable::new_zeros(grad, {batch_size, channels, height, width});
  roialign::check_plane_size(height, width, 8, kOp);
  const Tensor g = kutil::contig(grad);
  const Tensor r = kutil::contig(rois);
  auto run = [&](auto tag) -> Tensor {
    using T = decltype(tag);
    const T* gp = static_cast<const T*>(g.const_data_ptr());
    const T* rp = static_cast<const T*>(r.const_data_ptr());
    const int64_t samples = roialign::total_samples(rp, num_rois, static_cast<T>(spatial_scale), pooled_height,
                                                    pooled_width, sampling_ratio, aligned, batch_size, kOp);
    if constexpr (roialign::kHasAvx2Path<T>) {
      if (roialign::use_channels_last(samples, pooled_height * pooled_width, batch_size, height, width)) {
        Tensor gi = torch::stable::new_empty(grad, {batch_size, channels, height, width});  // fully written
        backward_blocked(gp, rp, static_cast<T*>(gi.mutable_data_ptr()), num_rois, batch_size, channels, height,
                         width, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned);
        return gi;
      }
    }
    Tensor gi = torch::stable::new_zeros(grad, {batch_size, channels, height, width});
    backward_nchw(gp, rp, static_cast<T*>(gi.mutable_data_ptr()), num_rois, batch_size, channels, height, width,
                  spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned);
    return gi;
  };
  Tensor result;
  roialign::dispatch_roi_dtype(g.scalar_type(), [&](auto tag) { result = run(tag); });
  return result;
}

}  // namespace example
