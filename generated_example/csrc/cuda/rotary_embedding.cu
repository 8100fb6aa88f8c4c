// CUDA kernel of example::rotary_embedding (user-owned), vLLM's semantics.
//
// One block per token (grid-stride over tokens); its threads take the
// rotations of query, then of key, V consecutive pairs of one head at a time.
// When the heads, the token strides and the cache allow it, V pairs take
// 16-byte accesses: neox reads V values at r and V at r + rot/2 (V = 16 bytes
// of the dtype), GPT-J the 2V interleaved values at 2r (V = 8 bytes of it);
// otherwise V = 1 and every value is read on its own. The arithmetic is the
// CPU kernel's: every product, sum and difference rounded to the tensor dtype
// (Note [Rounded device arithmetic]), cos/sin rounded to it first. A position
// outside the cache cannot be reported from the device without a sync: such a
// token is left unchanged (the CPU kernel raises).
#include "../rotary_embedding.h"
#include "cuda_utils.cuh"

namespace example {
namespace {

constexpr const char* kOp = "example::rotary_embedding";

// Element offset of token t: (t / seq) * batch_stride + (t % seq) * token_stride;
// heads are head_stride apart, each head's values contiguous.
struct HeadLayout {
  int64_t seq;
  int64_t batch_stride;
  int64_t token_stride;
  int64_t heads;
  int64_t head_stride;
};

__device__ __forceinline__ int64_t token_offset(const HeadLayout& l, int64_t t) {
  return (t / l.seq) * l.batch_stride + (t % l.seq) * l.token_stride;
}

template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

// (x, y) -> (x c - y s, y c + x s), every step rounded to T; c and s already rounded to T.
template <typename T>
__device__ __forceinline__ void rotate(float& x, float& y, float c, float s) {
  using cuutil::round_to;
  const float xo = round_to<T>(cuutil::sub_rn(round_to<T>(cuutil::mul_rn(x, c)), round_to<T>(cuutil::mul_rn(y, s))));
  const float yo = round_to<T>(cuutil::add_rn(round_to<T>(cuutil::mul_rn(y, c)), round_to<T>(cuutil::mul_rn(x, s))));
  x = xo;
  y = yo;
}

// Pair r of one head, every value read on its own.
template <typename T, typename C, bool kNeox>
__device__ __forceinline__ void rotate_pair(T* head, const C* row, int64_t half, int64_t r) {
  using cuutil::round_to;
  using cuutil::to_f32;
  const float c = round_to<T>(to_f32(row[r]));
  const float s = round_to<T>(to_f32(row[half + r]));
  T* px = kNeox ? head + r : head + 2 * r;
  T* py = kNeox ? head + half + r : head + 2 * r + 1;
  float x = to_f32(*px), y = to_f32(*py);
  rotate<T>(x, y, c, s);
  *px = cuutil::from_f32<T>(x);
  *py = cuutil::from_f32<T>(y);
}

// Pairs r0 .. r0 + V - 1 of one head with vector accesses (alignment checked by the host).
template <typename T, typename C, bool kNeox, int V>
__device__ __forceinline__ void rotate_pairs(T* head, const C* row, int64_t half, int64_t r0) {
  using cuutil::round_to;
  using cuutil::to_f32;
  const Pack<C, V> cv = *reinterpret_cast<const Pack<C, V>*>(row + r0);
  const Pack<C, V> sv = *reinterpret_cast<const Pack<C, V>*>(row + half + r0);
  if constexpr (kNeox) {
    Pack<T, V>* px = reinterpret_cast<Pack<T, V>*>(head + r0);
    Pack<T, V>* py = reinterpret_cast<Pack<T, V>*>(head + half + r0);
    Pack<T, V> xv = *px, yv = *py;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      float x = to_f32(xv.v[k]), y = to_f32(yv.v[k]);
      rotate<T>(x, y, round_to<T>(to_f32(cv.v[k])), round_to<T>(to_f32(sv.v[k])));
      xv.v[k] = cuutil::from_f32<T>(x);
      yv.v[k] = cuutil::from_f32<T>(y);
    }
    *px = xv;
    *py = yv;
  } else {
    Pack<T, 2 * V>* p = reinterpret_cast<Pack<T, 2 * V>*>(head + 2 * r0);
    Pack<T, 2 * V> xy = *p;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      float x = to_f32(xy.v[2 * k]), y = to_f32(xy.v[2 * k + 1]);
      rotate<T>(x, y, round_to<T>(to_f32(cv.v[k])), round_to<T>(to_f32(sv.v[k])));
      xy.v[2 * k] = cuutil::from_f32<T>(x);
      xy.v[2 * k + 1] = cuutil::from_f32<T>(y);
    }
    *p = xy;
  }
}

