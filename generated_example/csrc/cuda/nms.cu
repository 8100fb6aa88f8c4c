// CUDA kernel of example::nms (user-owned), torchvision's CUDA semantics.
//
// 1. order = a stable descending sort of the scores (torchvision's order:
//    equal scores keep their index order);
// 2. the boxes in that order, structure of arrays, with their areas;
// 3. a bit mask: row i, word b holds bit c when box i suppresses box
//    j = 64 b + c > i (IoU > threshold), one 64-thread block per 64 x 64 tile;
// 4. one block walks the boxes in order, keeps those not yet removed and ORs
//    each kept box's row into the removed set (in shared memory when it fits);
// 5. the kept count comes back to the host (the output size depends on it).
//
// The IoU is torchvision's CUDA expression (its devIoU), which differs from
// its CPU kernel's: max/min ignore NaN (fmax/fmin), float16 boxes are
// measured in float32 (widths, heights and y extents rounded to float16, as
// c10::Half arithmetic does), and the IoU is compared with the threshold
// rounded to float. The arithmetic is explicitly rounded (Note [Rounded device
// arithmetic]): torchvision's own kernel lets nvcc contract multiply-adds,
// which can move an IoU within an ulp of the threshold to the other side.
#include "../nms.h"
#include "cuda_utils.cuh"

#include <array>
#include <optional>
#include <type_traits>

