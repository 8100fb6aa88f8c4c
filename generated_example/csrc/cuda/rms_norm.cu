// CUDA kernel of example::rms_norm (user-owned): see rms_norm_rows.cuh.
#include "../rms_norm.h"
#include "rms_norm_rows.cuh"

namespace example {

void rms_norm_cuda(const torch::stable::Tensor& result, const torch::stable::Tensor& input,
                   const torch::stable::Tensor& weight, double epsilon) {
  constexpr const char* op = "example::rms_norm";
  cuutil::check_cuda(result, op, "result");
  cuutil::check_cuda(input, op, "input");
  cuutil::check_cuda(weight, op, "weight");
  cuutil::check_same_device(input, result, op, "input", "result");
  cuutil::check_same_device(input, weight, op, "input", "weight");
  cuutil::check_llm_dtype(input, op, "input");
  cuutil::check_same_dtype(input, result, op, "input", "result");
  cuutil::check_same_dtype(input, weight, op, "input", "weight");
  STD_TORCH_CHECK(input.dim() >= 1, op, ": expected 'input' to have at least 1 dimension");
  const int64_t n = input.size(input.dim() - 1);
  STD_TORCH_CHECK(weight.dim() == 1 && weight.size(0) == n, op, ": expected 'weight' of shape (",
                  n, ",) (the last dim of input)");
  cuutil::check_same_sizes(result, input, op, "result", "input");
  if (input.numel() == 0) return;
  const torch::stable::accelerator::DeviceGuard guard(input.get_device_index());
  const torch::stable::Tensor x = cuutil::contig(input);
  const torch::stable::Tensor w = cuutil::contig(weight);
  const torch::stable::Tensor y = result.is_contiguous() ? result : torch::stable::new_empty(result, result.sizes());
  const int64_t rows = x.numel() / n;
  const cudaStream_t stream = cuutil::current_stream(input.get_device_index());
  cuutil::dispatch_llm_dtype(x.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    const T* xp = static_cast<const T*>(x.const_data_ptr());
    const T* wp = static_cast<const T*>(w.const_data_ptr());
    T* yp = static_cast<T*>(y.mutable_data_ptr());
    constexpr int W = rmsnorm::Pack<T>::N;
    const bool vec = n % W == 0 && cuutil::aligned16(xp) && cuutil::aligned16(wp) && cuutil::aligned16(yp);
    const int threads = rmsnorm::row_threads(vec ? n / W : n);
    if (vec)
      rmsnorm::rms_norm_kernel<T, true><<<rmsnorm::row_blocks(rows), threads, 0, stream>>>(
          yp, xp, wp, rows, n, static_cast<float>(epsilon));
    else
      rmsnorm::rms_norm_kernel<T, false><<<rmsnorm::row_blocks(rows), threads, 0, stream>>>(
          yp, xp, wp, rows, n, static_cast<float>(epsilon));
    STD_CUDA_KERNEL_LAUNCH_CHECK();
  });
  cuutil::write_back(result, y);
}

}  // namespace example
