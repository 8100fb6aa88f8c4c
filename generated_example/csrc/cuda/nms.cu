// CUDA kernel of example::nms (user-owned), torchvision's semantics.
//
// 1. order = at::sort(scores, descending) (torchvision's order, ties included);
// 2. the boxes in that order, structure of arrays, with their areas;
// 3. a bit mask: row i, word b holds bit c when box i suppresses box
//    j = 64 b + c > i (IoU > threshold), one 64-thread block per 64 x 64 tile;
// 4. one block walks the boxes in order, keeps those not yet removed and ORs
//    each kept box's row into the removed set (in shared memory when it fits);
// 5. the kept count comes back to the host (the output size depends on it).
// The IoU is the CPU kernel's expression with explicitly rounded arithmetic
// (Note [Rounded device arithmetic]): both devices keep the same boxes.
#include "../nms.h"
#include "cuda_utils.cuh"

#include <array>

namespace example {
namespace {

constexpr const char* kOp = "example::nms";
constexpr int kTile = 64;
constexpr int kScanThreads = 256;
constexpr int64_t kMaxSharedWords = (48 * 1024) / 8;

torch::stable::Tensor sort_descending_indices(const torch::stable::Tensor& scores) {
  std::array<StableIValue, 3> stack{torch::stable::detail::from(scores),
                                    torch::stable::detail::from(int64_t(0)),
                                    torch::stable::detail::from(true)};
  STD_TORCH_CHECK(torch_call_dispatcher("aten::sort", "", stack.data(), TORCH_ABI_VERSION) == 0, kOp,
                  ": sorting the scores failed");
  (void)torch::stable::detail::to<torch::stable::Tensor>(stack[0]);
  return torch::stable::detail::to<torch::stable::Tensor>(stack[1]);
}

// soa: x1[n], y1[n], x2[n], y2[n], area[n] of the boxes in score order.
template <typename T>
__global__ void gather_kernel(const T* __restrict__ dets, const int64_t* __restrict__ order, int64_t n,
                              T* __restrict__ soa) {
  using cuutil::mul_rn;
  using cuutil::sub_rn;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const T* d = dets + 4 * order[i];
    soa[i] = d[0];
    soa[n + i] = d[1];
    soa[2 * n + i] = d[2];
    soa[3 * n + i] = d[3];
    soa[4 * n + i] = mul_rn(sub_rn(d[2], d[0]), sub_rn(d[3], d[1]));
  }
}

// torchvision's test with std::max / std::min operand order (a < b ? b : a; b < a ? b : a).
template <typename T>
__device__ __forceinline__ bool suppresses(const T* a, const T* b, double threshold) {
  using namespace cuutil;
  const T xx1 = a[0] < b[0] ? b[0] : a[0];
  const T yy1 = a[1] < b[1] ? b[1] : a[1];
  const T xx2 = b[2] < a[2] ? b[2] : a[2];
  const T yy2 = b[3] < a[3] ? b[3] : a[3];
  const T dw = sub_rn(xx2, xx1), dh = sub_rn(yy2, yy1);
  const T w = T(0) < dw ? dw : T(0);
  const T h = T(0) < dh ? dh : T(0);
  const T inter = mul_rn(w, h);
  const T ovr = div_rn(inter, sub_rn(add_rn(a[4], b[4]), inter));
  return static_cast<double>(ovr) > threshold;
}

template <typename T>
__global__ void mask_kernel(const T* __restrict__ soa, int64_t n, int64_t words, double threshold,
                            unsigned long long* __restrict__ mask) {
  const int64_t row_tile = blockIdx.x, col_tile = blockIdx.y;
  if (col_tile < row_tile) return;  // only j > i is ever read
  __shared__ T cols[5][kTile];
  const int64_t j0 = col_tile * kTile;
  const int64_t ncols = min(int64_t(kTile), n - j0);
  if (threadIdx.x < ncols)
    for (int f = 0; f < 5; ++f) cols[f][threadIdx.x] = soa[f * n + j0 + threadIdx.x];
  __syncthreads();
  const int64_t i = row_tile * kTile + threadIdx.x;
  if (i >= n) return;
  T box[5];
  for (int f = 0; f < 5; ++f) box[f] = soa[f * n + i];
  unsigned long long bits = 0;
  for (int64_t c = (col_tile == row_tile ? threadIdx.x + 1 : 0); c < ncols; ++c) {
    const T other[5] = {cols[0][c], cols[1][c], cols[2][c], cols[3][c], cols[4][c]};
    if (suppresses(box, other, threshold)) bits |= 1ull << c;
  }
  mask[i * words + col_tile] = bits;
}

// One block: the greedy pass. `removed` is shared memory when `global_removed` is null.
__global__ void scan_kernel(const unsigned long long* __restrict__ mask, const int64_t* __restrict__ order,
                            int64_t n, int64_t words, unsigned long long* global_removed,
                            int64_t* __restrict__ keep, int64_t* __restrict__ num_keep) {
  extern __shared__ unsigned long long shared_removed[];
  unsigned long long* removed = global_removed != nullptr ? global_removed : shared_removed;
  for (int64_t w = threadIdx.x; w < words; w += blockDim.x) removed[w] = 0;
  __syncthreads();
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t word = i / kTile;
    if ((removed[word] >> (i % kTile)) & 1ull) continue;  // uniform across the block
    if (threadIdx.x == 0) keep[count] = order[i];
    ++count;
    const unsigned long long* row = mask + i * words;
    for (int64_t w = word + threadIdx.x; w < words; w += blockDim.x) removed[w] |= row[w];
    __syncthreads();
  }
  if (threadIdx.x == 0) *num_keep = count;
}

}  // namespace

