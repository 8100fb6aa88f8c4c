// Shared helpers for the hand-written CPU kernels (user-owned, not generated).
//
// - argument checks with clear messages (device, dtype, shape)
// - run-time CPU feature detection (Note [Run-time ISA dispatch]) so one
//   binary runs on any x86-64 and uses what the host has: AVX-512 code lives
//   in functions marked EXAMPLE_AVX512, called when cpu_has_avx512(); AVX2 in
//   EXAMPLE_AVX2 functions, called when cpu_has_avx2_fma(); every kernel has a
//   scalar twin.
// - AVX2 and AVX-512 exp() for float (double: AVX2), used by gelu / gelu_backward.
// - float16 / bfloat16 <-> float32 conversions (scalar and AVX2/F16C), and the
//   "round to the storage dtype" step that lets a kernel reproduce PyTorch's
//   per-operation rounding of reduced-precision tensors (rms_norm, rotary).
//
// Note [No implicit FMA]
// Some kernels reproduce reference arithmetic bit for bit (torchvision's IoU
// and bilinear weights, vLLM's rotation, the per-op rounding of fp16/bf16
// math). GCC contracts a*b + c into one fused multiply-add by default in
// functions compiled for FMA, even across separate intrinsics, which changes
// the last bit and can flip an IoU comparison. So contraction is off in every
// file that includes this header (all of them: the inline helpers below must
// compile alike in every translation unit); a kernel that wants an FMA writes
// _mm256_fmadd_ps itself, as gelu and matmul do.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#endif

#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/BFloat16.h>
#include <torch/headeronly/util/Exception.h>
#include <torch/headeronly/util/Half.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

// Note [Run-time ISA dispatch]
// The library is compiled for baseline x86-64 (no -march flag), so it loads on
// every x86-64 host. Faster code paths are compiled per function with a target
// attribute and called only after a run-time check says the CPU (and the OS,
// which must save the wider registers) supports them:
//   EXAMPLE_AVX512: AVX-512 F/BW/VL/DQ (Skylake-SP and later Xeons, Zen 4), 16 floats a vector;
//   EXAMPLE_AVX2:   AVX2 + FMA + F16C (Haswell and later, Zen), 8 floats a vector;
//   scalar:         portable C++, for every other CPU.
// An AVX-512 function may call AVX2 helpers (its target includes theirs), never
// the reverse. cpu_isa() picks the best level once; EXAMPLE_CPU_ISA=scalar,
// avx2 or avx512 in the environment caps it (EXAMPLE_FORCE_SCALAR=1 is
// EXAMPLE_CPU_ISA=scalar; -DEXAMPLE_FORCE_SCALAR at build time too), so one
// build tests every path the host has. The C function example_cpu_isa()
// (cpu_isa.cpp) says which level the library runs.
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define EXAMPLE_X86 1
#define EXAMPLE_AVX2 __attribute__((target("avx2,fma,f16c")))
#define EXAMPLE_AVX512 \
  __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq")))
#else
#define EXAMPLE_X86 0
#define EXAMPLE_AVX2
#define EXAMPLE_AVX512
#endif

namespace example {
namespace kutil {

using torch::headeronly::ScalarType;
using torch::stable::Tensor;
using Half = torch::headeronly::Half;
using BFloat16 = torch::headeronly::BFloat16;

// Elements per parallel_for task for memory-bound elementwise kernels: below
// ~64K elements the fork/join costs more than it saves.
constexpr int64_t kElementwiseGrain = 1 << 16;

// The SIMD levels of Note [Run-time ISA dispatch], in increasing order.
enum class Isa : int { scalar = 0, avx2 = 1, avx512 = 2 };

inline const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::avx512:
      return "avx512";
    case Isa::avx2:
      return "avx2";
    default:
      return "scalar";
  }
}

// The best level this CPU and OS support.
inline Isa host_isa() {
#if EXAMPLE_X86
  if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
        __builtin_cpu_supports("f16c")))
    return Isa::scalar;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    return Isa::avx512;
  return Isa::avx2;
#else
  return Isa::scalar;
#endif
}

