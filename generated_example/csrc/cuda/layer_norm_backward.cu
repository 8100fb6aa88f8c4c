// Hand-written CUDA kernels for example::layer_norm_backward (user-owned).
// Returns (dx, dweight, dbias) of layer_norm over the last dim. Every sum is
// taken in a fixed order (no atomics): the results are deterministic.
//
// Rows of up to kPacksPerThread * kMaxCachedThreads 16-byte packs (8192 float32,
// 4096 float64 values; as many single elements when packs are ruled out) take
// one pass over x and grad:
// 1. ln_bwd_cached_kernel, a persistent grid of G blocks, block b taking rows
//    b, b + G, ...: each thread keeps its packs (t, t + blockDim.x, ...) of x
//    and grad in registers, recomputes mean/rstd and reduces sum(g*w) and
//    sum(g*w*xhat) (block reductions), writes
//    dx = rstd*(g*w - mean(g*w) - xhat*mean(g*w*xhat)), and adds g*xhat and g
//    to its columns' dweight/dbias sums, which stay in registers across the
//    block's rows (a thread covers the same columns in every row). Each block
//    then writes one partial row of dweight and of dbias.
// 2. ln_bwd_sum_parts_kernel: dweight/dbias = the sums of the G partial rows.
//
// Longer rows take three kernels, which read x and grad again:
// 1. ln_bwd_dx_kernel, one block per row: recompute mean/rstd (block
//    reductions with warp shuffles), reduce sum(g*w) and sum(g*w*xhat), write
//    dx = rstd*(g*w - mean(g*w) - xhat*mean(g*w*xhat)); save mean/rstd.
// 2. ln_bwd_dwdb_kernel, 32-column x 8-row thread tiles over a chunk of rows:
//    coalesced row reads, per-thread partial sums, shared-memory reduction
//    across the 8 row lanes -> one partial per (row chunk, column).
// 3. ln_bwd_reduce_kernel: sum the row-chunk partials. Skipped when there is
//    a single chunk.
#include "../layer_norm_backward.h"
#include "cuda_utils.cuh"

#include <tuple>

