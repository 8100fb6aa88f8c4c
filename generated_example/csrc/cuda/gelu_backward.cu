// Hand-written CUDA kernel for example::gelu_backward (tanh approximation,
// user-owned): grad * (0.5(1+t) + 0.5 x (1-t^2) u'(x)), t = tanh(u),
// u = sqrt(2/pi)(x + 0.044715 x^3), u' = sqrt(2/pi)(1 + 3*0.044715 x^2).
// Grid-stride, coalesced 16-byte (float4 / double2) loads and stores.
#include "../gelu_backward.h"
#include "cuda_utils.cuh"

namespace example {
namespace {

template <typename T>
struct gelu_bwd_op {
  __device__ __forceinline__ T operator()(T g, T x) const {
    const T beta = T(0.7978845608028654), kappa = T(0.044715);
    const T x2 = x * x;
    const T t = tanh(beta * (x + kappa * x2 * x));
    const T du = beta * (T(1) + T(3) * kappa * x2);
    return g * (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * du);
  }
};

}  // namespace

torch::stable::Tensor gelu_backward_cuda(const torch::stable::Tensor& grad_,
                                         const torch::stable::Tensor& x_) {
  constexpr const char* op = "example::gelu_backward";
  cuutil::check_cuda(grad_, op, "grad");
  cuutil::check_cuda(x_, op, "x");
  cuutil::check_same_device(grad_, x_, op, "grad", "x");
  cuutil::check_float_dtype(x_, op, "x");
  cuutil::check_same_dtype(grad_, x_, op, "grad", "x");
  cuutil::check_same_sizes(grad_, x_, op, "grad", "x");
  torch::stable::accelerator::DeviceGuard guard(x_.get_device_index());
  const torch::stable::Tensor g = cuutil::contig(grad_);
  const torch::stable::Tensor x = cuutil::contig(x_);
  torch::stable::Tensor out = cuutil::empty_contig_like(x);
  const int64_t n = x.numel();
  if (n == 0) return out;
  cudaStream_t stream = cuutil::current_stream(x.get_device_index());
  if (x.scalar_type() == cuutil::ScalarType::Float) {
    cuutil::launch_map2(g.const_data_ptr<float>(), x.const_data_ptr<float>(),
                        out.mutable_data_ptr<float>(), n, gelu_bwd_op<float>{}, stream);
  } else {
    cuutil::launch_map2(g.const_data_ptr<double>(), x.const_data_ptr<double>(),
                        out.mutable_data_ptr<double>(), n, gelu_bwd_op<double>{}, stream);
  }
  return out;
}

}  // namespace example
