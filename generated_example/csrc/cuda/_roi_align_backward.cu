// CUDA kernel of example::_roi_align_backward (user-owned), torchvision's semantics.
// One thread per grad element (k, c, ph, pw), grid-stride: it adds
// g * w_q / count to the four taps of each non-empty sample with atomicAdd
// (as torchvision's CUDA kernel; the order of the additions, and so the last
// bits of the sums, vary from run to run). float16 in c10::Half arithmetic,
// each atomic addition rounded to float16, as torchvision's.
#include "../_roi_align_backward.h"
#include "roi_align_common.cuh"

namespace example {
namespace {

constexpr const char* kOp = "example::_roi_align_backward";

template <typename S, typename T = typename roialign::Compute<S>::type>
__global__ void roi_align_backward_kernel(const S* __restrict__ grad, const S* __restrict__ rois,
                                          S* __restrict__ grad_input, int64_t total, int64_t batch,
                                          int64_t channels, int64_t height, int64_t width, T scale,
                                          int64_t pooled_height, int64_t pooled_width, int64_t sampling_ratio,
                                          bool aligned) {
  using namespace cuutil;
  using roialign::div_rn;
  using roialign::mul_rn;
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += int64_t(gridDim.x) * blockDim.x) {
    const int64_t pw = idx % pooled_width;
    const int64_t ph = (idx / pooled_width) % pooled_height;
    const int64_t c = (idx / pooled_width / pooled_height) % channels;
    const int64_t k = idx / pooled_width / pooled_height / channels;
    const auto g = roialign::geometry(rois + 5 * k, scale, pooled_height, pooled_width, sampling_ratio, aligned, batch);
    if (g.grid_h <= 0 || g.grid_w <= 0) continue;
    const T count = static_cast<T>(g.grid_h * g.grid_w);
    const T gb = roialign::load(grad + idx);
    S* gi = grad_input + (g.batch * channels + c) * height * width;
    for (int64_t iy = 0; iy < g.grid_h; ++iy) {
      const T y = roialign::sample_coord(g.start_h, ph, g.bin_h, iy, g.grid_h);
      for (int64_t ix = 0; ix < g.grid_w; ++ix) {
        const T x = roialign::sample_coord(g.start_w, pw, g.bin_w, ix, g.grid_w);
        int64_t pos[4];
        T w[4];
        if (!roialign::bilinear_tap(y, x, height, width, pos, w)) continue;
        for (int q = 0; q < 4; ++q) roialign::atomic_add(gi + pos[q], div_rn(mul_rn(gb, w[q]), count));
      }
    }
  }
}

}  // namespace

torch::stable::Tensor _roi_align_backward_cuda(const torch::stable::Tensor& grad,
                                               const torch::stable::Tensor& rois, double spatial_scale,
                                               int64_t pooled_height, int64_t pooled_width, int64_t batch_size,
                                               int64_t channels, int64_t height, int64_t width,
                                               int64_t sampling_ratio, bool aligned) {
  cuutil::check_cuda(grad, kOp, "grad");
  cuutil::check_cuda(rois, kOp, "rois");
  cuutil::check_same_device(grad, rois, kOp, "grad", "rois");
  cuutil::check_same_dtype(grad, rois, kOp, "grad", "rois");
  roialign::check_sampling_ratio(sampling_ratio, kOp);
  STD_TORCH_CHECK(rois.dim() == 2 && rois.size(1) == 5, kOp,
                  ": expected 'rois' of shape [K, 5] (batch index, x1, y1, x2, y2)");
  STD_TORCH_CHECK(batch_size >= 0 && channels >= 0 && height >= 0 && width >= 0, kOp,
                  ": expected non-negative sizes, got ", batch_size, " x ", channels, " x ", height, " x ", width);
  const int64_t num_rois = rois.size(0);
  STD_TORCH_CHECK(grad.dim() == 4 && grad.size(0) == num_rois && grad.size(1) == channels &&
                      grad.size(2) == pooled_height && grad.size(3) == pooled_width,
                  kOp, ": expected 'grad' of shape [", num_rois, ", ", channels, ", ", pooled_height, ", ",
                  pooled_width, "]");
  const torch::stable::accelerator::DeviceGuard guard(grad.get_device_index());
  if (grad.numel() > 0) roialign::check_roi_dtype(grad, kOp, "grad");  // as torchvision
  torch::stable::Tensor grad_input = torch::stable::new_zeros(grad, {batch_size, channels, height, width});
  if (grad.numel() == 0 || grad_input.numel() == 0) return grad_input;
  const torch::stable::Tensor g = cuutil::contig(grad);
  const torch::stable::Tensor r = cuutil::contig(rois);
  const cudaStream_t stream = cuutil::current_stream(grad.get_device_index());
  const int64_t total = g.numel();
  constexpr int threads = 256;
  roialign::dispatch_roi_dtype(g.scalar_type(), [&](auto tag) {
    using S = decltype(tag);
    roi_align_backward_kernel<S><<<cuutil::grid_for(total, threads, int64_t(1) << 20), threads, 0, stream>>>(
        static_cast<const S*>(g.const_data_ptr()), static_cast<const S*>(r.const_data_ptr()),
        static_cast<S*>(grad_input.mutable_data_ptr()), total, batch_size, channels, height, width,
        roialign::scale_of<S>(spatial_scale), pooled_height, pooled_width, sampling_ratio, aligned);
    STD_CUDA_KERNEL_LAUNCH_CHECK();
  });
  return grad_input;
}

}  // namespace example