namespace example {
namespace {

constexpr int kPacksPerThread = 4;
// The register-resident kernel needs up to 128 registers a thread: at most 512 threads a block.
constexpr int kMaxCachedThreads = 512;

template <typename T, int W>
struct alignas(sizeof(T) * W) Pack {
  T v[W];
};

template <typename T, int W>
__global__ void __launch_bounds__(kMaxCachedThreads)
ln_bwd_cached_kernel(const T* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ w,
                     T* __restrict__ dx, T* __restrict__ part_dw, T* __restrict__ part_db,
                     int64_t rows, int64_t N, T eps) {
  using P = Pack<T, W>;
  constexpr int kP = kPacksPerThread;
  __shared__ T shm[32];
  const int64_t packs = N / W;
  P wv[kP];
  T adw[kP][W], adb[kP][W];  // this thread's columns of dweight and dbias, over the block's rows
#pragma unroll
  for (int j = 0; j < kP; ++j) {
    const int64_t i = threadIdx.x + int64_t(j) * blockDim.x;
    if (i < packs) wv[j] = reinterpret_cast<const P*>(w)[i];
#pragma unroll
    for (int k = 0; k < W; ++k) adw[j][k] = adb[j][k] = T(0);
  }
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const P* xr = reinterpret_cast<const P*>(x + row * N);
    const P* gr = reinterpret_cast<const P*>(dy + row * N);
    P xv[kP], gv[kP];
#pragma unroll
    for (int j = 0; j < kP; ++j) {  // all loads first: 2 * kP independent loads in flight
      const int64_t i = threadIdx.x + int64_t(j) * blockDim.x;
      if (i < packs) {
        xv[j] = xr[i];
        gv[j] = gr[i];
      }
    }
    T s = 0;
#pragma unroll
    for (int j = 0; j < kP; ++j)
      if (threadIdx.x + int64_t(j) * blockDim.x < packs)
#pragma unroll
        for (int k = 0; k < W; ++k) s += xv[j].v[k];
    const T mean = cuutil::block_sum(s, shm) / T(N);
    T q = 0;
#pragma unroll
    for (int j = 0; j < kP; ++j)
      if (threadIdx.x + int64_t(j) * blockDim.x < packs)
#pragma unroll
        for (int k = 0; k < W; ++k) {
          const T d = xv[j].v[k] - mean;
          q += d * d;
        }
    const T rstd = T(1) / sqrt(cuutil::block_sum(q, shm) / T(N) + eps);
    T sa = 0, sc = 0;
#pragma unroll
    for (int j = 0; j < kP; ++j)
      if (threadIdx.x + int64_t(j) * blockDim.x < packs)
#pragma unroll
        for (int k = 0; k < W; ++k) {
          const T g = gv[j].v[k] * wv[j].v[k];
          sa += g;
          sc += g * (xv[j].v[k] - mean) * rstd;
        }
    sa = cuutil::block_sum(sa, shm);
    sc = cuutil::block_sum(sc, shm);
    const T ka = rstd * sa / T(N), kc = rstd * sc / T(N);
    P* dxr = reinterpret_cast<P*>(dx + row * N);
#pragma unroll
    for (int j = 0; j < kP; ++j) {
      const int64_t i = threadIdx.x + int64_t(j) * blockDim.x;
      if (i < packs) {
        P o;
#pragma unroll
        for (int k = 0; k < W; ++k) {
          const T xh = (xv[j].v[k] - mean) * rstd;
          o.v[k] = gv[j].v[k] * wv[j].v[k] * rstd - ka - xh * kc;
          adw[j][k] += gv[j].v[k] * (xv[j].v[k] - mean) * rstd;
          adb[j][k] += gv[j].v[k];
        }
        dxr[i] = o;
      }
    }
  }
  P* pw = reinterpret_cast<P*>(part_dw + blockIdx.x * N);
  P* pb = reinterpret_cast<P*>(part_db + blockIdx.x * N);
#pragma unroll
  for (int j = 0; j < kP; ++j) {
    const int64_t i = threadIdx.x + int64_t(j) * blockDim.x;
    if (i < packs) {
      P ow, ob;
#pragma unroll
      for (int k = 0; k < W; ++k) {
        ow.v[k] = adw[j][k];
        ob.v[k] = adb[j][k];
      }
      pw[i] = ow;
      pb[i] = ob;
    }
  }
}

constexpr int kSumCols = 32;   // columns per block of ln_bwd_sum_parts_kernel
constexpr int kSumLanes = 16;  // partial rows summed in parallel per column

// dw[c] = sum over b of part_dw[b * N + c] (likewise db): lane y sums the partial rows
// y, y + 16, ..., then lane 0 adds the 16 lane sums in order. grid = (ceil(N / 32)),
// block = (32, 16).
template <typename T>
__global__ void ln_bwd_sum_parts_kernel(const T* __restrict__ part_dw, const T* __restrict__ part_db,
                                        T* __restrict__ dw, T* __restrict__ db, int64_t parts,
                                        int64_t N) {
  __shared__ T sdw[kSumLanes][kSumCols + 1];
  __shared__ T sdb[kSumLanes][kSumCols + 1];
  const int64_t col = int64_t(blockIdx.x) * kSumCols + threadIdx.x;
  T aw = 0, ab = 0;
  if (col < N) {
#pragma unroll 4
    for (int64_t b = threadIdx.y; b < parts; b += kSumLanes) {
      aw += part_dw[b * N + col];
      ab += part_db[b * N + col];
    }
  }
  sdw[threadIdx.y][threadIdx.x] = aw;
  sdb[threadIdx.y][threadIdx.x] = ab;
  __syncthreads();
  if (threadIdx.y == 0 && col < N) {
#pragma unroll
    for (int k = 1; k < kSumLanes; ++k) {
      aw += sdw[k][threadIdx.x];
      ab += sdb[k][threadIdx.x];
    }
    dw[col] = aw;
    db[col] = ab;
  }
}

template <typename T>
__global__ void ln_bwd_dx_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                                 const T* __restrict__ w, T* __restrict__ dx,
                                 T* __restrict__ mean_out, T* __restrict__ rstd_out,
                                 int64_t rows, int64_t N, T eps) {
  __shared__ T shm[32];
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* xr = x + row * N;
    const T* gr = dy + row * N;
    T s = 0;
    for (int64_t i = threadIdx.x; i < N; i += blockDim.x) s += xr[i];
    const T mean = cuutil::block_sum(s, shm) / T(N);
    T q = 0;
    for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
      const T d = xr[i] - mean;
      q += d * d;
    }
    const T rstd = T(1) / sqrt(cuutil::block_sum(q, shm) / T(N) + eps);
    T sa = 0, sc = 0;
    for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
      const T g = gr[i] * w[i];
      sa += g;
      sc += g * (xr[i] - mean) * rstd;
    }
    sa = cuutil::block_sum(sa, shm);
    sc = cuutil::block_sum(sc, shm);
    const T ka = rstd * sa / T(N), kc = rstd * sc / T(N);
    T* dxr = dx + row * N;
    for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
      const T xh = (xr[i] - mean) * rstd;
      dxr[i] = gr[i] * w[i] * rstd - ka - xh * kc;
    }
    if (threadIdx.x == 0) {
      mean_out[row] = mean;
      rstd_out[row] = rstd;
    }
  }
}

