// CPU kernel of example::roi_align (user-owned), torchvision's semantics.
//
// The taps of every sample of a run of rois are computed once
// (roi_align_common.h) and shared by all channels. Each bin sums its samples
// in torchvision's order,
//   val += w1 v1 + w2 v2 + w3 v3 + w4 v4,  out = val / max(samples, 1),
// lane by lane for L channels at once, so results match torchvision's CPU
// kernel bit for bit (Note [No implicit FMA]); float16 in c10::Half
// arithmetic, as torchvision's. Two layouts (Note [roi_align layouts]): NCHW,
// threads owning channel blocks and one gather per tap; or, when float or
// double rois sample the map densely, a channels-last copy of the input,
// threads owning rois and contiguous vector loads.
#include "../roi_align.h"
#include "roi_align_common.h"
#include "roi_align_simd.h"

namespace example {
namespace {

using kutil::Tensor;
using roialign::Tap;

constexpr const char* kOp = "example::roi_align";

// Channels [0, channels) of one roi: planes[c * hw + pos] -> out[c * bins + bin].
template <typename T>
void roi_bins_scalar(const T* planes, int64_t channels, int64_t hw, const Tap<T>* taps, int64_t bins,
                     int64_t samples, T count, T* out) {
  for (int64_t c = 0; c < channels; ++c) {
    const T* x = planes + c * hw;
    for (int64_t bin = 0; bin < bins; ++bin) {
      const Tap<T>* t = taps + bin * samples;
      T val = 0;
      for (int64_t s = 0; s < samples; ++s, ++t)
        val += t->w[0] * x[t->pos[0]] + t->w[1] * x[t->pos[1]] + t->w[2] * x[t->pos[2]] +
               t->w[3] * x[t->pos[3]];
      out[c * bins + bin] = val / count;
    }
  }
}

#if EXAMPLE_X86
// Channels in blocks of L; returns how many channels it did.
template <typename T>
EXAMPLE_AVX2 int64_t roi_bins_avx2(const T* planes, int64_t channels, int64_t hw, const Tap<T>* taps,
                                   int64_t bins, int64_t samples, T count, T* out) {
  constexpr int L = roialign::Lanes<T>::L;
  const auto offsets = roialign::plane_offsets(planes, static_cast<int32_t>(hw));
  const auto vcount = roialign::vset1(count);
  alignas(32) T lanes[L];
  const int64_t blocks = channels / L;
  for (int64_t cb = 0; cb < blocks; ++cb) {
    const T* x = planes + cb * L * hw;
    T* o = out + cb * L * bins;
    for (int64_t bin = 0; bin < bins; ++bin) {
      const Tap<T>* t = taps + bin * samples;
      auto acc = roialign::vzero(x);
      for (int64_t s = 0; s < samples; ++s, ++t) {
        auto v = roialign::vmul(roialign::vset1(t->w[0]), roialign::vgather(x + t->pos[0], offsets));
        v = roialign::vadd(v, roialign::vmul(roialign::vset1(t->w[1]), roialign::vgather(x + t->pos[1], offsets)));
        v = roialign::vadd(v, roialign::vmul(roialign::vset1(t->w[2]), roialign::vgather(x + t->pos[2], offsets)));
        v = roialign::vadd(v, roialign::vmul(roialign::vset1(t->w[3]), roialign::vgather(x + t->pos[3], offsets)));
        acc = roialign::vadd(acc, v);
      }
      roialign::vstore(lanes, roialign::vdiv(acc, vcount));
      for (int l = 0; l < L; ++l) o[l * bins + bin] = lanes[l];
    }
  }
  return blocks * L;
}
#endif

template <typename T>
void roi_align_nchw(const T* input, const T* rois, T* out, int64_t num_rois, int64_t batch, int64_t channels,
                    int64_t height, int64_t width, double spatial_scale, int64_t pooled_height,
                    int64_t pooled_width, int64_t sampling_ratio, bool aligned) {
  const int64_t hw = height * width;
  const int64_t bins = pooled_height * pooled_width;
  const bool simd = kutil::cpu_has_avx2_fma();
  const T scale = static_cast<T>(spatial_scale);
  constexpr int64_t block = 8;  // channels per task unit: whole AVX2 vectors
  const int64_t units = (channels + block - 1) / block;
  roialign::RoiChunk<T> chunk;
  for (int64_t k0 = 0; k0 < num_rois; k0 = chunk.k1) {
    roialign::next_chunk(rois, k0, num_rois, scale, pooled_height, pooled_width, sampling_ratio, aligned,
                         batch, height, width, kOp, chunk);
    // Threads own channel blocks and sweep the chunk's rois: a block's feature
    // planes stay in cache while its taps stream by.
    torch::stable::parallel_for(0, units, 1, [&](int64_t u0, int64_t u1) {
      const int64_t c0 = u0 * block, c1 = std::min(channels, u1 * block);
      for (int64_t k = chunk.k0; k < chunk.k1; ++k) {
        const auto& g = chunk.geometry[k - chunk.k0];
        const Tap<T>* taps = chunk.taps.data() + chunk.start[k - chunk.k0];
        const int64_t samples = g.samples();
        const T count = roialign::forward_count(g);
        const T* planes = input + (g.batch * channels + c0) * hw;
        T* o = out + (k * channels + c0) * bins;
        int64_t done = 0;
#if EXAMPLE_X86
        if constexpr (roialign::kHasAvx2Path<T>)
          if (simd) done = roi_bins_avx2(planes, c1 - c0, hw, taps, bins, samples, count, o);
#endif
        roi_bins_scalar(planes + done * hw, c1 - c0 - done, hw, taps, bins, samples, count, o + done * bins);
      }
    });
  }
}

// One bin of one roi, channels-last: f = the roi's image as [H * W, channels],
// row = the bin's `channels` outputs (from channel c0 on).
template <typename T>
void bin_nhwc_scalar(const T* f, int64_t c0, int64_t channels, const Tap<T>* taps, int64_t samples, T count,
                     T* row) {
  for (int64_t c = c0; c < channels; ++c) {
    T val = 0;
    for (int64_t s = 0; s < samples; ++s) {
      const Tap<T>& t = taps[s];
      val += t.w[0] * f[t.pos[0] * channels + c] + t.w[1] * f[t.pos[1] * channels + c] +
             t.w[2] * f[t.pos[2] * channels + c] + t.w[3] * f[t.pos[3] * channels + c];
    }
    row[c] = val / count;
  }
}

#if EXAMPLE_X86
// Channels in blocks of U vectors, then single vectors; returns the first channel not done.
template <typename T>
EXAMPLE_AVX2 int64_t bin_nhwc_avx2(const T* f, int64_t channels, const Tap<T>* taps, int64_t samples, T count,
                                   T* row) {
  using namespace roialign;
  constexpr int L = Lanes<T>::L;
  constexpr int U = 4;
  using V = decltype(vzero(f));
  const V vcount = vset1(count);
  int64_t c0 = 0;
  for (; c0 + U * L <= channels; c0 += U * L) {
    V acc[U];
    for (int u = 0; u < U; ++u) acc[u] = vzero(f);
    for (int64_t s = 0; s < samples; ++s) {
      const Tap<T>& t = taps[s];
      const T* p[4];
      V w[4];
      for (int q = 0; q < 4; ++q) {
        p[q] = f + t.pos[q] * channels + c0;
        w[q] = vset1(t.w[q]);
      }
      for (int u = 0; u < U; ++u) {
        V v = vmul(w[0], vload(p[0] + u * L));
        v = vadd(v, vmul(w[1], vload(p[1] + u * L)));
        v = vadd(v, vmul(w[2], vload(p[2] + u * L)));
        v = vadd(v, vmul(w[3], vload(p[3] + u * L)));
        acc[u] = vadd(acc[u], v);
      }
    }
    for (int u = 0; u < U; ++u) vstore(row + c0 + u * L, vdiv(acc[u], vcount));
  }
  for (; c0 + L <= channels; c0 += L) {
    V acc = vzero(f);
    for (int64_t s = 0; s < samples; ++s) {
      const Tap<T>& t = taps[s];
      V v = vmul(vset1(t.w[0]), vload(f + t.pos[0] * channels + c0));
      v = vadd(v, vmul(vset1(t.w[1]), vload(f + t.pos[1] * channels + c0)));
      v = vadd(v, vmul(vset1(t.w[2]), vload(f + t.pos[2] * channels + c0)));
      v = vadd(v, vmul(vset1(t.w[3]), vload(f + t.pos[3] * channels + c0)));
      acc = vadd(acc, v);
    }
    vstore(row + c0, vdiv(acc, vcount));
  }
  return c0;
}
#endif

// Channels-last in blocks of 4 vectors of channels (Note [roi_align layouts]):
// threads own channel blocks; per block, the N images are packed into the
// thread's buffer [N, H * W, cb], then every roi of the chunk reads it.
template <typename T>
void roi_align_blocked(const T* input, const T* rois, T* out, int64_t num_rois, int64_t batch, int64_t channels,
                       int64_t height, int64_t width, double spatial_scale, int64_t pooled_height,
                       int64_t pooled_width, int64_t sampling_ratio, bool aligned) {
  const int64_t hw = height * width;
  const int64_t bins = pooled_height * pooled_width;
  const bool simd = kutil::cpu_has_avx2_fma();
  const T scale = static_cast<T>(spatial_scale);
  const int64_t block = 4 * (32 / static_cast<int64_t>(sizeof(T)));  // 4 AVX2 vectors
  const int64_t units = (channels + block - 1) / block;
  roialign::RoiChunk<T> chunk;
  for (int64_t k0 = 0; k0 < num_rois; k0 = chunk.k1) {
    roialign::next_chunk(rois, k0, num_rois, scale, pooled_height, pooled_width, sampling_ratio, aligned,
                         batch, height, width, kOp, chunk);
    torch::stable::parallel_for(0, units, 1, [&](int64_t u0, int64_t u1) {
      const roialign::ThreadBuffer<T> buffer(static_cast<size_t>(batch * hw * block));
      std::vector<T> row(static_cast<size_t>(block));
      for (int64_t u = u0; u < u1; ++u) {
        const int64_t c0 = u * block, cb = std::min(block, channels - c0);
        roialign::pack_block(input, batch, channels, hw, c0, cb, buffer.data(), simd);
        for (int64_t k = chunk.k0; k < chunk.k1; ++k) {
          const auto& g = chunk.geometry[k - chunk.k0];
          const Tap<T>* taps = chunk.taps.data() + chunk.start[k - chunk.k0];
          const int64_t samples = g.samples();
          const T count = roialign::forward_count(g);
          const T* f = buffer.data() + g.batch * hw * cb;
          T* o = out + (k * channels + c0) * bins;
          for (int64_t bin = 0; bin < bins; ++bin) {
            int64_t done = 0;
#if EXAMPLE_X86
            if (simd) done = bin_nhwc_avx2(f, cb, taps + bin * samples, samples, count, row.data());
#endif
            bin_nhwc_scalar(f, done, cb, taps + bin * samples, samples, count, row.data());
            for (int64_t c = 0; c < cb; ++c) o[c * bins + bin] = row[c];
          }
        }
      }
    });
  }
}

}  // namespace

torch::stable::Tensor roi_align_cpu(const torch::stable::Tensor& input, const torch::stable::Tensor& rois,
                                    double spatial_scale, int64_t pooled_height, int64_t pooled_width,
                                    int64_t sampling_ratio, bool aligned) {
  kutil::check_cpu(input, kOp, "input");
  kutil::check_cpu(rois, kOp, "rois");
  kutil::check_same_dtype(input, rois, kOp, "input", "rois");
  STD_TORCH_CHECK(input.dim() == 4, kOp, ": expected 'input' of shape [N, C, H, W], got ", input.dim(), " dims");
  STD_TORCH_CHECK(rois.dim() == 2 && rois.size(1) == 5, kOp,
                  ": expected 'rois' of shape [K, 5] (batch index, x1, y1, x2, y2)");
  roialign::check_sampling(sampling_ratio, pooled_height, pooled_width, kOp);
  const int64_t num_rois = rois.size(0), batch = input.size(0), channels = input.size(1);
  const int64_t height = input.size(2), width = input.size(3);
  Tensor out = torch::stable::new_empty(input, {num_rois, channels, pooled_height, pooled_width});
  if (out.numel() == 0) return out;  // in any dtype, as torchvision
  roialign::check_roi_dtype(input, kOp, "input");
  STD_TORCH_CHECK(height > 0 && width > 0, kOp, ": expected a non-empty feature map, got ", height, " x ", width);
  roialign::check_plane_size(height, width, 8, kOp);
  const Tensor r = kutil::contig(rois);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T* rp = static_cast<const T*>(r.const_data_ptr());
    const int64_t samples = roialign::total_samples(rp, num_rois, static_cast<T>(spatial_scale), pooled_height,
                                                    pooled_width, sampling_ratio, aligned, batch, kOp);
    T* op = static_cast<T*>(out.mutable_data_ptr());
    const Tensor x = kutil::contig(input);
    if constexpr (roialign::kHasAvx2Path<T>) {
      if (roialign::use_channels_last(samples, pooled_height * pooled_width, batch, height, width)) {
        roi_align_blocked(static_cast<const T*>(x.const_data_ptr()), rp, op, num_rois, batch, channels, height,
                          width, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned);
        return;
      }
    }
    roi_align_nchw(static_cast<const T*>(x.const_data_ptr()), rp, op, num_rois, batch, channels, height, width,
                   spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned);
  };
  roialign::dispatch_roi_dtype(input.scalar_type(), run);
  return out;
}

}  // namespace example
