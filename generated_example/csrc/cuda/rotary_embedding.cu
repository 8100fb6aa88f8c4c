// CUDA kernel of example::rotary_embedding (user-owned), vLLM's semantics.
//
// One block per token (grid-stride over tokens); its threads take the
// (head, pair) rotations of query, then of key. The arithmetic is the CPU
// kernel's: every product, sum and difference rounded to the tensor dtype
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

template <typename T, typename C, bool kNeox>
__device__ __forceinline__ void rotate_pair(T* head, const C* row, int64_t half, int64_t r) {
  using cuutil::round_to;
  using cuutil::to_f32;
  const float c = round_to<T>(to_f32(row[r]));
  const float s = round_to<T>(to_f32(row[half + r]));
  T* px = kNeox ? head + r : head + 2 * r;
  T* py = kNeox ? head + half + r : head + 2 * r + 1;
  const float x = to_f32(*px), y = to_f32(*py);
  const float xo = round_to<T>(cuutil::sub_rn(round_to<T>(cuutil::mul_rn(x, c)), round_to<T>(cuutil::mul_rn(y, s))));
  const float yo = round_to<T>(cuutil::add_rn(round_to<T>(cuutil::mul_rn(y, c)), round_to<T>(cuutil::mul_rn(x, s))));
  *px = cuutil::from_f32<T>(xo);
  *py = cuutil::from_f32<T>(yo);
}

template <typename T, typename C, bool kNeox>
__global__ void rope_kernel(const int64_t* __restrict__ positions, int64_t num_tokens,
                            const C* __restrict__ cache, int64_t max_position, int64_t rot, T* query,
                            HeadLayout ql, T* key, HeadLayout kl) {
  const int64_t half = rot / 2;
  for (int64_t t = blockIdx.x; t < num_tokens; t += gridDim.x) {
    const int64_t p = positions[t];
    if (p < 0 || p >= max_position) continue;
    const C* row = cache + p * rot;
    T* qb = query + token_offset(ql, t);
    for (int64_t i = threadIdx.x; i < ql.heads * half; i += blockDim.x)
      rotate_pair<T, C, kNeox>(qb + (i / half) * ql.head_stride, row, half, i % half);
    if (key != nullptr) {
      T* kb = key + token_offset(kl, t);
      for (int64_t i = threadIdx.x; i < kl.heads * half; i += blockDim.x)
        rotate_pair<T, C, kNeox>(kb + (i / half) * kl.head_stride, row, half, i % half);
    }
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

template <typename T, typename C>
void launch(const int64_t* pos, int64_t num_tokens, const C* cache, int64_t max_position, int64_t rot,
            T* q, const HeadLayout& ql, T* k, const HeadLayout& kl, bool neox, cudaStream_t stream) {
  const int64_t pairs = std::max(ql.heads, k != nullptr ? kl.heads : int64_t(0)) * (rot / 2);
  const int threads = static_cast<int>(std::min<int64_t>(512, std::max<int64_t>(32, (pairs + 31) / 32 * 32)));
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(num_tokens, int64_t(1) << 20));
  if (neox)
    rope_kernel<T, C, true><<<blocks, threads, 0, stream>>>(pos, num_tokens, cache, max_position, rot, q, ql, k, kl);
  else
    rope_kernel<T, C, false><<<blocks, threads, 0, stream>>>(pos, num_tokens, cache, max_position, rot, q, ql, k, kl);
  STD_CUDA_KERNEL_LAUNCH_CHECK();
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