constexpr int kColTile = 32;
constexpr int kRowLanes = 8;

// grid = (ceil(N/32), nsplit); block = (32, 8).
template <typename T>
__global__ void ln_bwd_dwdb_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                                   const T* __restrict__ mean, const T* __restrict__ rstd,
                                   T* __restrict__ pdw, T* __restrict__ pdb, int64_t rows,
                                   int64_t N) {
  __shared__ T sdw[kRowLanes][kColTile + 1];
  __shared__ T sdb[kRowLanes][kColTile + 1];
  const int64_t col = int64_t(blockIdx.x) * kColTile + threadIdx.x;
  const int64_t nsplit = gridDim.y;
  const int64_t r0 = rows * blockIdx.y / nsplit, r1 = rows * (blockIdx.y + 1) / nsplit;
  T aw = 0, ab = 0;
  if (col < N) {
    for (int64_t r = r0 + threadIdx.y; r < r1; r += kRowLanes) {
      const T g = dy[r * N + col];
      aw += g * (x[r * N + col] - mean[r]) * rstd[r];
      ab += g;
    }
  }
  sdw[threadIdx.y][threadIdx.x] = aw;
  sdb[threadIdx.y][threadIdx.x] = ab;
  __syncthreads();
  if (threadIdx.y == 0 && col < N) {
#pragma unroll
    for (int k = 1; k < kRowLanes; ++k) {
      aw += sdw[k][threadIdx.x];
      ab += sdb[k][threadIdx.x];
    }
    pdw[blockIdx.y * N + col] = aw;
    pdb[blockIdx.y * N + col] = ab;
  }
}

template <typename T>
__global__ void ln_bwd_reduce_kernel(const T* __restrict__ pdw, const T* __restrict__ pdb,
                                     T* __restrict__ dw, T* __restrict__ db, int64_t nsplit,
                                     int64_t N) {
  for (int64_t col = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; col < N;
       col += int64_t(gridDim.x) * blockDim.x) {
    T aw = 0, ab = 0;
    for (int64_t s = 0; s < nsplit; ++s) {
      aw += pdw[s * N + col];
      ab += pdb[s * N + col];
    }
    dw[col] = aw;
    db[col] = ab;
  }
}

torch::stable::Tensor new_buffer(const torch::stable::Tensor& like, int64_t numel) {
  const int64_t sizes[1] = {numel};
  return torch::stable::new_empty(like, torch::headeronly::IntHeaderOnlyArrayRef(sizes, 1));
}

