// CUDA kernel of example::roi_align (user-owned), torchvision's semantics.
// One thread per output element (k, c, ph, pw), grid-stride: it walks its
// bin's samples in torchvision's order and sums w1 v1 + w2 v2 + w3 v3 + w4 v4
// with rounded arithmetic, so it agrees with the CPU kernel bit for bit on
// finite inputs (float16: in c10::Half arithmetic, as torchvision's kernels).
#include "../roi_align.h"
#include "roi_align_common.cuh"

namespace example {
namespace {

constexpr const char* kOp = "example::roi_align";

template <typename S, typename T = typename roialign::Compute<S>::type>
__global__ void roi_align_kernel(const S* __restrict__ input, const S* __restrict__ rois, S* __restrict__ out,
                                 int64_t total, int64_t batch, int64_t channels, int64_t height, int64_t width,
                                 T scale, int64_t pooled_height, int64_t pooled_width, int64_t sampling_ratio,
                                 bool aligned) {
  using namespace cuutil;
  using roialign::add_rn;
  using roialign::div_rn;
  using roialign::load;
  using roialign::mul_rn;
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t pw = idx % pooled_width;
    const int64_t ph = (idx / pooled_width) % pooled_height;
    const int64_t c = (idx / pooled_width / pooled_height) % channels;
    const int64_t k = idx / pooled_width / pooled_height / channels;
    const auto g = roialign::geometry(rois + 5 * k, scale, pooled_height, pooled_width, sampling_ratio, aligned, batch);
    const S* x = input + (g.batch * channels + c) * height * width;
    const int64_t gh = g.grid_h > 0 && g.grid_w > 0 ? g.grid_h : 0;
    T val = 0;
    for (int64_t iy = 0; iy < gh; ++iy) {
      const T y = roialign::sample_coord(g.start_h, ph, g.bin_h, iy, g.grid_h);
      for (int64_t ix = 0; ix < g.grid_w; ++ix) {
        const T xx = roialign::sample_coord(g.start_w, pw, g.bin_w, ix, g.grid_w);
        int64_t pos[4];
        T w[4];
        // An empty sample adds nothing (torchvision's CUDA kernel; its CPU kernel
        // adds 0 * x[0], NaN where x[0] is not finite).
        if (!roialign::bilinear_tap(y, xx, height, width, pos, w)) continue;
        const T s = add_rn(add_rn(add_rn(mul_rn(w[0], load(x + pos[0])), mul_rn(w[1], load(x + pos[1]))),
                                  mul_rn(w[2], load(x + pos[2]))),
                           mul_rn(w[3], load(x + pos[3])));
        val = add_rn(val, s);
      }
    }
    const int64_t samples = gh * g.grid_w;
    roialign::store(out + idx, div_rn(val, static_cast<T>(samples > 1 ? samples : 1)));
  }
}

}  // namespace

torch::stable::Tensor roi_align_cuda(const torch::stable::Tensor& input, const torch::stable::Tensor& rois,
                                     double spatial_scale, int64_t pooled_height, int64_t pooled_width,
                                     int64_t sampling_ratio, bool aligned) {
  cuutil::check_cuda(input, kOp, "input");
  cuutil::check_cuda(rois, kOp, "rois");
  cuutil::check_same_device(input, rois, kOp, "input", "rois");
  cuutil::check_same_dtype(input, rois, kOp, "input", "rois");
  roialign::check_sampling_ratio(sampling_ratio, kOp);
  STD_TORCH_CHECK(input.dim() == 4, kOp, ": expected 'input' of shape [N, C, H, W], got ", input.dim(), " dims");
  STD_TORCH_CHECK(rois.dim() == 2 && rois.size(1) == 5, kOp,
                  ": expected 'rois' of shape [K, 5] (batch index, x1, y1, x2, y2)");
  STD_TORCH_CHECK(pooled_height >= 0 && pooled_width >= 0, kOp, ": expected pooled sizes >= 0, got ",
                  pooled_height, " x ", pooled_width);
  const torch::stable::accelerator::DeviceGuard guard(input.get_device_index());
  const int64_t num_rois = rois.size(0), channels = input.size(1);
  torch::stable::Tensor out = torch::stable::new_empty(input, {num_rois, channels, pooled_height, pooled_width});
  if (out.numel() == 0) return out;  // in any dtype, as torchvision
  roialign::check_roi_dtype(input, kOp, "input");
  STD_TORCH_CHECK(input.size(2) > 0 && input.size(3) > 0, kOp, ": expected a non-empty feature map");
  const torch::stable::Tensor x = cuutil::contig(input);
  const torch::stable::Tensor r = cuutil::contig(rois);
  const cudaStream_t stream = cuutil::current_stream(input.get_device_index());
  const int64_t total = out.numel();
  constexpr int threads = 256;
  roialign::dispatch_roi_dtype(x.scalar_type(), [&](auto tag) {
    using S = decltype(tag);
    roi_align_kernel<S><<<cuutil::grid_for(total, threads, int64_t(1) << 20), threads, 0, stream>>>(
        static_cast<const S*>(x.const_data_ptr()), static_cast<const S*>(r.const_data_ptr()),
        static_cast<S*>(out.mutable_data_ptr()), total, input.size(0), channels, input.size(2), input.size(3),
        roialign::scale_of<S>(spatial_scale), pooled_height, pooled_width, sampling_ratio, aligned);
    STD_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return out;
}

}  // namespace example