// The level the kernels run: the host's, capped by EXAMPLE_CPU_ISA /
// EXAMPLE_FORCE_SCALAR (checked once; a cap above the host's changes nothing).
inline Isa cpu_isa() {
#if EXAMPLE_X86 && !defined(EXAMPLE_FORCE_SCALAR)  // -DEXAMPLE_FORCE_SCALAR: test the fallback
  static const Isa isa = [] {
    const char* force = std::getenv("EXAMPLE_FORCE_SCALAR");
    if (force != nullptr && force[0] != '\0' && force[0] != '0') return Isa::scalar;
    Isa best = host_isa();
    const char* cap = std::getenv("EXAMPLE_CPU_ISA");
    if (cap != nullptr && cap[0] != '\0') {
      Isa asked = Isa::scalar;
      if (std::strcmp(cap, "avx512") == 0)
        asked = Isa::avx512;
      else if (std::strcmp(cap, "avx2") == 0)
        asked = Isa::avx2;
      else
        STD_TORCH_CHECK(std::strcmp(cap, "scalar") == 0, "EXAMPLE_CPU_ISA=", cap,
                        " is not a SIMD level: use scalar, avx2 or avx512");
      best = std::min(best, asked);
    }
    return best;
  }();
  return isa;
#else
  return Isa::scalar;
#endif
}

// True when the AVX2 + FMA + F16C kernels may run.
inline bool cpu_has_avx2_fma() { return cpu_isa() >= Isa::avx2; }

// True when the AVX-512 (F, BW, VL, DQ) kernels may run.
inline bool cpu_has_avx512() { return cpu_isa() >= Isa::avx512; }

inline const char* dtype_name(ScalarType st) { return torch::headeronly::toString(st); }

inline void check_cpu(const Tensor& t, const char* op, const char* name) {
  STD_TORCH_CHECK(
      t.is_cpu(), op, ": expected '", name, "' to be a CPU tensor");
}

inline bool is_float_or_double(ScalarType st) {
  return st == ScalarType::Float || st == ScalarType::Double;
}

inline void check_float_dtype(const Tensor& t, const char* op, const char* name) {
  const ScalarType st = t.scalar_type();
  STD_TORCH_CHECK(
      is_float_or_double(st),
      op, ": unsupported dtype ", torch::headeronly::toString(st),
      " for '", name, "'; supported dtypes are Float (float32) and Double (float64)");
}

inline bool is_reduced_float(ScalarType st) {
  return st == ScalarType::Half || st == ScalarType::BFloat16;
}

// float32, float16 or bfloat16: the dtypes of the vLLM kernels.
inline void check_llm_dtype(const Tensor& t, const char* op, const char* name) {
  const ScalarType st = t.scalar_type();
  STD_TORCH_CHECK(st == ScalarType::Float || is_reduced_float(st), op, ": unsupported dtype ",
                  dtype_name(st), " for '", name,
                  "'; supported dtypes are float32, float16 and bfloat16");
}

inline void check_same_dtype(
    const Tensor& a, const Tensor& b, const char* op, const char* na, const char* nb) {
  STD_TORCH_CHECK(
      a.scalar_type() == b.scalar_type(),
      op, ": expected '", na, "' and '", nb, "' to have the same dtype, got ",
      torch::headeronly::toString(a.scalar_type()), " and ",
      torch::headeronly::toString(b.scalar_type()));
}

inline bool same_sizes(const Tensor& a, const Tensor& b) {
  const auto sa = a.sizes();
  const auto sb = b.sizes();
  if (sa.size() != sb.size()) return false;
  for (size_t i = 0; i < sa.size(); ++i)
    if (sa[i] != sb[i]) return false;
  return true;
}

inline void check_same_sizes(
    const Tensor& a, const Tensor& b, const char* op, const char* na, const char* nb) {
  STD_TORCH_CHECK(
      same_sizes(a, b), op, ": expected '", na, "' and '", nb,
      "' to have the same shape (dims ", a.dim(), " vs ", b.dim(),
      ", numel ", a.numel(), " vs ", b.numel(), ")");
}

// Contiguous view of t (no copy when already contiguous).
inline Tensor contig(const Tensor& t) {
  return t.is_contiguous() ? t : torch::stable::contiguous(t);
}

// A mutated argument is computed in place when it is contiguous; otherwise in
// a contiguous copy (with its values) that write_back() copies into it.
inline Tensor mutable_contig(const Tensor& t) { return contig(t); }

inline void write_back(const Tensor& target, const Tensor& computed) {
  if (computed.numel() > 0 && computed.data_ptr() != target.data_ptr()) {
    Tensor dst = target;
    torch::stable::copy_(dst, computed);
  }
}