// Rows held in registers: ln_bwd_cached_kernel on as many blocks as fit on the GPU at once.
template <typename T, int W>
void launch_cached(const torch::stable::Tensor& x_t, const T* dy, const T* x, const T* w, T* dx,
                   T* dw, T* db, int64_t rows, int64_t N, double eps, cudaStream_t stream) {
  const int64_t per_thread = (N / W + kPacksPerThread - 1) / kPacksPerThread;
  const int threads = int(std::max<int64_t>(32, (per_thread + 31) / 32 * 32));  // <= 512
  int per_sm = 0;
  STD_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, ln_bwd_cached_kernel<T, W>,
                                                               threads, 0));
  const int64_t parts =
      std::clamp<int64_t>(int64_t(std::max(per_sm, 1)) * cuutil::multiprocessor_count(), 1, rows);
  torch::stable::Tensor part = new_buffer(x_t, 2 * parts * N);
  T* part_dw = part.mutable_data_ptr<T>();
  T* part_db = part_dw + parts * N;
  ln_bwd_cached_kernel<T, W><<<unsigned(parts), threads, 0, stream>>>(dy, x, w, dx, part_dw, part_db,
                                                                     rows, N, T(eps));
  STD_CUDA_KERNEL_LAUNCH_CHECK();
  const dim3 block{unsigned(kSumCols), unsigned(kSumLanes), 1u};
  const unsigned grid = unsigned((N + kSumCols - 1) / kSumCols);
  ln_bwd_sum_parts_kernel<T><<<grid, block, 0, stream>>>(part_dw, part_db, dw, db, parts, N);
  STD_CUDA_KERNEL_LAUNCH_CHECK();
  // `part` is freed when it goes out of scope: the caching allocator only reuses it for work
  // queued later on the same stream.
}

template <typename T>
void launch(const torch::stable::Tensor& x_t, const T* dy, const T* x, const T* w, T* dx,
            T* dw, T* db, int64_t rows, int64_t N, double eps, cudaStream_t stream) {
  constexpr int W = cuutil::Vec16<T>::N;
  const bool vec = N % W == 0 && cuutil::aligned16(dy) && cuutil::aligned16(x) &&
                   cuutil::aligned16(w) && cuutil::aligned16(dx);
  const int64_t per_row = vec ? N / W : N;
  if (per_row <= int64_t(kPacksPerThread) * kMaxCachedThreads) {
    if (vec)
      launch_cached<T, W>(x_t, dy, x, w, dx, dw, db, rows, N, eps, stream);
    else
      launch_cached<T, 1>(x_t, dy, x, w, dx, dw, db, rows, N, eps, stream);
    return;
  }
  torch::stable::Tensor stats = new_buffer(x_t, 2 * rows);
  T* mean = stats.mutable_data_ptr<T>();
  T* rstd = mean + rows;

  const int threads = int(std::min<int64_t>(512, std::max<int64_t>(32, (N + 31) / 32 * 32)));
  const unsigned grid = unsigned(std::min<int64_t>(rows, int64_t(1) << 20));
  ln_bwd_dx_kernel<T><<<grid, threads, 0, stream>>>(dy, x, w, dx, mean, rstd, rows, N, T(eps));
  STD_CUDA_KERNEL_LAUNCH_CHECK();

  // Enough (column tile, row chunk) blocks to fill the GPU, >= 32 rows each.
  const int64_t col_tiles = (N + kColTile - 1) / kColTile;
  const int64_t sms = cuutil::multiprocessor_count();
  const int64_t nsplit = std::max<int64_t>(
      1, std::min<int64_t>({(rows + 31) / 32, (4 * sms + col_tiles - 1) / col_tiles, int64_t(65535)}));
  const dim3 block{unsigned(kColTile), unsigned(kRowLanes), 1u};
  const dim3 grid2{unsigned(col_tiles), unsigned(nsplit), 1u};
  if (nsplit == 1) {
    ln_bwd_dwdb_kernel<T><<<grid2, block, 0, stream>>>(dy, x, mean, rstd, dw, db, rows, N);
    STD_CUDA_KERNEL_LAUNCH_CHECK();
  } else {
    torch::stable::Tensor part = new_buffer(x_t, 2 * nsplit * N);
    T* pdw = part.mutable_data_ptr<T>();
    T* pdb = pdw + nsplit * N;
    ln_bwd_dwdb_kernel<T><<<grid2, block, 0, stream>>>(dy, x, mean, rstd, pdw, pdb, rows, N);
    STD_CUDA_KERNEL_LAUNCH_CHECK();
    ln_bwd_reduce_kernel<T><<<cuutil::grid_for(N, 256), 256, 0, stream>>>(pdw, pdb, dw, db,
                                                                          nsplit, N);
    STD_CUDA_KERNEL_LAUNCH_CHECK();
  }
  // `stats` / `part` are freed when they go out of scope: the caching
  // allocator only reuses them for work queued later on the same stream.
}

}  // namespace

