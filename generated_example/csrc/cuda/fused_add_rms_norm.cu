// CUDA kernel of example::fused_add_rms_norm (user-owned): see rms_norm_rows.cuh.
#include "../fused_add_rms_norm.h"
#include "rms_norm_rows.cuh"

namespace example {
namespace {

template <typename T, int W>
void launch(T* x, T* r, const T* w, int64_t rows, int64_t n, float eps, cudaStream_t stream) {
  const int64_t packs = n / W;
  if (rmsnorm::row_fits_registers(packs))
    rmsnorm::fused_add_rms_norm_cached_kernel<T, W>
        <<<rmsnorm::row_blocks(rows), rmsnorm::cached_row_threads(packs), 0, stream>>>(x, r, w, rows, n, eps);
  else
    rmsnorm::fused_add_rms_norm_kernel<T, W>
        <<<rmsnorm::row_blocks(rows), rmsnorm::row_threads(packs), 0, stream>>>(x, r, w, rows, n, eps);
  STD_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

void fused_add_rms_norm_cuda(const torch::stable::Tensor& input, const torch::stable::Tensor& residual,
                             const torch::stable::Tensor& weight, double epsilon) {
  constexpr const char* op = "example::fused_add_rms_norm";
  cuutil::check_cuda(input, op, "input");
  cuutil::check_cuda(residual, op, "residual");
  cuutil::check_cuda(weight, op, "weight");
  cuutil::check_same_device(input, residual, op, "input", "residual");
  cuutil::check_same_device(input, weight, op, "input", "weight");
  cuutil::check_llm_dtype(input, op, "input");
  cuutil::check_same_dtype(input, residual, op, "input", "residual");
  cuutil::check_same_dtype(input, weight, op, "input", "weight");
  STD_TORCH_CHECK(input.dim() >= 1, op, ": expected 'input' to have at least 1 dimension");
  const int64_t n = input.size(input.dim() - 1);
  STD_TORCH_CHECK(weight.dim() == 1 && weight.size(0) == n, op, ": expected 'weight' of shape (",
                  n, ",) (the last dim of input)");
  cuutil::check_same_sizes(residual, input, op, "residual", "input");
  STD_TORCH_CHECK(input.numel() == 0 || input.data_ptr() != residual.data_ptr(), op,
                  ": 'input' and 'residual' must not be the same tensor");
  if (input.numel() == 0) return;
  const torch::stable::accelerator::DeviceGuard guard(input.get_device_index());
  const torch::stable::Tensor x = cuutil::mutable_contig(input);
  const torch::stable::Tensor res = cuutil::mutable_contig(residual);
  const torch::stable::Tensor w = cuutil::contig(weight);
  const int64_t rows = x.numel() / n;
  const cudaStream_t stream = cuutil::current_stream(input.get_device_index());
  cuutil::dispatch_llm_dtype(x.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    T* xp = static_cast<T*>(x.mutable_data_ptr());
    T* rp = static_cast<T*>(res.mutable_data_ptr());
    const T* wp = static_cast<const T*>(w.const_data_ptr());
    constexpr int W = rmsnorm::kVecWidth<T>;
    const bool vec = n % W == 0 && cuutil::aligned16(xp) && cuutil::aligned16(rp) && cuutil::aligned16(wp);
    if (vec)
      launch<T, W>(xp, rp, wp, rows, n, static_cast<float>(epsilon), stream);
    else
      launch<T, 1>(xp, rp, wp, rows, n, static_cast<float>(epsilon), stream);
  });
  cuutil::write_back(input, x);
  cuutil::write_back(residual, res);
}

}  // namespace example