// Rows of work per parallel_for task for row-wise kernels of row length n:
// below ~32K elements per task the fork/join costs more than it saves.
inline int64_t row_grain(int64_t n) {
  return std::max<int64_t>(1, (int64_t(1) << 15) / std::max<int64_t>(n, 1));
}

// Fresh, contiguous, uninitialised tensor with t's sizes/dtype/device.
inline Tensor empty_contig_like(const Tensor& t) {
  return torch::stable::new_empty(t, t.sizes());
}

// Common checks for binary elementwise float ops (device, dtype, shape).
inline void check_binary_elementwise(
    const Tensor& a, const Tensor& b, const char* op) {
  check_cpu(a, op, "a");
  check_cpu(b, op, "b");
  check_float_dtype(a, op, "a");
  check_same_dtype(a, b, op, "a", "b");
  check_same_sizes(a, b, op, "a", "b");
}

// ---- scalar element access (float32 math for every dtype) ---------------------

inline float to_f32(float v) { return v; }
inline float to_f32(Half v) { return static_cast<float>(v); }
inline float to_f32(BFloat16 v) { return static_cast<float>(v); }

template <typename T>
inline T from_f32(float v) {
  return static_cast<T>(v);  // round to nearest even, as PyTorch's casts
}

// v rounded to T and back: one reduced-precision operation's result.
template <typename T>
inline float round_to(float v) {
  return to_f32(from_f32<T>(v));
}

#if EXAMPLE_X86
// ---------------------------------------------------------------------------
// AVX2 exp. Cephes-style: x = n*ln2 + r, |r| <= ln2/2, exp(r) by polynomial,
// 2^n by exponent-field arithmetic. Inputs are clamped so the result is finite
// below the underflow limit (flushes to ~0) and +inf above the overflow limit
// (as std::exp); NaN in -> NaN out. ~1 ulp for float, ~2 ulp for double.
// ---------------------------------------------------------------------------
EXAMPLE_AVX2 inline __m256 exp256_ps(__m256 x) {
  const __m256 hi = _mm256_set1_ps(88.3762626647949f);
  const __m256 lo = _mm256_set1_ps(-87.3365447504f);
  const __m256 overflow = _mm256_cmp_ps(x, hi, _CMP_GT_OQ);
  const __m256 isnan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  x = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
  const __m256 log2e = _mm256_set1_ps(1.44269504088896341f);
  __m256 n = _mm256_round_ps(
      _mm256_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // r = x - n*ln2 (ln2 split in two for precision)
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500E-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507E-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073E-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894E-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459E-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201E-1f));
  const __m256 r2 = _mm256_mul_ps(r, r);
  p = _mm256_fmadd_ps(p, r2, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // 2^n: n in [-127, 128]; split so each factor is a normal float.
  __m256i ni = _mm256_cvtps_epi32(n);
  __m256i n1 = _mm256_srai_epi32(ni, 1);
  __m256i n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  __m256 res = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
  res = _mm256_blendv_ps(res, _mm256_set1_ps(__builtin_inff()), overflow);
  return _mm256_blendv_ps(res, _mm256_set1_ps(__builtin_nanf("")), isnan);
}

EXAMPLE_AVX2 inline __m256d exp256_pd(__m256d x) {
  const __m256d hi = _mm256_set1_pd(709.0);
  const __m256d lo = _mm256_set1_pd(-708.0);
  const __m256d overflow = _mm256_cmp_pd(x, hi, _CMP_GT_OQ);
  const __m256d isnan = _mm256_cmp_pd(x, x, _CMP_UNORD_Q);
  x = _mm256_min_pd(_mm256_max_pd(x, lo), hi);
  __m256d n = _mm256_round_pd(
      _mm256_mul_pd(x, _mm256_set1_pd(1.4426950408889634)),
      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256d r = _mm256_fnmadd_pd(n, _mm256_set1_pd(6.93145751953125e-1), x);
  r = _mm256_fnmadd_pd(n, _mm256_set1_pd(1.42860682030941723212e-6), r);
  // Taylor series to degree 13 (|r| <= 0.347: truncation < 1e-17).
  __m256d p = _mm256_set1_pd(1.0 / 6227020800.0);
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 479001600.0));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 39916800.0));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 3628800.0));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 362880.0));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 40320.0));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 5040.0));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 720.0));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 120.0));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 24.0));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0 / 6.0));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(0.5));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0));
  p = _mm256_fmadd_pd(p, r, _mm256_set1_pd(1.0));
  // 2^n, n in [-1022, 1023]
  __m128i n32 = _mm256_cvtpd_epi32(n);
  __m256i n64 = _mm256_cvtepi32_epi64(n32);
  __m256i e = _mm256_slli_epi64(_mm256_add_epi64(n64, _mm256_set1_epi64x(1023)), 52);
  __m256d res = _mm256_mul_pd(p, _mm256_castsi256_pd(e));
  res = _mm256_blendv_pd(res, _mm256_set1_pd(__builtin_inf()), overflow);
  return _mm256_blendv_pd(res, _mm256_set1_pd(__builtin_nan("")), isnan);
}

