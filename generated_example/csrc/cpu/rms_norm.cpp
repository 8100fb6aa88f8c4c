// CPU kernel of example::rms_norm (user-owned).
//
// One row at a time: the sum of squares (float32, 4 vector accumulators: AVX-512
// or AVX2, Note [Run-time ISA dispatch]),
// then the scaled row times weight written to `result`; the second pass reads
// the row again from L1/L2. Rows are split across threads. Arithmetic and
// roundings: rms_norm_rows.h.
#include "../rms_norm.h"
#include "rms_norm_rows.h"

namespace example {
namespace {

using kutil::Tensor;

template <typename T>
void rms_norm_rows(const T* x, const T* w, T* y, int64_t rows, int64_t n, double eps) {
  const bool simd = kutil::cpu_has_avx2_fma();
  const bool wide = kutil::cpu_has_avx512();
  const std::vector<float> wf = wide ? rmsnorm::float_weight(w, n) : std::vector<float>();
  torch::stable::parallel_for(0, rows, kutil::row_grain(n), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * n;
      T* yr = y + r * n;
#if EXAMPLE_X86
      if (wide) {
        const float s = rmsnorm::inv_rms(rmsnorm::sumsq_avx512(xr, n), n, eps);
        if constexpr (std::is_same_v<T, float>)
          rmsnorm::scale_row_avx512(xr, w, yr, n, s, r + 1 < r1 ? xr + n : nullptr);
        else
          rmsnorm::scale_row_avx512(xr, wf.data(), yr, n, s, r + 1 < r1 ? xr + n : nullptr);
        continue;
      }
      if (simd) {
        const float s = rmsnorm::inv_rms(rmsnorm::sumsq_avx2(xr, n), n, eps);
        rmsnorm::scale_row_avx2(xr, w, yr, n, s);
        continue;
      }
#endif
      const float s = rmsnorm::inv_rms(rmsnorm::sumsq_scalar(xr, n), n, eps);
      rmsnorm::scale_row_scalar(xr, w, yr, n, s);
    }
  });
}

}  // namespace

void rms_norm_cpu(const torch::stable::Tensor& result, const torch::stable::Tensor& input,
                  const torch::stable::Tensor& weight, double epsilon) {
  constexpr const char* op = "example::rms_norm";
  kutil::check_cpu(result, op, "result");
  kutil::check_cpu(input, op, "input");
  kutil::check_cpu(weight, op, "weight");
  kutil::check_llm_dtype(input, op, "input");
  kutil::check_same_dtype(input, result, op, "input", "result");
  kutil::check_same_dtype(input, weight, op, "input", "weight");
  STD_TORCH_CHECK(input.dim() >= 1, op, ": expected 'input' to have at least 1 dimension");
  const int64_t n = input.size(input.dim() - 1);
  STD_TORCH_CHECK(weight.dim() == 1 && weight.size(0) == n, op, ": expected 'weight' of shape (",
                  n, ",) (the last dim of input)");
  kutil::check_same_sizes(result, input, op, "result", "input");
  if (input.numel() == 0) return;
  const Tensor x = kutil::contig(input);
  const Tensor w = kutil::contig(weight);
  // A strided `result` is computed in a contiguous buffer, then copied into it.
  const Tensor y = result.is_contiguous() ? result : torch::stable::new_empty(result, result.sizes());
  const int64_t rows = x.numel() / n;
  kutil::dispatch_llm_dtype(x.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    rms_norm_rows(static_cast<const T*>(x.const_data_ptr()), static_cast<const T*>(w.const_data_ptr()),
                  static_cast<T*>(y.mutable_data_ptr()), rows, n, epsilon);
  });
  kutil::write_back(result, y);
}

}  // namespace example
