// How a PowerSGD step keeps finite gradients finite (docs/powersgd.md,
// "Huge values"): the element rules, shared by the host ops
// (math_ops_cpu.cpp) and the CUDA kernels (cuda/lowrank_cuda.cu), so both
// memories follow them alike.
//
// Squares overflow float32 from about 1.8e19, and P = M Q, Q = M^T P and
// their sums over ranks from about FLT_MAX / sqrt(n); so a matrix whose
// factors leave the range below is averaged uncompressed for that step
// instead, and the sums that remain elementwise saturate at +-FLT_MAX
// rather than overflow.
#pragma once

#include <float.h>
#include <math.h>

#include "core/kernels/scalar.h"  // DDPH_HD

namespace ddph {
namespace powersgd {

// The largest |P| (the sum over ranks, before orthogonalization) a step
// goes on with: Gram-Schmidt's norms and QR's Householder reflections of
// columns up to 2^100 sqrt(rows) stay far below FLT_MAX. Q's limit is this
// over the rank, so that each element of P Q^T (|P| <= 1) stays below
// 2^100, and M - P Q^T cannot overflow.
constexpr float kFactorLimit = 0x1p100f;

// NaN, +-Inf, or beyond +-limit.
DDPH_HD inline bool unusable_factor(float x, float limit) {
  return !(fabsf(x) <= limit);
}

// A rank's own factor before the sum over ranks: NaN where unusable, so
// that the sum, which every rank sees, is NaN there. (Its magnitude matters,
// not only the sum's: opposite huge factors of two ranks could cancel into
// a usable-looking sum made of rounding errors.)
DDPH_HD inline float poison_unusable(float x, float limit) {
  return unusable_factor(x, limit) ? nanf("") : x;
}

// s, a sum or difference of a and b, except that an overflow of two finite
// operands gives +-FLT_MAX instead of +-Inf. NaN and Inf operands pass
// through.
DDPH_HD inline float saturate_sum(float s, float a, float b) {
  return isinf(s) && isfinite(a) && isfinite(b) ? copysignf(FLT_MAX, s) : s;
}
DDPH_HD inline float saturated_add(float a, float b) {
  return saturate_sum(a + b, a, b);
}
DDPH_HD inline float saturated_subtract(float a, float b) {
  return saturate_sum(a - b, a, b);
}

// x * factor, +-FLT_MAX where a finite x overflows.
DDPH_HD inline float saturated_scale(float x, float factor) {
  const float y = x * factor;
  return isinf(y) && isfinite(x) ? copysignf(FLT_MAX, y) : y;
}

// An element of a matrix's M = data + error that is +-Inf where the data is
// finite: the sum overflowed (a matrix's error holds NaN, never +-Inf,
// after a NaN or Inf: fallback_error), so it counts as +-FLT_MAX.
DDPH_HD inline float overflow_to_max(float m, float data) {
  return isinf(m) && isfinite(data) ? copysignf(FLT_MAX, m) : m;
}

// The error of an element averaged uncompressed: M - mean, saturated; NaN
// where the mean is NaN or Inf (some rank's value was), so that it stays
// non-finite in the error, and +-Inf there never means anything but an
// overflow.
DDPH_HD inline float fallback_error(float m, float mean) {
  return isfinite(mean) ? saturated_subtract(m, mean) : nanf("");
}

}  // namespace powersgd
}  // namespace ddph