EXAMPLE_AVX2 inline float hsum256_ps(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

EXAMPLE_AVX2 inline double hsum256_pd(__m256d v) {
  __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  s = _mm_add_sd(s, _mm_unpackhi_pd(s, s));
  return _mm_cvtsd_f64(s);
}

// Mask for the first `rem` (0..7) lanes of a float vector / (0..3) of double.
EXAMPLE_AVX2 inline __m256i tail_mask_ps(int64_t rem) {
  alignas(32) static const int32_t m[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                            0,  0,  0,  0,  0,  0,  0,  0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(m + 8 - rem));
}
EXAMPLE_AVX2 inline __m256i tail_mask_pd(int64_t rem) {
  alignas(32) static const int64_t m[8] = {-1, -1, -1, -1, 0, 0, 0, 0};
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(m + 4 - rem));
}
// ---- AVX2 element access: 8 lanes of float32 ----------------------------------

EXAMPLE_AVX2 inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
EXAMPLE_AVX2 inline __m256 load8(const Half* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
EXAMPLE_AVX2 inline __m256 load8(const BFloat16* p) {
  const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

// float32 -> bfloat16 bits in the low half of each 32-bit lane, round to
// nearest even, NaN -> 0x7FC0 (as c10::BFloat16).
EXAMPLE_AVX2 inline __m256i bf16_bits(__m256 v) {
  const __m256i u = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded =
      _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF))), 16);
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  return _mm256_blendv_epi8(rounded, _mm256_set1_epi32(0x7FC0), nan);
}

EXAMPLE_AVX2 inline void store8(float* p, __m256 v) { _mm256_storeu_ps(p, v); }
EXAMPLE_AVX2 inline void store8(Half* p, __m256 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}
EXAMPLE_AVX2 inline void store8(BFloat16* p, __m256 v) {
  const __m256i b = bf16_bits(v);
  // pack the low 16 bits of the 8 lanes: packus works per 128-bit lane.
  const __m256i packed = _mm256_packus_epi32(b, b);
  const __m256i ordered = _mm256_permute4x64_epi64(packed, 0xD8);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(ordered));
}

// v rounded to T and back (per-operation rounding of fp16/bf16 math).
EXAMPLE_AVX2 inline __m256 round8(__m256 v, const float*) { return v; }
EXAMPLE_AVX2 inline __m256 round8(__m256 v, const Half*) {
  return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}
EXAMPLE_AVX2 inline __m256 round8(__m256 v, const BFloat16*) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(bf16_bits(v), 16));
}

// The first n (< 8) elements, zero-filled.
template <typename T>
EXAMPLE_AVX2 inline __m256 load_n(const T* p, int64_t n) {
  T buf[8];
  std::memset(static_cast<void*>(buf), 0, sizeof(buf));
  std::memcpy(static_cast<void*>(buf), p, sizeof(T) * n);
  return load8(buf);
}

template <typename T>
EXAMPLE_AVX2 inline void store_n(T* p, __m256 v, int64_t n) {
  T buf[8];
  store8(buf, v);
  std::memcpy(static_cast<void*>(p), buf, sizeof(T) * n);
}

// ---- AVX-512: 16 lanes of float32 ----------------------------------------------

// exp for 16 floats: the polynomial of exp256_ps, with 2^n by scalef, which
// overflows to +inf above ~88.72 and goes through the denormals to 0 below;
// NaN in -> NaN out.
EXAMPLE_AVX512 inline __m512 exp512_ps(__m512 x) {
  const __mmask16 isnan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  const __m512 xc = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-104.0f)), _mm512_set1_ps(89.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), xc);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500E-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507E-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073E-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894E-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459E-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201E-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_mask_mov_ps(_mm512_scalef_ps(p, n), isnan, x);
}