namespace example {
namespace {

constexpr const char* kOp = "example::nms";
constexpr int kTile = 64;
constexpr int kScanThreads = 256;
constexpr int64_t kMaxSharedWords = (48 * 1024) / 8;

// aten::sort.stable(stable=True), descending: equal scores keep their index order.
torch::stable::Tensor sort_descending_indices(const torch::stable::Tensor& scores) {
  std::array<StableIValue, 4> stack{torch::stable::detail::from(scores),
                                    torch::stable::detail::from(std::optional<bool>(true)),
                                    torch::stable::detail::from(int64_t(0)),
                                    torch::stable::detail::from(true)};
  STD_TORCH_CHECK(torch_call_dispatcher("aten::sort", "stable", stack.data(), TORCH_ABI_VERSION) == 0, kOp,
                  ": sorting the scores failed");
  (void)torch::stable::detail::to<torch::stable::Tensor>(stack[0]);
  return torch::stable::detail::to<torch::stable::Tensor>(stack[1]);
}

// The type boxes are measured in: torchvision's accumulate type.
template <typename T>
struct Measure {
  using type = T;
};
template <>
struct Measure<__half> {
  using type = float;
};

// v as a c10::Half operation of the boxes' type leaves it: rounded to float16.
template <typename T>
__device__ __forceinline__ typename Measure<T>::type in_box_type(typename Measure<T>::type v) {
  if constexpr (std::is_same_v<T, __half>)
    return cuutil::round_to<__half>(v);
  else
    return v;
}

__device__ __forceinline__ float measured(float v) { return v; }
__device__ __forceinline__ double measured(double v) { return v; }
__device__ __forceinline__ float measured(__half v) { return __half2float(v); }

// soa: x1[n], y1[n], x2[n], y2[n], area[n] of the boxes in score order, in the
// measure type; area = (x2 - x1) * (y2 - y1), the y extent in the boxes' type
// (torchvision: ((acc_T)a[2] - a[0]) * (a[3] - a[1])).
template <typename T, typename M = typename Measure<T>::type>
__global__ void gather_kernel(const T* __restrict__ dets, const int64_t* __restrict__ order, int64_t n,
                              M* __restrict__ soa) {
  using cuutil::mul_rn;
  using cuutil::sub_rn;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const T* d = dets + 4 * order[i];
    const M x1 = measured(d[0]), y1 = measured(d[1]), x2 = measured(d[2]), y2 = measured(d[3]);
    soa[i] = x1;
    soa[n + i] = y1;
    soa[2 * n + i] = x2;
    soa[3 * n + i] = y2;
    soa[4 * n + i] = mul_rn(sub_rn(x2, x1), in_box_type<T>(sub_rn(y2, y1)));
  }
}

// torchvision's devIoU: box a (the higher score) suppresses box b.
template <typename T, typename M>
__device__ __forceinline__ bool suppresses(const M* a, const M* b, M threshold) {
  using namespace cuutil;
  const M xx1 = fmax(a[0], b[0]), yy1 = fmax(a[1], b[1]);
  const M xx2 = fmin(a[2], b[2]), yy2 = fmin(a[3], b[3]);
  const M w = fmax(in_box_type<T>(sub_rn(xx2, xx1)), M(0));
  const M h = fmax(in_box_type<T>(sub_rn(yy2, yy1)), M(0));
  const M inter = mul_rn(w, h);
  return div_rn(inter, sub_rn(add_rn(a[4], b[4]), inter)) > threshold;
}

template <typename T, typename M = typename Measure<T>::type>
__global__ void mask_kernel(const M* __restrict__ soa, int64_t n, int64_t words, M threshold,
                            unsigned long long* __restrict__ mask) {
  const int64_t row_tile = blockIdx.x, col_tile = blockIdx.y;
  if (col_tile < row_tile) return;  // only j > i is ever read
  __shared__ M cols[5][kTile];
  const int64_t j0 = col_tile * kTile;
  const int64_t ncols = min(int64_t(kTile), n - j0);
  if (threadIdx.x < ncols)
    for (int f = 0; f < 5; ++f) cols[f][threadIdx.x] = soa[f * n + j0 + threadIdx.x];
  __syncthreads();
  const int64_t i = row_tile * kTile + threadIdx.x;
  if (i >= n) return;
  M box[5];
  for (int f = 0; f < 5; ++f) box[f] = soa[f * n + i];
  unsigned long long bits = 0;
  for (int64_t c = (col_tile == row_tile ? threadIdx.x + 1 : 0); c < ncols; ++c) {
    const M other[5] = {cols[0][c], cols[1][c], cols[2][c], cols[3][c], cols[4][c]};
    if (suppresses<T>(box, other, threshold)) bits |= 1ull << c;
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
  const cuutil::ScalarType st = dets.scalar_type();
  STD_TORCH_CHECK(st == cuutil::ScalarType::Float || st == cuutil::ScalarType::Double ||
                      st == cuutil::ScalarType::Half,
                  kOp, ": unsupported dtype ", cuutil::dtype_name(st),
                  " for 'dets' on CUDA; supported dtypes are float16, float32 and float64");
  // scores of another dtype are sorted as they are: torchvision's CUDA kernel takes them (its
  // CPU kernel refuses them, and so does csrc/cpu/nms.cpp)
  const torch::stable::accelerator::DeviceGuard guard(dets.get_device_index());
  const int64_t n = dets.size(0);
  if (n == 0) return torch::stable::new_empty(dets, {0}, cuutil::ScalarType::Long);
  const int64_t tiles = (n + kTile - 1) / kTile;
  STD_TORCH_CHECK(tiles <= 65535, kOp, ": at most ", 65535 * kTile, " boxes on CUDA, got ", n);
  const cudaStream_t stream = cuutil::current_stream(dets.get_device_index());
  const torch::stable::Tensor order = cuutil::contig(sort_descending_indices(scores));
  const torch::stable::Tensor d = cuutil::contig(dets);
  const torch::stable::Tensor soa = torch::stable::new_empty(
      d, {5, n}, st == cuutil::ScalarType::Double ? cuutil::ScalarType::Double : cuutil::ScalarType::Float);
  const torch::stable::Tensor mask = torch::stable::new_empty(d, {n, tiles}, cuutil::ScalarType::Long);
  torch::stable::Tensor keep = torch::stable::new_empty(d, {n}, cuutil::ScalarType::Long);
  const torch::stable::Tensor num_keep = torch::stable::new_empty(d, {1}, cuutil::ScalarType::Long);
  const bool shared = tiles <= kMaxSharedWords;
  const torch::stable::Tensor removed =
      torch::stable::new_empty(d, {shared ? 0 : tiles}, cuutil::ScalarType::Long);
  auto* mask_p = static_cast<unsigned long long*>(mask.mutable_data_ptr());
  const auto* order_p = static_cast<const int64_t*>(order.const_data_ptr());
  // torchvision's devIoU takes the threshold as a float.
  const float threshold = static_cast<float>(iou_threshold);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    using M = typename Measure<T>::type;
    M* soa_p = static_cast<M*>(soa.mutable_data_ptr());
    gather_kernel<T><<<cuutil::grid_for(n, 256), 256, 0, stream>>>(static_cast<const T*>(d.const_data_ptr()),
                                                                   order_p, n, soa_p);
    STD_CUDA_KERNEL_LAUNCH_CHECK();
    mask_kernel<T><<<dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(tiles)), kTile, 0, stream>>>(
        soa_p, n, tiles, static_cast<M>(threshold), mask_p);
    STD_CUDA_KERNEL_LAUNCH_CHECK();
  };
  if (st == cuutil::ScalarType::Float)
    run(float{});
  else if (st == cuutil::ScalarType::Double)
    run(double{});
  else
    run(__half{});
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
