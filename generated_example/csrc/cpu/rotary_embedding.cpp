// CPU kernel of example::rotary_embedding (user-owned), vLLM's semantics.
//
// For each token, the cache row cos | sin of its position is read once into
// float buffers, then every head of query (and key) is rotated in place:
//   neox:  (x, y) = (a[i], a[i + rot/2])   GPT-J: (x, y) = (a[2i], a[2i + 1])
//   x' = x * cos_i - y * sin_i,  y' = y * cos_i + x * sin_i
// Each product, sum and difference is rounded to the tensor dtype, as
// vLLM's forward_native (and its scalar_t kernels) compute in that dtype;
// Note [No implicit FMA] keeps float32 bit-exact too. GPT-J pairs are
// vectorised by swapping neighbours within a vector against a duplicated
// cos and a sign-alternating sin. Tokens are split across threads.
#include "../rotary_embedding.h"
#include "kernel_utils.h"

#include <vector>

namespace example {
namespace {

using kutil::Tensor;
using kutil::round_to;
using kutil::to_f32;

constexpr const char* kOp = "example::rotary_embedding";

// Where the heads of one of query/key live: element offset of token t is
// (t / seq) * batch_stride + (t % seq) * token_stride; heads are head_stride apart
// and each head's values are contiguous.
struct HeadLayout {
  int64_t seq = 1;
  int64_t batch_stride = 0;
  int64_t token_stride = 0;
  int64_t heads = 0;
  int64_t head_stride = 0;