// Mask of the first `rem` (0..16) lanes.
inline __mmask16 tail_mask16(int64_t rem) {
  return static_cast<__mmask16>((1u << rem) - 1u);
}

EXAMPLE_AVX512 inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
EXAMPLE_AVX512 inline __m512 load16(const Half* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
EXAMPLE_AVX512 inline __m512 load16(const BFloat16* p) {
  const __m512i w =
      _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}

// The first n (< 16) elements, zero-filled.
EXAMPLE_AVX512 inline __m512 load16_n(const float* p, int64_t n) {
  return _mm512_maskz_loadu_ps(tail_mask16(n), p);
}
EXAMPLE_AVX512 inline __m512 load16_n(const Half* p, int64_t n) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(tail_mask16(n), p));
}
EXAMPLE_AVX512 inline __m512 load16_n(const BFloat16* p, int64_t n) {
  const __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(tail_mask16(n), p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}

// float32 -> bfloat16 bits in the low half of each 32-bit lane, round to
// nearest even, NaN -> 0x7FC0 (as c10::BFloat16 and bf16_bits above).
EXAMPLE_AVX512 inline __m512i bf16_bits16(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded =
      _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF))), 16);
  return _mm512_mask_mov_epi32(rounded, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q),
                               _mm512_set1_epi32(0x7FC0));
}

EXAMPLE_AVX512 inline __m256i half_bits16(__m512 v) {
  return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

EXAMPLE_AVX512 inline void store16(float* p, __m512 v) { _mm512_storeu_ps(p, v); }
EXAMPLE_AVX512 inline void store16(Half* p, __m512 v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), half_bits16(v));
}
EXAMPLE_AVX512 inline void store16(BFloat16* p, __m512 v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtepi32_epi16(bf16_bits16(v)));
}

EXAMPLE_AVX512 inline void store16_n(float* p, __m512 v, int64_t n) {
  _mm512_mask_storeu_ps(p, tail_mask16(n), v);
}
EXAMPLE_AVX512 inline void store16_n(Half* p, __m512 v, int64_t n) {
  _mm256_mask_storeu_epi16(p, tail_mask16(n), half_bits16(v));
}
EXAMPLE_AVX512 inline void store16_n(BFloat16* p, __m512 v, int64_t n) {
  _mm256_mask_storeu_epi16(p, tail_mask16(n), _mm512_cvtepi32_epi16(bf16_bits16(v)));
}

// 32 elements from two vectors: bfloat16 packs both with one packus and one
// permute (two vpmovdw cost twice the shuffle port).
EXAMPLE_AVX512 inline void store32(float* p, __m512 lo, __m512 hi) {
  _mm512_storeu_ps(p, lo);
  _mm512_storeu_ps(p + 16, hi);
}
EXAMPLE_AVX512 inline void store32(Half* p, __m512 lo, __m512 hi) {
  store16(p, lo);
  store16(p + 16, hi);
}
EXAMPLE_AVX512 inline void store32(BFloat16* p, __m512 lo, __m512 hi) {
  const __m512i packed = _mm512_packus_epi32(bf16_bits16(lo), bf16_bits16(hi));
  const __m512i order = _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7);
  _mm512_storeu_si512(p, _mm512_permutexvar_epi64(order, packed));
}

// v rounded to T and back (per-operation rounding of fp16/bf16 math).
EXAMPLE_AVX512 inline __m512 round16(__m512 v, const float*) { return v; }
EXAMPLE_AVX512 inline __m512 round16(__m512 v, const Half*) {
  return _mm512_cvtph_ps(half_bits16(v));
}
EXAMPLE_AVX512 inline __m512 round16(__m512 v, const BFloat16*) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(bf16_bits16(v), 16));
}
#endif  // EXAMPLE_X86

// Calls f(T{}) with T the C++ type of a float32 / float16 / bfloat16 tensor.
template <typename F>
inline void dispatch_llm_dtype(ScalarType st, F&& f) {
  switch (st) {
    case ScalarType::Float:
      f(float{});
      break;
    case ScalarType::Half:
      f(Half{});
      break;
    case ScalarType::BFloat16:
      f(BFloat16{});
      break;
    default:
      STD_TORCH_CHECK(false, "unsupported dtype ", dtype_name(st));
  }
}

}  // namespace kutil
}  // namespace example
