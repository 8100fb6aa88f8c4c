// CPU kernel of example::nms (user-owned), torchvision's semantics.
//
// Boxes are visited in the order of a stable descending sort of the scores
// (torchvision's order: aten::sort.stable; equal scores keep their index
// order), gathered once into structure-of-arrays form. Each kept box then suppresses every later box whose IoU with it
// exceeds the threshold, 8 (float) or 4 (double) boxes per AVX2 step.
//
// The IoU is torchvision's expression in the boxes' dtype,
//   inter / (area_i + area_j - inter),  w = max(0, min(x2) - max(x1)),
// with the max/min operand order of std::max/std::min (so NaN behaves alike)
// and no fused multiply-add (Note [No implicit FMA]); torchvision compares
// the float IoU with the double threshold, which for float boxes equals a
// float comparison with the threshold rounded down (float_threshold below).
#include "../nms.h"
#include "kernel_utils.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>
#include <vector>

namespace example {
namespace {

using kutil::Tensor;

constexpr const char* kOp = "example::nms";

// The order of aten::sort(scores, stable=True, descending=True), which
// torchvision calls: scores from the largest, NaN first (torch sorts NaN above
// +inf), equal scores (-0.0 equal to 0.0, every NaN equal) in index order. As
// one integer sort of (order key, index) pairs: no dispatcher call, no tensors.
template <typename T, typename U>
U descending_key(T score) {
  if (score != score) return 0;  // NaN: first
  if (score == 0) score = 0;     // -0.0 sorts as 0.0
  U bits;
  std::memcpy(&bits, &score, sizeof bits);
  constexpr U sign = U(1) << (8 * sizeof(U) - 1);
  const U ascending = (bits & sign) ? ~bits : bits | sign;  // the floats' order as integers
  return ~ascending;  // descending; +inf's key is still above NaN's 0
}

std::vector<int64_t> descending_order(const Tensor& scores, int64_t n) {
  const Tensor s = kutil::contig(scores);
  std::vector<int64_t> order(static_cast<size_t>(n));
  if (s.scalar_type() == kutil::ScalarType::Float) {
    const float* p = static_cast<const float*>(s.const_data_ptr());
    std::vector<uint64_t> keyed(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      keyed[i] = (uint64_t(descending_key<float, uint32_t>(p[i])) << 32) | uint64_t(i);
    std::sort(keyed.begin(), keyed.end());
    for (int64_t i = 0; i < n; ++i) order[i] = static_cast<int64_t>(keyed[i] & 0xffffffffu);
  } else {
    const double* p = static_cast<const double*>(s.const_data_ptr());
    std::vector<std::pair<uint64_t, int64_t>> keyed(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) keyed[i] = {descending_key<double, uint64_t>(p[i]), i};
    std::sort(keyed.begin(), keyed.end());
    for (int64_t i = 0; i < n; ++i) order[i] = keyed[i].second;
  }
  return order;
}

// The largest float t_lo <= t: for a float f, f > t (in double) <=> f > t_lo.
float float_threshold(double t) {
  float f = static_cast<float>(t);
  if (static_cast<double>(f) > t) f = std::nextafter(f, -INFINITY);
  return f;
}

template <typename T>
struct SortedBoxes {
  std::vector<T> x1, y1, x2, y2, area;
};

template <typename T>
SortedBoxes<T> gather(const T* dets, const int64_t* order, int64_t n) {
  SortedBoxes<T> b;
  for (auto* v : {&b.x1, &b.y1, &b.x2, &b.y2, &b.area}) v->resize(n);
  for (int64_t k = 0; k < n; ++k) {
    const T* d = dets + 4 * order[k];
    b.x1[k] = d[0];
    b.y1[k] = d[1];
    b.x2[k] = d[2];
    b.y2[k] = d[3];
    b.area[k] = (d[2] - d[0]) * (d[3] - d[1]);
  }
  return b;
}

// Box i suppresses box j when IoU(i, j) > threshold (torchvision's loop body).
template <typename T>
inline bool overlaps(const SortedBoxes<T>& b, int64_t i, int64_t j, double threshold) {
  const T xx1 = std::max(b.x1[i], b.x1[j]);
  const T yy1 = std::max(b.y1[i], b.y1[j]);
  const T xx2 = std::min(b.x2[i], b.x2[j]);
  const T yy2 = std::min(b.y2[i], b.y2[j]);
  const T w = std::max(static_cast<T>(0), xx2 - xx1);
  const T h = std::max(static_cast<T>(0), yy2 - yy1);
  const T inter = w * h;
  const T ovr = inter / (b.area[i] + b.area[j] - inter);
  return ovr > threshold;
}

// Box i suppresses boxes j0..n-1.
template <typename T>
void suppress_scalar(const SortedBoxes<T>& b, int64_t i, int64_t j0, int64_t n, double threshold,
                     int32_t* removed) {
  for (int64_t j = j0; j < n; ++j)
    if (!removed[j] && overlaps(b, i, j, threshold)) removed[j] = -1;
}

#if EXAMPLE_X86
// std::max(a, b) = a < b ? b : a = _mm256_max_ps(b, a); std::min(a, b) = b < a ? b : a = _mm256_min_ps(b, a).
EXAMPLE_AVX2 void suppress_avx2(const SortedBoxes<float>& b, int64_t i, int64_t n, double threshold,
                                int32_t* removed) {
  const __m256 ix1 = _mm256_set1_ps(b.x1[i]), iy1 = _mm256_set1_ps(b.y1[i]);
  const __m256 ix2 = _mm256_set1_ps(b.x2[i]), iy2 = _mm256_set1_ps(b.y2[i]);
  const __m256 iarea = _mm256_set1_ps(b.area[i]);
  const __m256 thr = _mm256_set1_ps(float_threshold(threshold));
  const __m256 zero = _mm256_setzero_ps();
  int64_t j = i + 1;
  for (; j + 8 <= n; j += 8) {
    const __m256 xx1 = _mm256_max_ps(_mm256_loadu_ps(&b.x1[j]), ix1);
    const __m256 yy1 = _mm256_max_ps(_mm256_loadu_ps(&b.y1[j]), iy1);
    const __m256 xx2 = _mm256_min_ps(_mm256_loadu_ps(&b.x2[j]), ix2);
    const __m256 yy2 = _mm256_min_ps(_mm256_loadu_ps(&b.y2[j]), iy2);
    const __m256 w = _mm256_max_ps(_mm256_sub_ps(xx2, xx1), zero);
    const __m256 h = _mm256_max_ps(_mm256_sub_ps(yy2, yy1), zero);
    const __m256 inter = _mm256_mul_ps(w, h);
    const __m256 uni = _mm256_sub_ps(_mm256_add_ps(iarea, _mm256_loadu_ps(&b.area[j])), inter);
    const __m256 hit = _mm256_cmp_ps(_mm256_div_ps(inter, uni), thr, _CMP_GT_OQ);
    __m256i* r = reinterpret_cast<__m256i*>(removed + j);
    _mm256_storeu_si256(r, _mm256_or_si256(_mm256_loadu_si256(r), _mm256_castps_si256(hit)));
  }
  suppress_scalar(b, i, j, n, threshold, removed);
}

EXAMPLE_AVX2 void suppress_avx2(const SortedBoxes<double>& b, int64_t i, int64_t n, double threshold,
                                int32_t* removed) {
  const __m256d ix1 = _mm256_set1_pd(b.x1[i]), iy1 = _mm256_set1_pd(b.y1[i]);
  const __m256d ix2 = _mm256_set1_pd(b.x2[i]), iy2 = _mm256_set1_pd(b.y2[i]);
  const __m256d iarea = _mm256_set1_pd(b.area[i]);
  const __m256d thr = _mm256_set1_pd(threshold);
  const __m256d zero = _mm256_setzero_pd();
  int64_t j = i + 1;
  for (; j + 4 <= n; j += 4) {
    const __m256d xx1 = _mm256_max_pd(_mm256_loadu_pd(&b.x1[j]), ix1);
    const __m256d yy1 = _mm256_max_pd(_mm256_loadu_pd(&b.y1[j]), iy1);
    const __m256d xx2 = _mm256_min_pd(_mm256_loadu_pd(&b.x2[j]), ix2);
    const __m256d yy2 = _mm256_min_pd(_mm256_loadu_pd(&b.y2[j]), iy2);
    const __m256d w = _mm256_max_pd(_mm256_sub_pd(xx2, xx1), zero);
    const __m256d h = _mm256_max_pd(_mm256_sub_pd(yy2, yy1), zero);
    const __m256d inter = _mm256_mul_pd(w, h);
    const __m256d uni = _mm256_sub_pd(_mm256_add_pd(iarea, _mm256_loadu_pd(&b.area[j])), inter);
    const __m256d hit = _mm256_cmp_pd(_mm256_div_pd(inter, uni), thr, _CMP_GT_OQ);
    // 4 x 64-bit lanes of all-ones/zeros -> 4 x 32-bit flags
    const __m128i flags = _mm256_castsi256_si128(
        _mm256_permutevar8x32_epi32(_mm256_castpd_si256(hit), _mm256_setr_epi32(0, 2, 4, 6, 0, 0, 0, 0)));
    __m128i* r = reinterpret_cast<__m128i*>(removed + j);
    _mm_storeu_si128(r, _mm_or_si128(_mm_loadu_si128(r), flags));
  }
  suppress_scalar(b, i, j, n, threshold, removed);
}
#endif

template <typename T>
std::vector<int64_t> nms_sorted(const T* dets, const int64_t* order, int64_t n, double threshold) {
  const SortedBoxes<T> b = gather(dets, order, n);
  std::vector<int32_t> removed(n, 0);
  std::vector<int64_t> keep;
  const bool simd = kutil::cpu_has_avx2_fma();
  for (int64_t i = 0; i < n; ++i) {
    if (removed[i]) continue;
    keep.push_back(order[i]);
#if EXAMPLE_X86
    if (simd) {
      suppress_avx2(b, i, n, threshold, removed.data());
      continue;
    }
#endif
    suppress_scalar(b, i, i + 1, n, threshold, removed.data());
  }
  return keep;
}

}  // namespace

torch::stable::Tensor nms_cpu(const torch::stable::Tensor& dets, const torch::stable::Tensor& scores,
                              double iou_threshold) {
  kutil::check_cpu(dets, kOp, "dets");
  kutil::check_cpu(scores, kOp, "scores");
  STD_TORCH_CHECK(dets.dim() == 2 && dets.size(1) == 4, kOp,
                  ": expected 'dets' of shape [N, 4] (x1, y1, x2, y2), got ", dets.dim(), " dims");
  STD_TORCH_CHECK(scores.dim() == 1 && scores.size(0) == dets.size(0), kOp,
                  ": expected 'scores' of shape [N] with N = ", dets.size(0), " boxes");
  kutil::check_float_dtype(dets, kOp, "dets");
  kutil::check_same_dtype(dets, scores, kOp, "dets", "scores");
  const int64_t n = dets.size(0);
  if (n == 0) return torch::stable::new_empty(dets, {0}, kutil::ScalarType::Long);
  STD_TORCH_CHECK(n < (int64_t(1) << 32), kOp, ": at most 2^32 - 1 boxes, got ", n);
  const std::vector<int64_t> order_v = descending_order(scores, n);
  const Tensor d = kutil::contig(dets);
  const int64_t* order = order_v.data();
  const std::vector<int64_t> keep =
      d.scalar_type() == kutil::ScalarType::Float
          ? nms_sorted(static_cast<const float*>(d.const_data_ptr()), order, n, iou_threshold)
          : nms_sorted(static_cast<const double*>(d.const_data_ptr()), order, n, iou_threshold);
  Tensor out = torch::stable::new_empty(dets, {static_cast<int64_t>(keep.size())}, kutil::ScalarType::Long);
  if (!keep.empty()) std::memcpy(out.mutable_data_ptr(), keep.data(), keep.size() * sizeof(int64_t));
  return out;
}

}  // namespace example