// The `heads` heads of one token at `base`: item i is pairs (i % chunks) * V .. + V - 1 of
// head i / chunks (chunks = half / V; 32-bit: the host checks heads * half < 2^31).
template <typename T, typename C, bool kNeox, int V>
__device__ __forceinline__ void rotate_token(T* base, const HeadLayout& l, const C* row, int64_t half) {
  const int chunks = int(half / V);
  const int items = int(l.heads) * chunks;
  for (int i = threadIdx.x; i < items; i += blockDim.x) {
    T* head = base + int64_t(i / chunks) * l.head_stride;
    const int64_t r0 = int64_t(i % chunks) * V;
    if constexpr (V == 1)
      rotate_pair<T, C, kNeox>(head, row, half, r0);
    else
      rotate_pairs<T, C, kNeox, V>(head, row, half, r0);
  }
}

template <typename T, typename C, bool kNeox, int V>
__global__ void rope_kernel(const int64_t* __restrict__ positions, int64_t num_tokens,
                            const C* __restrict__ cache, int64_t max_position, int64_t rot, T* query,
                            HeadLayout ql, T* key, HeadLayout kl) {
  const int64_t half = rot / 2;
  for (int64_t t = blockIdx.x; t < num_tokens; t += gridDim.x) {
    const int64_t p = positions[t];
    if (p < 0 || p >= max_position) continue;
    const C* row = cache + p * rot;
    rotate_token<T, C, kNeox, V>(query + token_offset(ql, t), ql, row, half);
    if (key != nullptr) rotate_token<T, C, kNeox, V>(key + token_offset(kl, t), kl, row, half);
  }
}

HeadLayout head_layout(const torch::stable::Tensor& x, const torch::stable::Tensor& positions,
                       int64_t head_size, const char* name) {
  const int64_t pd = positions.dim();
  STD_TORCH_CHECK(x.dim() == pd + 1 || x.dim() == pd + 2, kOp, ": expected '", name,
                  "' of shape [*positions.shape, heads * head_size] or [*positions.shape, heads, "
                  "head_size], got ", x.dim(), " dims for ", pd, "-dim positions");
  for (int64_t d = 0; d < pd; ++d)
    STD_TORCH_CHECK(x.size(d) == positions.size(d), kOp, ": '", name, "' has ", x.size(d),
                    " tokens in dim ", d, " but positions has ", positions.size(d));
  HeadLayout l{};
  l.seq = positions.size(pd - 1);
  l.token_stride = x.stride(pd - 1);
  l.batch_stride = pd == 2 ? x.stride(0) : 0;
  if (x.dim() == pd + 2) {
    STD_TORCH_CHECK(x.size(-1) == head_size, kOp, ": the last dim of '", name, "' is ", x.size(-1),
                    ", expected head_size = ", head_size);
    l.heads = x.size(-2);
    l.head_stride = x.stride(-2);
  } else {
    STD_TORCH_CHECK(x.size(-1) % head_size == 0, kOp, ": the last dim of '", name, "' (",
                    x.size(-1), ") is not a multiple of head_size = ", head_size);
    l.heads = x.size(-1) / head_size;
    l.head_stride = head_size;
  }
  return l;
}

torch::stable::Tensor rotatable(const torch::stable::Tensor& x) {
  return x.numel() == 0 || x.stride(-1) == 1 ? x : torch::stable::contiguous(x);
}

bool aligned_to(const void* p, size_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// Whether every head of x starts on a 16-byte boundary.
template <typename T>
bool heads_aligned16(const T* x, const HeadLayout& l) {
  constexpr int64_t E = 16 / sizeof(T);  // elements per 16 bytes
  return cuutil::aligned16(x) && l.batch_stride % E == 0 && l.token_stride % E == 0 &&
         l.head_stride % E == 0;
}

template <typename T, typename C, bool kNeox, int V>
void launch_v(const int64_t* pos, int64_t num_tokens, const C* cache, int64_t max_position, int64_t rot,
              T* q, const HeadLayout& ql, T* k, const HeadLayout& kl, cudaStream_t stream) {
  const int64_t chunks = rot / 2 / V;
  const int64_t items = std::max(ql.heads, k != nullptr ? kl.heads : int64_t(0)) * chunks;
  const int threads = static_cast<int>(std::min<int64_t>(512, std::max<int64_t>(32, (items + 31) / 32 * 32)));
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(num_tokens, int64_t(1) << 20));
  rope_kernel<T, C, kNeox, V><<<blocks, threads, 0, stream>>>(pos, num_tokens, cache, max_position, rot, q, ql, k, kl);
  STD_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename T, typename C, bool kNeox>
void launch_layout(const int64_t* pos, int64_t num_tokens, const C* cache, int64_t max_position, int64_t rot,
                   T* q, const HeadLayout& ql, T* k, const HeadLayout& kl, cudaStream_t stream) {
  constexpr int V = (kNeox ? 16 : 8) / int(sizeof(T));  // pairs per 16-byte access of the head
  const bool vec = (rot / 2) % V == 0 && aligned_to(cache, sizeof(Pack<C, V>)) && heads_aligned16(q, ql) &&
                   (k == nullptr || heads_aligned16(k, kl));
  if (vec)
    launch_v<T, C, kNeox, V>(pos, num_tokens, cache, max_position, rot, q, ql, k, kl, stream);
  else
    launch_v<T, C, kNeox, 1>(pos, num_tokens, cache, max_position, rot, q, ql, k, kl, stream);
}

template <typename T, typename C>
void launch(const int64_t* pos, int64_t num_tokens, const C* cache, int64_t max_position, int64_t rot,
            T* q, const HeadLayout& ql, T* k, const HeadLayout& kl, bool neox, cudaStream_t stream) {
  if (neox)
    launch_layout<T, C, true>(pos, num_tokens, cache, max_position, rot, q, ql, k, kl, stream);
  else
    launch_layout<T, C, false>(pos, num_tokens, cache, max_position, rot, q, ql, k, kl, stream);
}

}  // namespace

