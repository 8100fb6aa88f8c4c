// Hand-written CUDA kernel for example::matmul (user-owned): C = A (M x K) @ B (K x N).
// Shared-memory tiled GEMM: 64x64 C tile per 256-thread block, K in steps of
// 16; A tile stored transposed in shared memory so both operands are read as
// contiguous 4-wide vectors; each thread accumulates a 4x4 register tile.
// Global loads are coalesced along the contiguous dimension, zero-filled at
// the edges, so any M, N, K work. M tiles go on grid x (2^31 - 1 blocks), N
// tiles on grid y (65535 blocks); each block loops over the tiles beyond the
// grid, so no size is limited by the grid.
#include "../matmul.h"
#include "cuda_utils.cuh"

#include <algorithm>

namespace example {
namespace {

constexpr int BM = 64, BN = 64, BK = 16, TM = 4, TN = 4;
constexpr int kThreads = (BM / TM) * (BN / TN);  // 256
constexpr int PAD = 4;                            // keeps rows 16-byte aligned
constexpr int64_t kMaxGridX = (int64_t(1) << 31) - 1, kMaxGridY = 65535;

// The launch grid for an M x N output: one block per 64x64 tile up to the
// grid's limits; the kernel's tile loops cover the rest.
dim3 gemm_grid(int64_t M, int64_t N) {
  const int64_t tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
  return dim3(unsigned(std::clamp<int64_t>(tiles_m, 1, kMaxGridX)),
              unsigned(std::clamp<int64_t>(tiles_n, 1, kMaxGridY)));
}

// One 64x64 tile of C at (m0, n0). Every thread of the block calls it with
// the same tile, so its __syncthreads() are legal; the last one also keeps
// the shared tiles intact until every thread has read them.
template <typename T>
__device__ __forceinline__ void gemm_tile(const T* __restrict__ A, const T* __restrict__ B,
                                          T* __restrict__ C, int64_t M, int64_t N, int64_t K,
                                          int64_t m0, int64_t n0, T (&As)[BK][BM + PAD],
                                          T (&Bs)[BK][BN + PAD]) {
  const int tid = threadIdx.x;
  const int tx = tid % (BN / TN), ty = tid / (BN / TN);
  T acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = T(0);

  for (int64_t k0 = 0; k0 < K; k0 += BK) {
    // A tile: BM x BK, consecutive threads walk k (contiguous in A).
#pragma unroll
    for (int i = 0; i < (BM * BK) / kThreads; ++i) {
      const int idx = tid + i * kThreads;
      const int r = idx / BK, c = idx % BK;
      const int64_t gm = m0 + r, gk = k0 + c;
      As[c][r] = (gm < M && gk < K) ? A[gm * K + gk] : T(0);
    }
    // B tile: BK x BN, consecutive threads walk n (contiguous in B).
#pragma unroll
    for (int i = 0; i < (BK * BN) / kThreads; ++i) {
      const int idx = tid + i * kThreads;
      const int r = idx / BN, c = idx % BN;
      const int64_t gk = k0 + r, gn = n0 + c;
      Bs[r][c] = (gk < K && gn < N) ? B[gk * N + gn] : T(0);
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      T a[TM], b[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) a[i] = As[k][ty * TM + i];
#pragma unroll
      for (int j = 0; j < TN; ++j) b[j] = Bs[k][tx * TN + j];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fma(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int64_t gm = m0 + ty * TM + i;
    if (gm >= M) continue;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int64_t gn = n0 + tx * TN + j;
      if (gn < N) C[gm * N + gn] = acc[i][j];
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
gemm_tiled_kernel(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C,
                  int64_t M, int64_t N, int64_t K) {
  __shared__ alignas(16) T As[BK][BM + PAD];  // As[k][m]
  __shared__ alignas(16) T Bs[BK][BN + PAD];  // Bs[k][n]
  for (int64_t m0 = int64_t(blockIdx.x) * BM; m0 < M; m0 += int64_t(gridDim.x) * BM)
    for (int64_t n0 = int64_t(blockIdx.y) * BN; n0 < N; n0 += int64_t(gridDim.y) * BN)
      gemm_tile(A, B, C, M, N, K, m0, n0, As, Bs);
}

template <typename T>
void launch(const T* a, const T* b, T* c, int64_t M, int64_t N, int64_t K, cudaStream_t stream) {
  gemm_tiled_kernel<T><<<gemm_grid(M, N), kThreads, 0, stream>>>(a, b, c, M, N, K);
  STD_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

torch::stable::Tensor matmul_cuda(const torch::stable::Tensor& a_,
                                  const torch::stable::Tensor& b_) {
  constexpr const char* op = "example::matmul";
  cuutil::check_cuda(a_, op, "a");
  cuutil::check_cuda(b_, op, "b");
  cuutil::check_same_device(a_, b_, op, "a", "b");
  cuutil::check_float_dtype(a_, op, "a");
  cuutil::check_same_dtype(a_, b_, op, "a", "b");
  STD_TORCH_CHECK(a_.dim() == 2 && b_.dim() == 2, op,
                  ": expected 2-D tensors, got a.dim()=", a_.dim(), " and b.dim()=", b_.dim());
  const int64_t M = a_.size(0), K = a_.size(1), N = b_.size(1);
  STD_TORCH_CHECK(b_.size(0) == K, op, ": shape mismatch: a is (", M, ", ", K,
                  ") but b is (", b_.size(0), ", ", N, ")");
  torch::stable::accelerator::DeviceGuard guard(a_.get_device_index());
  const torch::stable::Tensor a = cuutil::contig(a_);
  const torch::stable::Tensor b = cuutil::contig(b_);
  const int64_t out_sizes[2] = {M, N};
  torch::stable::Tensor c =
      torch::stable::new_empty(a, torch::headeronly::IntHeaderOnlyArrayRef(out_sizes, 2));
  if (M == 0 || N == 0) return c;
  if (K == 0) return torch::stable::zero_(c);
  cudaStream_t stream = cuutil::current_stream(a.get_device_index());
  if (a.scalar_type() == cuutil::ScalarType::Float) {
    launch(a.const_data_ptr<float>(), b.const_data_ptr<float>(), c.mutable_data_ptr<float>(),
           M, N, K, stream);
  } else {
    launch(a.const_data_ptr<double>(), b.const_data_ptr<double>(), c.mutable_data_ptr<double>(),
           M, N, K, stream);
  }
  return c;
}

}  // namespace example
