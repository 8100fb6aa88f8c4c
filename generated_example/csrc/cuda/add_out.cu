// Hand-written CUDA kernel for example::add_out (user-owned): out <- a + b.
// Schema: add_out(Tensor a, Tensor b, Tensor(a!) out) -> ()
// `out` must have a's shape/dtype/device; it may be a or b itself (no
// __restrict__ in this kernel) but may not partially overlap them, and may be
// non-contiguous (computed contiguously, copied in).
#include "../add_out.h"
#include "cuda_utils.cuh"

#include <algorithm>
#include <vector>

namespace example {
namespace {

// Where a tensor's elements lie: enough to decide how two tensors overlap
// without touching the device (plain values, so host code can test it).
struct Layout {
  uintptr_t data;
  const int64_t* sizes;
  const int64_t* strides;
  int64_t dim;
  int64_t itemsize;
};

Layout layout_of(const torch::stable::Tensor& t) {
  return {reinterpret_cast<uintptr_t>(t.data_ptr()), t.sizes().data(), t.strides().data(),
          t.dim(), static_cast<int64_t>(t.element_size())};
}

int64_t numel_of(const Layout& t) {
  int64_t n = 1;
  for (int64_t d = 0; d < t.dim; ++d) n *= t.sizes[d];
  return n;
}

// Every element at its own address and no gaps: strides, smallest first, are
// the running products of the sizes (ATen's is_non_overlapping_and_dense).
bool non_overlapping_and_dense(const Layout& t) {
  std::vector<int64_t> order;
  for (int64_t d = 0; d < t.dim; ++d)
    if (t.sizes[d] != 1) order.push_back(d);
  std::sort(order.begin(), order.end(),
            [&](int64_t x, int64_t y) { return t.strides[x] < t.strides[y]; });
  int64_t expected = 1;
  for (const int64_t d : order) {
    if (t.strides[d] != expected) return false;
    expected *= t.sizes[d];
  }
  return true;
}

enum class Overlap { kNone, kFull, kPartial, kTooHard };

// ATen's rule for an output and an input (get_overlap_status): the same
// elements in the same order are a full overlap (an in-place add, safe: each
// element is read before it is written, by the same thread); intersecting
// spans are a partial one (threads would read elements that others already
// overwrote); layouts with gaps or repeats are left alone, as ATen does (this
// kernel copies such inputs, and writes such outputs through a temporary).
Overlap overlap_of(const Layout& out, const Layout& in) {
  const int64_t n_out = numel_of(out), n_in = numel_of(in);
  if (n_out == 0 || n_in == 0) return Overlap::kNone;
  if (!non_overlapping_and_dense(out) || !non_overlapping_and_dense(in)) return Overlap::kTooHard;
  const uintptr_t out_end = out.data + uintptr_t(n_out * out.itemsize);
  const uintptr_t in_end = in.data + uintptr_t(n_in * in.itemsize);
  if (out.data == in.data && out_end == in_end) {
    return out.dim == in.dim && std::equal(out.strides, out.strides + out.dim, in.strides)
               ? Overlap::kFull
               : Overlap::kPartial;
  }
  return out.data < in_end && in.data < out_end ? Overlap::kPartial : Overlap::kNone;
}

void check_no_partial_overlap(const torch::stable::Tensor& out, const torch::stable::Tensor& in,
                              const char* op, const char* name) {
  STD_TORCH_CHECK(overlap_of(layout_of(out), layout_of(in)) != Overlap::kPartial, op,
                  ": 'out' partially overlaps '", name,
                  "' in memory (some of their elements share memory, but they are not the "
                  "same view); pass a separate 'out' or clone() the input");
}

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
  check_no_partial_overlap(out_, a_, op, "a");
  check_no_partial_overlap(out_, b_, op, "b");
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