torch::stable::Tensor nms_cuda(const torch::stable::Tensor& dets, const torch::stable::Tensor& scores,
                               double iou_threshold) {
  cuutil::check_cuda(dets, kOp, "dets");
  cuutil::check_cuda(scores, kOp, "scores");
  cuutil::check_same_device(dets, scores, kOp, "dets", "scores");
  STD_TORCH_CHECK(dets.dim() == 2 && dets.size(1) == 4, kOp,
                  ": expected 'dets' of shape [N, 4] (x1, y1, x2, y2), got ", dets.dim(), " dims");
  STD_TORCH_CHECK(scores.dim() == 1 && scores.size(0) == dets.size(0), kOp,
                  ": expected 'scores' of shape [N] with N = ", dets.size(0), " boxes");
  cuutil::check_float_dtype(dets, kOp, "dets");
  cuutil::check_same_dtype(dets, scores, kOp, "dets", "scores");
  const torch::stable::accelerator::DeviceGuard guard(dets.get_device_index());
  const int64_t n = dets.size(0);
  if (n == 0) return torch::stable::new_empty(dets, {0}, cuutil::ScalarType::Long);
  const int64_t tiles = (n + kTile - 1) / kTile;
  STD_TORCH_CHECK(tiles <= 65535, kOp, ": at most ", 65535 * kTile, " boxes on CUDA, got ", n);
  const cudaStream_t stream = cuutil::current_stream(dets.get_device_index());
  const torch::stable::Tensor order = cuutil::contig(sort_descending_indices(scores));
  const torch::stable::Tensor d = cuutil::contig(dets);
  const torch::stable::Tensor soa = torch::stable::new_empty(d, {5, n});
  const torch::stable::Tensor mask = torch::stable::new_empty(d, {n, tiles}, cuutil::ScalarType::Long);
  torch::stable::Tensor keep = torch::stable::new_empty(d, {n}, cuutil::ScalarType::Long);
  const torch::stable::Tensor num_keep = torch::stable::new_empty(d, {1}, cuutil::ScalarType::Long);
  const bool shared = tiles <= kMaxSharedWords;
  const torch::stable::Tensor removed =
      torch::stable::new_empty(d, {shared ? 0 : tiles}, cuutil::ScalarType::Long);
  auto* mask_p = static_cast<unsigned long long*>(mask.mutable_data_ptr());
  const auto* order_p = static_cast<const int64_t*>(order.const_data_ptr());
  auto run = [&](auto tag) {
    using T = decltype(tag);
    T* soa_p = static_cast<T*>(soa.mutable_data_ptr());
    gather_kernel<T><<<cuutil::grid_for(n, 256), 256, 0, stream>>>(static_cast<const T*>(d.const_data_ptr()),
                                                                   order_p, n, soa_p);
    STD_CUDA_KERNEL_LAUNCH_CHECK();
    mask_kernel<T><<<dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(tiles)), kTile, 0, stream>>>(
        soa_p, n, tiles, iou_threshold, mask_p);
    STD_CUDA_KERNEL_LAUNCH_CHECK();
  };
  if (d.scalar_type() == cuutil::ScalarType::Float)
    run(float{});
  else
    run(double{});
  scan_kernel<<<1, kScanThreads, shared ? tiles * sizeof(unsigned long long) : 0, stream>>>(
      mask_p, order_p, n, tiles, shared ? nullptr : static_cast<unsigned long long*>(removed.mutable_data_ptr()),
      static_cast<int64_t*>(keep.mutable_data_ptr()), static_cast<int64_t*>(num_keep.mutable_data_ptr()));
  STD_CUDA_KERNEL_LAUNCH_CHECK();
  int64_t kept = 0;
  STD_CUDA_CHECK(cudaMemcpyAsync(&kept, num_keep.const_data_ptr(), sizeof(int64_t), cudaMemcpyDeviceToHost, stream));
  STD_CUDA_CHECK(cudaStreamSynchronize(stream));
  return torch::stable::narrow(keep, 0, 0, kept);
}

}  // namespace example