  int64_t token_offset(int64_t t) const { return (t / seq) * batch_stride + (t % seq) * token_stride; }
};

HeadLayout head_layout(const Tensor& x, const Tensor& positions, int64_t head_size, const char* name) {
  const int64_t pd = positions.dim();
  STD_TORCH_CHECK(x.dim() == pd + 1 || x.dim() == pd + 2, kOp, ": expected '", name,
                  "' of shape [*positions.shape, heads * head_size] or [*positions.shape, heads, "
                  "head_size], got ", x.dim(), " dims for ", pd, "-dim positions");
  for (int64_t d = 0; d < pd; ++d)
    STD_TORCH_CHECK(x.size(d) == positions.size(d), kOp, ": '", name, "' has ", x.size(d),
                    " tokens in dim ", d, " but positions has ", positions.size(d));
  HeadLayout l;
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

// The rotation of one head, scalar. c, s: float cos/sin (already rounded to T).
template <typename T>
void rotate_head_scalar(T* a, const float* c, const float* s, int64_t half, bool neox) {
  for (int64_t i = 0; i < half; ++i) {
    T* px = neox ? a + i : a + 2 * i;
    T* py = neox ? a + half + i : a + 2 * i + 1;
    const float x = to_f32(*px), y = to_f32(*py);
    const float xo = round_to<T>(round_to<T>(x * c[i]) - round_to<T>(y * s[i]));
    const float yo = round_to<T>(round_to<T>(y * c[i]) + round_to<T>(x * s[i]));
    *px = kutil::from_f32<T>(xo);
    *py = kutil::from_f32<T>(yo);
  }
}

#if EXAMPLE_X86
// neox: halves [0, half) and [half, 2 half) of the head, 8 pairs per step.
template <typename T>
EXAMPLE_AVX2 void rotate_head_neox_avx2(T* a, const float* c, const float* s, int64_t half) {
  const T* tag = nullptr;
  T* b = a + half;
  int64_t i = 0;
  for (; i + 8 <= half; i += 8) {
    const __m256 x = kutil::load8(a + i), y = kutil::load8(b + i);
    const __m256 vc = _mm256_loadu_ps(c + i), vs = _mm256_loadu_ps(s + i);
    const __m256 xo = kutil::round8(_mm256_sub_ps(kutil::round8(_mm256_mul_ps(x, vc), tag),
                                                  kutil::round8(_mm256_mul_ps(y, vs), tag)),
                                    tag);
    const __m256 yo = kutil::round8(_mm256_add_ps(kutil::round8(_mm256_mul_ps(y, vc), tag),
                                                  kutil::round8(_mm256_mul_ps(x, vs), tag)),
                                    tag);
    kutil::store8(a + i, xo);
    kutil::store8(b + i, yo);
  }
  if (i < half) {
    const int64_t m = half - i;
    const __m256 x = kutil::load_n(a + i, m), y = kutil::load_n(b + i, m);
    const __m256 vc = kutil::load_n(c + i, m), vs = kutil::load_n(s + i, m);
    const __m256 xo = kutil::round8(_mm256_sub_ps(kutil::round8(_mm256_mul_ps(x, vc), tag),
                                                  kutil::round8(_mm256_mul_ps(y, vs), tag)),
                                    tag);
    const __m256 yo = kutil::round8(_mm256_add_ps(kutil::round8(_mm256_mul_ps(y, vc), tag),
                                                  kutil::round8(_mm256_mul_ps(x, vs), tag)),
                                    tag);
    kutil::store_n(a + i, xo, m);
    kutil::store_n(b + i, yo, m);
  }
}

// GPT-J: interleaved pairs over [0, rot). c2 = (c0, c0, c1, c1, ...),
// s2 = (-s0, s0, -s1, s1, ...): even lanes get x c - y s, odd lanes y c + x s.
template <typename T>
EXAMPLE_AVX2 void rotate_head_gptj_avx2(T* a, const float* c2, const float* s2, int64_t rot) {
  const T* tag = nullptr;
  int64_t j = 0;
  for (; j + 8 <= rot; j += 8) {
    const __m256 v = kutil::load8(a + j);
    const __m256 sw = _mm256_permute_ps(v, 0xB1);  // (y0, x0, y1, x1, ...)
    const __m256 r = kutil::round8(
        _mm256_add_ps(kutil::round8(_mm256_mul_ps(v, _mm256_loadu_ps(c2 + j)), tag),
                      kutil::round8(_mm256_mul_ps(sw, _mm256_loadu_ps(s2 + j)), tag)),
        tag);
    kutil::store8(a + j, r);
  }
  if (j < rot) {
    const int64_t m = rot - j;  // even: whole pairs
    const __m256 v = kutil::load_n(a + j, m);
    const __m256 sw = _mm256_permute_ps(v, 0xB1);
    const __m256 r = kutil::round8(
        _mm256_add_ps(kutil::round8(_mm256_mul_ps(v, kutil::load_n(c2 + j, m)), tag),
                      kutil::round8(_mm256_mul_ps(sw, kutil::load_n(s2 + j, m)), tag)),
        tag);
    kutil::store_n(a + j, r, m);
  }
}

// The same two rotations, 16 pairs (neox) / 8 pairs (GPT-J) per step.
template <typename T>
EXAMPLE_AVX512 void rotate_head_neox_avx512(T* a, const float* c, const float* s, int64_t half) {
  const T* tag = nullptr;
  T* b = a + half;
  for (int64_t i = 0; i < half; i += 16) {
    const int64_t m = std::min<int64_t>(16, half - i);
    const bool full = m == 16;
    const __m512 x = full ? kutil::load16(a + i) : kutil::load16_n(a + i, m);
    const __m512 y = full ? kutil::load16(b + i) : kutil::load16_n(b + i, m);
    const __m512 vc = kutil::load16_n(c + i, m), vs = kutil::load16_n(s + i, m);
    const __m512 xo = kutil::round16(_mm512_sub_ps(kutil::round16(_mm512_mul_ps(x, vc), tag),
                                                   kutil::round16(_mm512_mul_ps(y, vs), tag)),
                                     tag);
    const __m512 yo = kutil::round16(_mm512_add_ps(kutil::round16(_mm512_mul_ps(y, vc), tag),
                                                   kutil::round16(_mm512_mul_ps(x, vs), tag)),
                                     tag);
    if (full) {
      kutil::store16(a + i, xo);
      kutil::store16(b + i, yo);
    } else {
      kutil::store16_n(a + i, xo, m);
      kutil::store16_n(b + i, yo, m);
    }
  }
}

template <typename T>
EXAMPLE_AVX512 void rotate_head_gptj_avx512(T* a, const float* c2, const float* s2, int64_t rot) {
  const T* tag = nullptr;
  for (int64_t j = 0; j < rot; j += 16) {
    const int64_t m = std::min<int64_t>(16, rot - j);  // even: whole pairs
    const __m512 v = m == 16 ? kutil::load16(a + j) : kutil::load16_n(a + j, m);
    const __m512 sw = _mm512_permute_ps(v, 0xB1);  // (y0, x0, y1, x1, ...)
    const __m512 r = kutil::round16(
        _mm512_add_ps(kutil::round16(_mm512_mul_ps(v, kutil::load16_n(c2 + j, m)), tag),
                      kutil::round16(_mm512_mul_ps(sw, kutil::load16_n(s2 + j, m)), tag)),
        tag);
    if (m == 16)
      kutil::store16(a + j, r);
    else
      kutil::store16_n(a + j, r, m);
  }
}
#endif  // EXAMPLE_X86

struct Target {
  void* data;
  HeadLayout layout;
};

template <typename T, typename C>
void rope(const int64_t* positions, int64_t num_tokens, const C* cache, int64_t rot,
          const Target* targets, int n_targets, bool neox) {
  const int64_t half = rot / 2;
  const bool simd = kutil::cpu_has_avx2_fma();
  const bool wide = kutil::cpu_has_avx512();
  int64_t per_token = 0;
  for (int k = 0; k < n_targets; ++k) per_token += targets[k].layout.heads * rot;
  const int64_t grain = kutil::row_grain(per_token);
  torch::stable::parallel_for(0, num_tokens, grain, [&](int64_t t0, int64_t t1) {
    // cos | sin of the current token in float, rounded to T (forward_native's
    // cos.to(x.dtype)); GPT-J's SIMD path uses the duplicated / signed forms.
    std::vector<float> cs(2 * rot);
    float* c = cs.data();
    float* s = cs.data() + rot;
    std::vector<float> pair(2 * rot);
    float* c2 = pair.data();
    float* s2 = pair.data() + rot;
    for (int64_t t = t0; t < t1; ++t) {
      const C* row = cache + positions[t] * rot;
      for (int64_t i = 0; i < half; ++i) {
        c[i] = round_to<T>(to_f32(row[i]));
        s[i] = round_to<T>(to_f32(row[half + i]));
      }
      if (!neox)
        for (int64_t i = 0; i < half; ++i) {
          c2[2 * i] = c2[2 * i + 1] = c[i];
          s2[2 * i] = -s[i];
          s2[2 * i + 1] = s[i];
        }
      for (int k = 0; k < n_targets; ++k) {
        const HeadLayout& l = targets[k].layout;
        T* base = static_cast<T*>(targets[k].data) + l.token_offset(t);
        for (int64_t h = 0; h < l.heads; ++h) {
          T* head = base + h * l.head_stride;
#if EXAMPLE_X86
          if (wide) {
            if (neox)
              rotate_head_neox_avx512(head, c, s, half);
            else
              rotate_head_gptj_avx512(head, c2, s2, rot);
            continue;
          }
          if (simd) {
            if (neox)
              rotate_head_neox_avx2(head, c, s, half);
            else
              rotate_head_gptj_avx2(head, c2, s2, rot);
            continue;
          }
#endif
          rotate_head_scalar(head, c, s, half, neox);
        }
      }
    }
  });
}

// A tensor the kernel can rotate in place: the last dim must have stride 1.
Tensor rotatable(const Tensor& x) {
  return x.numel() == 0 || x.stride(-1) == 1 ? x : torch::stable::contiguous(x);
}

}  // namespace

void rotary_embedding_cpu(const torch::stable::Tensor& positions,
                          const torch::stable::Tensor& query,
                          const std::optional<torch::stable::Tensor>& key, int64_t head_size,
                          const torch::stable::Tensor& cos_sin_cache, bool is_neox) {
  kutil::check_cpu(positions, kOp, "positions");
  kutil::check_cpu(query, kOp, "query");
  kutil::check_cpu(cos_sin_cache, kOp, "cos_sin_cache");
  if (key.has_value()) kutil::check_cpu(*key, kOp, "key");
  STD_TORCH_CHECK(positions.scalar_type() == kutil::ScalarType::Long, kOp,
                  ": expected int64 'positions', got ", kutil::dtype_name(positions.scalar_type()));
  STD_TORCH_CHECK(positions.dim() == 1 || positions.dim() == 2, kOp,
                  ": expected 'positions' of shape [num_tokens] or [batch_size, seq_len]");
  kutil::check_llm_dtype(query, kOp, "query");
  if (key.has_value()) kutil::check_same_dtype(query, *key, kOp, "query", "key");
  const auto cache_dtype = cos_sin_cache.scalar_type();
  STD_TORCH_CHECK(cache_dtype == query.scalar_type() || cache_dtype == kutil::ScalarType::Float, kOp,
                  ": expected 'cos_sin_cache' in the dtype of query or in float32, got ",
                  kutil::dtype_name(cache_dtype));
  STD_TORCH_CHECK(head_size > 0, kOp, ": expected head_size > 0, got ", head_size);
  STD_TORCH_CHECK(cos_sin_cache.dim() == 2, kOp, ": expected 'cos_sin_cache' of shape [max_position, rot_dim]");
  const int64_t rot = cos_sin_cache.size(1);
  const int64_t max_position = cos_sin_cache.size(0);
  STD_TORCH_CHECK(rot % 2 == 0 && rot > 0 && rot <= head_size, kOp, ": rot_dim = cos_sin_cache.size(1) = ", rot,
                  " must be even, positive and at most head_size = ", head_size);

  const Tensor pos = kutil::contig(positions);
  const int64_t num_tokens = pos.numel();
  Tensor q = rotatable(query);
  std::optional<Tensor> k;
  if (key.has_value()) k = rotatable(*key);
  Target targets[2];
  int n_targets = 0;
  targets[n_targets++] = {nullptr, head_layout(q, pos, head_size, "query")};
  if (k.has_value()) targets[n_targets++] = {nullptr, head_layout(*k, pos, head_size, "key")};
  if (num_tokens == 0) return;

  const int64_t* p = static_cast<const int64_t*>(pos.const_data_ptr());
  for (int64_t t = 0; t < num_tokens; ++t)
    STD_TORCH_CHECK(p[t] >= 0 && p[t] < max_position, kOp, ": position ", p[t], " of token ", t,
                    " is outside the cache [0, ", max_position, ")");
  targets[0].data = q.mutable_data_ptr();
  if (k.has_value()) targets[1].data = k->mutable_data_ptr();
  const Tensor cache = kutil::contig(cos_sin_cache);

  kutil::dispatch_llm_dtype(query.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    if (cache_dtype == query.scalar_type())
      rope<T>(p, num_tokens, static_cast<const T*>(cache.const_data_ptr()), rot, targets, n_targets, is_neox);
    else
      rope<T>(p, num_tokens, static_cast<const float*>(cache.const_data_ptr()), rot, targets, n_targets,
              is_neox);
  });
  kutil::write_back(query, q);
  if (key.has_value()) kutil::write_back(*key, *k);
}

}  // namespace example