std::tuple<torch::stable::Tensor, torch::stable::Tensor, torch::stable::Tensor>
layer_norm_backward_cuda(const torch::stable::Tensor& grad_, const torch::stable::Tensor& x_,
                         const torch::stable::Tensor& weight_, double eps) {
  constexpr const char* op = "example::layer_norm_backward";
  cuutil::check_cuda(grad_, op, "grad");
  cuutil::check_cuda(x_, op, "x");
  cuutil::check_cuda(weight_, op, "weight");
  cuutil::check_same_device(grad_, x_, op, "grad", "x");
  cuutil::check_same_device(x_, weight_, op, "x", "weight");
  cuutil::check_float_dtype(x_, op, "x");
  cuutil::check_same_dtype(grad_, x_, op, "grad", "x");
  cuutil::check_same_dtype(x_, weight_, op, "x", "weight");
  cuutil::check_same_sizes(grad_, x_, op, "grad", "x");
  STD_TORCH_CHECK(x_.dim() >= 1, op, ": expected 'x' to have at least 1 dimension");
  const int64_t N = x_.size(x_.dim() - 1);
  STD_TORCH_CHECK(weight_.dim() == 1 && weight_.size(0) == N, op,
                  ": expected 'weight' of shape (", N, ",) (the last dim of x)");
  torch::stable::accelerator::DeviceGuard guard(x_.get_device_index());
  const torch::stable::Tensor g = cuutil::contig(grad_);
  const torch::stable::Tensor x = cuutil::contig(x_);
  const torch::stable::Tensor w = cuutil::contig(weight_);
  torch::stable::Tensor dx = cuutil::empty_contig_like(x);
  torch::stable::Tensor dw = cuutil::empty_contig_like(w);
  torch::stable::Tensor db = cuutil::empty_contig_like(w);
  if (N == 0) return std::make_tuple(dx, dw, db);
  const int64_t rows = x.numel() / N;
  if (rows == 0) {
    torch::stable::zero_(dw);
    torch::stable::zero_(db);
    return std::make_tuple(dx, dw, db);
  }
  cudaStream_t stream = cuutil::current_stream(x.get_device_index());
  if (x.scalar_type() == cuutil::ScalarType::Float) {
    launch(x, g.const_data_ptr<float>(), x.const_data_ptr<float>(), w.const_data_ptr<float>(),
           dx.mutable_data_ptr<float>(), dw.mutable_data_ptr<float>(),
           db.mutable_data_ptr<float>(), rows, N, eps, stream);
  } else {
    launch(x, g.const_data_ptr<double>(), x.const_data_ptr<double>(), w.const_data_ptr<double>(),
           dx.mutable_data_ptr<double>(), dw.mutable_data_ptr<double>(),
           db.mutable_data_ptr<double>(), rows, N, eps, stream);
  }
  return std::make_tuple(dx, dw, db);
}

}  // namespace example
