// CPU kernel of example::fused_add_rms_norm (user-owned).
//
// One row at a time, as vLLM's RMSNorm.forward_native: the sum of squares of
// the float32 sums z = input + residual (float32 accumulation), then, from the
// rows still in L1/L2, residual = T(z) and input = T(T(z * s) * weight): the
// unrounded sum is normalised. Rows are split across threads. Arithmetic and
// roundings: rms_norm_rows.h.
#include "../fused_add_rms_norm.h"
#include "rms_norm_rows.h"

namespace example {
namespace {

using kutil::Tensor;

template <typename T>
void fused_rows(T* x, T* res, const T* w, int64_t rows, int64_t n, double eps) {
  const bool simd = kutil::cpu_has_avx2_fma();
  const bool wide = kutil::cpu_has_avx512();
  const std::vector<float> wf = wide ? rmsnorm::float_weight(w, n) : std::vector<float>();
  torch::stable::parallel_for(0, rows, kutil::row_grain(n), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      T* xr = x + r * n;
      T* rr = res + r * n;
#if EXAMPLE_X86
      if (wide) {
        const bool last = r + 1 == r1;
        const float s = rmsnorm::inv_rms(rmsnorm::add_sumsq_avx512(xr, rr, n), n, eps);
        if constexpr (std::is_same_v<T, float>)
          rmsnorm::scale_row_avx512(rr, w, xr, n, s, last ? nullptr : xr + n, last ? nullptr : rr + n);
        else
          rmsnorm::scale_row_avx512(rr, wf.data(), xr, n, s, last ? nullptr : xr + n,
                                    last ? nullptr : rr + n);
        continue;
      }
      if (simd) {
        const float s = rmsnorm::inv_rms(rmsnorm::sumsq_of_sum_avx2(xr, rr, n), n, eps);
        rmsnorm::add_scale_row_avx2(xr, rr, w, xr, n, s);
        continue;
      }
#endif
      const float s = rmsnorm::inv_rms(rmsnorm::sumsq_of_sum_scalar(xr, rr, n), n, eps);
      rmsnorm::add_scale_row_scalar(xr, rr, w, xr, n, s);
    }
  });
}

}  // namespace

void fused_add_rms_norm_cpu(const torch::stable::Tensor& input, const torch::stable::Tensor& residual,
                            const torch::stable::Tensor& weight, double epsilon) {
  constexpr const char* op = "example::fused_add_rms_norm";
  kutil::check_cpu(input, op, "input");
  kutil::check_cpu(residual, op, "residual");
  kutil::check_cpu(weight, op, "weight");
  kutil::check_llm_dtype(input, op, "input");
  kutil::check_same_dtype(input, residual, op, "input", "residual");
  kutil::check_same_dtype(input, weight, op, "input", "weight");
  STD_TORCH_CHECK(input.dim() >= 1, op, ": expected 'input' to have at least 1 dimension");
  const int64_t n = input.size(input.dim() - 1);
  STD_TORCH_CHECK(weight.dim() == 1 && weight.size(0) == n, op, ": expected 'weight' of shape (",
                  n, ",) (the last dim of input)");
  kutil::check_same_sizes(residual, input, op, "residual", "input");
  STD_TORCH_CHECK(input.numel() == 0 || input.data_ptr() != residual.data_ptr(), op,
                  ": 'input' and 'residual' must not be the same tensor");
  if (input.numel() == 0) return;
  const Tensor x = kutil::mutable_contig(input);
  const Tensor res = kutil::mutable_contig(residual);
  const Tensor w = kutil::contig(weight);
  const int64_t rows = x.numel() / n;
  kutil::dispatch_llm_dtype(x.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    fused_rows(static_cast<T*>(x.mutable_data_ptr()), static_cast<T*>(res.mutable_data_ptr()),
               static_cast<const T*>(w.const_data_ptr()), rows, n, epsilon);
  });
  kutil::write_back(input, x);
  kutil::write_back(residual, res);
}

}  // namespace example
