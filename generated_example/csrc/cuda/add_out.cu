// Hand-written CUDA kernel for example::add_out (user-owned): out <- a + b.
// Schema: add_out(Tensor a, Tensor b, Tensor(a!) out) -> ()
// `out` must have a's shape/dtype/device; it may alias a or b (no __restrict__
// in this kernel), and may be non-contiguous (computed contiguously, copied in).
#include "../add_out.h"
#include "cuda_utils.cuh"

namespace example {
namespace {

// Same-index read-then-write per element, so aliasing out with a or b is safe.
template <typename T, bool kVec>
__global__ void add_out_kernel(const T* a, const T* b, T* o, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if constexpr (kVec) {
    using V = cuutil::Vec16<T>;
    constexpr int W = V::N;
    const int64_t nv = n / W;
    for (int64_t i = tid; i < nv; i += stride) {
      const V x = reinterpret_cast<const V*>(a)[i];
      const V y = reinterpret_cast<const V*>(b)[i];
      V r;
#pragma unroll
      for (int k = 0; k < W; ++k) r.v[k] = x.v[k] + y.v[k];
      reinterpret_cast<V*>(o)[i] = r;
    }
    for (int64_t i = nv * W + tid; i < n; i += stride) o[i] = a[i] + b[i];
  } else {
    for (int64_t i = tid; i < n; i += stride) o[i] = a[i] + b[i];
  }
}

template <typename T>
void launch(const T* a, const T* b, T* o, int64_t n, cudaStream_t stream) {
  constexpr int kThreads = 256;
  if (cuutil::aligned16(a) && cuutil::aligned16(b) && cuutil::aligned16(o)) {
    add_out_kernel<T, true><<<cuutil::grid_for(n / cuutil::Vec16<T>::N + 1, kThreads),
                              kThreads, 0, stream>>>(a, b, o, n);
  } else {
    add_out_kernel<T, false><<<cuutil::grid_for(n, kThreads), kThreads, 0, stream>>>(a, b, o, n);
  }
  STD_CUDA_KERNEL_LAUNCH_CHECK();
}

void add_into(const torch::stable::Tensor& a, const torch::stable::Tensor& b,
              torch::stable::Tensor& o, cudaStream_t stream) {
  const int64_t n = a.numel();
  if (n == 0) return;
  if (a.scalar_type() == cuutil::ScalarType::Float) {
    launch(a.const_data_ptr<float>(), b.const_data_ptr<float>(), o.mutable_data_ptr<float>(), n, stream);
  } else {
    launch(a.const_data_ptr<double>(), b.const_data_ptr<double>(), o.mutable_data_ptr<double>(), n, stream);
  }
}

}  // namespace

void add_out_cuda(const torch::stable::Tensor& a_, const torch::stable::Tensor& b_,
                  const torch::stable::Tensor& out_) {
  constexpr const char* op = "example::add_out";
  cuutil::check_cuda(a_, op, "a");
  cuutil::check_cuda(b_, op, "b");
  cuutil::check_cuda(out_, op, "out");
  cuutil::check_same_device(a_, b_, op, "a", "b");
  cuutil::check_same_device(a_, out_, op, "a", "out");
  cuutil::check_float_dtype(a_, op, "a");
  cuutil::check_same_dtype(a_, b_, op, "a", "b");
  cuutil::check_same_dtype(a_, out_, op, "a", "out");
  cuutil::check_same_sizes(a_, b_, op, "a", "b");
  cuutil::check_same_sizes(a_, out_, op, "a", "out");
  torch::stable::accelerator::DeviceGuard guard(a_.get_device_index());
  const torch::stable::Tensor a = cuutil::contig(a_);
  const torch::stable::Tensor b = cuutil::contig(b_);
  torch::stable::Tensor out = out_;
  cudaStream_t stream = cuutil::current_stream(a.get_device_index());
  if (out.is_contiguous()) {
    add_into(a, b, out, stream);
  } else {
    torch::stable::Tensor tmp = cuutil::empty_contig_like(a);
    add_into(a, b, tmp, stream);
    torch::stable::copy_(out, tmp);  // aten::copy_ runs on the current stream
  }
}

}  // namespace example
