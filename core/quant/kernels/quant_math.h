// Per-element math of the quantization family: the ONE source of the
// formulas, compiled for the host (the scalar reference and the SIMD tails)
// and by nvcc for the CUDA kernels. The SIMD paths must match it bit for bit.
//
// Every float operation goes through qm_add/qm_sub/qm_mul/qm_div (and the
// double ones through qm_dadd...): on the device they are the _rn
// intrinsics, which nvcc never contracts into an FMA (nvcc's default
// --fmad=true would otherwise fuse `acc + s * (q - z)` and break bit parity
// with PyTorch). On the host the build uses -ffp-contract=off for the same
// reason.
//
// Finite input never gives NaN or Inf here (docs/quantization.md, "Huge
// values"): where PyTorch's formulas would overflow, the parameters come
// from qparams_wide, error feedback saturates (ef_value), and a mean whose
// float32 sum could overflow is summed in double (mean_wide).
#pragma once

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "core/kernels/scalar.h"  // DDPH_HD

namespace ddph {
namespace quantization {

struct QParams {
  float scale;
  float zero_point;  // integral-valued, as PyTorch keeps it in a float tensor
};

// name(a, b): the device's _rn intrinsic, or the host's operator.
#ifdef __CUDA_ARCH__
#define DDPH_QM_OP(name, T, op, device_rn) \
  DDPH_HD inline T name(T a, T b) {        \
    return device_rn(a, b);                \
  }
#else
#define DDPH_QM_OP(name, T, op, device_rn) \
  DDPH_HD inline T name(T a, T b) {        \
    return a op b;                         \
  }
#endif
DDPH_QM_OP(qm_add, float, +, __fadd_rn)
DDPH_QM_OP(qm_sub, float, -, __fsub_rn)
DDPH_QM_OP(qm_mul, float, *, __fmul_rn)
DDPH_QM_OP(qm_div, float, /, __fdiv_rn)
DDPH_QM_OP(qm_dadd, double, +, __dadd_rn)
DDPH_QM_OP(qm_dsub, double, -, __dsub_rn)
DDPH_QM_OP(qm_dmul, double, *, __dmul_rn)
DDPH_QM_OP(qm_ddiv, double, /, __ddiv_rn)
#undef DDPH_QM_OP

// Round half to even (torch.round), in the default rounding mode.
DDPH_HD inline float qm_rint(float v) {
  return rintf(v);
}

// torch.clamp(y, lo, hi) for non-NaN y.
DDPH_HD inline float qm_clamp(float y, float lo, float hi) {
  return y < lo ? lo : (y > hi ? hi : y);
}

// _dequantize_per_tensor_backend: scale * (float(q) - zero_point).
DDPH_HD inline float dequantize(uint8_t q, QParams p) {
  return qm_mul(p.scale, qm_sub(float(q), p.zero_point));
}

// PyTorch's zero point: clamp(-round(min_neg / scale), 0, qmax). 0 -
// round(min_neg / scale) is never -0: min_neg / scale <= 0.
DDPH_HD inline float zero_point_for(float min_neg, float scale, int qmax) {
  const float zp = qm_sub(0.0f, qm_rint(qm_div(min_neg, scale)));
  return qm_clamp(zp, 0.0f, float(qmax));
}

// Whether every code 0..qmax dequantizes to a finite value under p: its two
// ends do (dequantize is monotonic in the code).
DDPH_HD inline bool dequantizes_finite(QParams p, int qmax) {
  return isfinite(dequantize(0, p)) && isfinite(dequantize(uint8_t(qmax), p));
}

// The parameters of a channel whose range is too wide for PyTorch's
// formulas: max_pos - min_neg passes FLT_MAX, or a code's dequantized value
// would. The scale is max_pos / qmax - min_neg / qmax (finite: at most
// 2 FLT_MAX / 3), the zero point PyTorch's for that scale; then, if the
// code farthest from the zero point would still dequantize past FLT_MAX
// (the zero point's rounding moves the grid by up to half a step), the
// scale shrinks to just below FLT_MAX / that distance. Values the grid then
// no longer reaches clamp to its end: every code is within one step (scale)
// of the value it stands for, where PyTorch's formulas promise half a step.
DDPH_HD inline QParams qparams_wide(float min_neg, float max_pos, int qmax) {
  const float q = float(qmax);
  float scale = qm_sub(qm_div(max_pos, q), qm_div(min_neg, q));
  const float zp = zero_point_for(min_neg, scale, qmax);
  const float reach = fmaxf(zp, qm_sub(q, zp));  // the largest |code - zero point|
  if (!isfinite(qm_mul(scale, reach))) scale = nextafterf(qm_div(FLT_MAX, reach), 0.0f);
  return QParams{scale, zp};
}

// MinMaxObserver / PerChannelMinMaxObserver._calculate_qparams, quint8
// affine, quant_min 0, quant_max qmax, float32 arithmetic throughout:
// PyTorch's bits wherever they dequantize to finite values, else
// qparams_wide (PyTorch's would give Inf or NaN there).
DDPH_HD inline QParams qparams_from_minmax(float min_val, float max_val, int qmax) {
  const float min_neg = min_val < 0.0f ? min_val : 0.0f;
  const float max_pos = max_val > 0.0f ? max_val : 0.0f;
  float scale = qm_div(qm_sub(max_pos, min_neg), float(qmax));
  if (scale < FLT_EPSILON) scale = FLT_EPSILON;  // torch.max(scale, eps)
  const QParams p{scale, zero_point_for(min_neg, scale, qmax)};
  return dequantizes_finite(p, qmax) ? p : qparams_wide(min_neg, max_pos, qmax);
}

// _quantize_per_tensor_backend: clamp(round(x / scale) + zero_point, 0, qmax),
// true division as torch does (x * (1/scale) differs in the last bit).
DDPH_HD inline uint8_t quantize_nearest(float x, QParams p, int qmax) {
  const float y = qm_add(qm_rint(qm_div(x, p.scale)), p.zero_point);
  return uint8_t(int(qm_clamp(y, 0.0f, float(qmax))));
}

// Stochastic rounding: floor(x / scale + u) rounds up with probability equal
// to the fractional part, so the code is unbiased for u uniform in [0, 1).
DDPH_HD inline uint8_t quantize_stochastic(float x, QParams p, int qmax, float u) {
  const float y = qm_add(floorf(qm_add(qm_div(x, p.scale), u)), p.zero_point);
  return uint8_t(int(qm_clamp(y, 0.0f, float(qmax))));
}

// A double rounded to float, saturated: beyond +-FLT_MAX it is +-FLT_MAX
// rather than +-Inf. NaN stays NaN.
DDPH_HD inline float narrow_saturated(double v) {
  const double top = double(FLT_MAX);
  return float(v > top ? top : (v < -top ? -top : v));
}

// Error feedback quantizes x + r. Where two finite floats sum past FLT_MAX,
// the value is +-FLT_MAX instead of +-Inf (and ef_residual keeps what lies
// beyond). NaN and Inf operands pass through: they make the bucket
// non-finite.
DDPH_HD inline float ef_value(float x, float r) {
  const float v = qm_add(x, r);
  return isinf(v) && isfinite(x) && isfinite(r) ? copysignf(FLT_MAX, v) : v;
}

// The new residual of value v = ef_value(x, r) once it dequantizes to deq:
// v - deq, or where ef_value saturated, x + r - deq in double (then
// narrowed with saturation: it is at most |r| plus one step).
DDPH_HD inline float ef_residual(float x, float r, float v, float deq) {
  if (!isinf(qm_add(x, r))) return qm_sub(v, deq);
  return narrow_saturated(qm_dsub(qm_dadd(double(x), double(r)), double(deq)));
}

// The mean across ranks. Summing dequantized values in float32 (PyTorch's
// order) overflows only where their magnitudes add up to about FLT_MAX;
// such channels are summed in double instead, and the mean is narrowed
// with saturation, so finite codes never average to Inf or NaN.
//
// The largest |dequantize(q, p)| over the codes 0..qmax.
DDPH_HD inline double dequantized_bound(QParams p, int qmax) {
  const double z = double(p.zero_point);
  return qm_dmul(double(p.scale), fmax(z, qm_dsub(double(qmax), z)));
}

// Whether a float32 sum, from zero, of `count` values whose bounds add up
// to bound_sum could overflow: each add rounds by at most 2^-24 of its
// result, so the partial sums stay below bound_sum (1 + count 2^-23).
DDPH_HD inline bool float_sum_may_overflow(double bound_sum, size_t count) {
  return qm_dmul(bound_sum, qm_dadd(1.0, qm_dmul(double(count), 0x1p-23))) > double(FLT_MAX);
}

// Code i of bit-packed codes (the layout of pack() in quant_cpu.h).
DDPH_HD inline uint8_t packed_code(const uint8_t* packed, size_t i, int bits) {
  if (bits == 8) return packed[i];
  const size_t per = size_t(8 / bits);
  return uint8_t((packed[i / per] >> ((i % per) * size_t(bits))) & ((1u << bits) - 1u));
}

// One contribution to a wide mean's sum: exact in double (a 24-bit scale
// times an integer below 512).
DDPH_HD inline double dequantize_wide(uint8_t q, QParams p) {
  return qm_dmul(double(p.scale), qm_dsub(double(q), double(p.zero_point)));
}

DDPH_HD inline float mean_wide(double sum, int world) {
  return narrow_saturated(qm_ddiv(sum, double(world)));
}

// Counter-based RNG. The seed is whitened once with splitmix64 into a 64-bit
// key; each draw is then two rounds of a 32-bit integer hash (Wellons'
// lowbias32), so SIMD lanes and CUDA threads compute it with 32-bit
// multiplies only, no state and no 64-bit vector multiply.
struct RngKey {
  uint32_t k0, k1;
};

// splitmix64's finalizer: a bijection with good avalanche, so nearby
// inputs land on unrelated outputs.
DDPH_HD inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

DDPH_HD inline RngKey rng_key(uint64_t seed) {
  const uint64_t z = mix64(seed + 0x9E3779B97F4A7C15ull);
  return RngKey{uint32_t(z), uint32_t(z >> 32)};
}

DDPH_HD inline uint32_t mix32(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7FEB352Du;
  x ^= x >> 15;
  x *= 0x846CA68Bu;
  x ^= x >> 16;
  return x;
}

DDPH_HD inline uint32_t random_bits(RngKey k, uint64_t counter) {
  const uint32_t h = mix32(uint32_t(counter) ^ k.k0);
  return mix32(h ^ uint32_t(counter >> 32) ^ k.k1);
}

// The top 24 bits as a float in [0, 1): exact, as 24 bits fit the mantissa.
DDPH_HD inline float bits_to_unit(uint32_t bits) {
  return float(bits >> 8) * 0x1p-24f;
}

DDPH_HD inline float uniform01(uint64_t seed, uint64_t counter) {
  return bits_to_unit(random_bits(rng_key(seed), counter));
}

}  // namespace quantization
}  // namespace ddph
