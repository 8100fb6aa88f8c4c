// CUDA kernel of example::rms_norm (user-owned): see rms_norm_rows.cuh.
#include "../rms_norm.h"
#include "rms_norm_rows.cuh"

namespace example {
namespace {

template <typename T, int W>
void launch(T* y, const T* x, const T* w, int64_t rows, int64_t n, float eps, cudaStream_t stream) {
  const int64_t packs = n / W;
  if (rmsnorm::row_fits_registers(packs))
    rmsnorm::rms_norm_cached_kernel<T, W>
        <<<rmsnorm::row_blocks(rows), rmsnorm::cached_row_threads(packs), 0, stream>>>(y, x, w, rows, n, eps);
  else
    rmsnorm::rms_norm_kernel<T, W>
        <<<rmsnorm::row_blocks(rows), rmsnorm::row_threads(packs), 0, stream>>>(y, x, w, rows, n, eps);
  STD_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

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
    constexpr int W = rmsnorm::kVecWidth<T>;
    const bool vec = n % W == 0 && cuutil::aligned16(xp) && cuutil::aligned16(wp) && cuutil::aligned16(yp);
    if (vec)
      launch<T, W>(yp, xp, wp, rows, n, static_cast<float>(epsilon), stream);
    else
      launch<T, 1>(yp, xp, wp, rows, n, static_cast<float>(epsilon), stream);
  });
  cuutil::write_back(result, y);
}

}  // namespace example
