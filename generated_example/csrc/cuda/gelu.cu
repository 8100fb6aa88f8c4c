// Hand-written CUDA kernel for example::gelu (tanh approximation, user-owned).
// gelu(x) = 0.5 x (1 + tanh(u)), u = sqrt(2/pi)(x + 0.044715 x^3).
// Grid-stride, coalesced 16-byte (float4 / double2) loads and stores.
#include "../gelu.h"
#include "cuda_utils.cuh"

namespace example {
namespace {

template <typename T>
struct gelu_op {
  __device__ __forceinline__ T operator()(T x) const {
    const T beta = T(0.7978845608028654), kappa = T(0.044715);
    return T(0.5) * x * (T(1) + tanh(beta * (x + kappa * x * x * x)));
  }
};

}  // namespace

torch::stable::Tensor gelu_cuda(const torch::stable::Tensor& x_) {
  constexpr const char* op = "example::gelu";
  cuutil::check_cuda(x_, op, "x");
  cuutil::check_float_dtype(x_, op, "x");
  torch::stable::accelerator::DeviceGuard guard(x_.get_device_index());
  const torch::stable::Tensor x = cuutil::contig(x_);
  torch::stable::Tensor out = cuutil::empty_contig_like(x);
  const int64_t n = x.numel();
  if (n == 0) return out;
  cudaStream_t stream = cuutil::current_stream(x.get_device_index());
  if (x.scalar_type() == cuutil::ScalarType::Float) {
    cuutil::launch_map1(x.const_data_ptr<float>(), out.mutable_data_ptr<float>(), n,
                        gelu_op<float>{}, stream);
  } else {
    cuutil::launch_map1(x.const_data_ptr<double>(), out.mutable_data_ptr<double>(), n,
                        gelu_op<double>{}, stream);
  }
  return out;
}

}  // namespace example