void rotary_embedding_cuda(const torch::stable::Tensor& positions, const torch::stable::Tensor& query,
                           const std::optional<torch::stable::Tensor>& key, int64_t head_size,
                           const torch::stable::Tensor& cos_sin_cache, bool is_neox) {
  cuutil::check_cuda(positions, kOp, "positions");
  cuutil::check_cuda(query, kOp, "query");
  cuutil::check_cuda(cos_sin_cache, kOp, "cos_sin_cache");
  cuutil::check_same_device(query, positions, kOp, "query", "positions");
  cuutil::check_same_device(query, cos_sin_cache, kOp, "query", "cos_sin_cache");
  if (key.has_value()) {
    cuutil::check_cuda(*key, kOp, "key");
    cuutil::check_same_device(query, *key, kOp, "query", "key");
    cuutil::check_same_dtype(query, *key, kOp, "query", "key");
  }
  STD_TORCH_CHECK(positions.scalar_type() == cuutil::ScalarType::Long, kOp, ": expected int64 'positions', got ",
                  cuutil::dtype_name(positions.scalar_type()));
  STD_TORCH_CHECK(positions.dim() == 1 || positions.dim() == 2, kOp,
                  ": expected 'positions' of shape [num_tokens] or [batch_size, seq_len]");
  cuutil::check_llm_dtype(query, kOp, "query");
  const auto cache_dtype = cos_sin_cache.scalar_type();
  STD_TORCH_CHECK(cache_dtype == query.scalar_type() || cache_dtype == cuutil::ScalarType::Float, kOp,
                  ": expected 'cos_sin_cache' in the dtype of query or in float32, got ",
                  cuutil::dtype_name(cache_dtype));
  STD_TORCH_CHECK(head_size > 0, kOp, ": expected head_size > 0, got ", head_size);
  STD_TORCH_CHECK(cos_sin_cache.dim() == 2, kOp, ": expected 'cos_sin_cache' of shape [max_position, rot_dim]");
  const int64_t rot = cos_sin_cache.size(1);
  STD_TORCH_CHECK(rot % 2 == 0 && rot > 0 && rot <= head_size, kOp, ": rot_dim = cos_sin_cache.size(1) = ", rot,
                  " must be even, positive and at most head_size = ", head_size);
  const torch::stable::accelerator::DeviceGuard guard(query.get_device_index());
  const torch::stable::Tensor pos = cuutil::contig(positions);
  const int64_t num_tokens = pos.numel();
  torch::stable::Tensor q = rotatable(query);
  std::optional<torch::stable::Tensor> k;
  if (key.has_value()) k = rotatable(*key);
  const HeadLayout ql = head_layout(q, pos, head_size, "query");
  const HeadLayout kl = k.has_value() ? head_layout(*k, pos, head_size, "key") : HeadLayout{1, 0, 0, 0, 0};
  STD_TORCH_CHECK(std::max(ql.heads, kl.heads) <= INT32_MAX / (rot / 2), kOp, ": ", std::max(ql.heads, kl.heads),
                  " heads of ", rot / 2, " rotated pairs are more than 2^31 - 1 rotations per token");
  if (num_tokens == 0) return;
  const torch::stable::Tensor cache = cuutil::contig(cos_sin_cache);
  const cudaStream_t stream = cuutil::current_stream(query.get_device_index());
  const int64_t* p = static_cast<const int64_t*>(pos.const_data_ptr());
  cuutil::dispatch_llm_dtype(query.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    T* qp = static_cast<T*>(q.mutable_data_ptr());
    T* kp = k.has_value() ? static_cast<T*>(k->mutable_data_ptr()) : nullptr;
    if (cache_dtype == query.scalar_type())
      launch(p, num_tokens, static_cast<const T*>(cache.const_data_ptr()), cache.size(0), rot, qp, ql, kp, kl,
             is_neox, stream);
    else
      launch(p, num_tokens, static_cast<const float*>(cache.const_data_ptr()), cache.size(0), rot, qp, ql, kp,
             kl, is_neox, stream);
  });
  cuutil::write_back(query, q);
  if (key.has_value()) cuutil::write_back(*key, *k);
}

}  // namespace example
