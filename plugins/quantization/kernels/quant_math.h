// Per-element math of the quantization family: the ONE source of the
// formulas, compiled for the host (the scalar reference and the SIMD tails)
// and by nvcc for the CUDA kernels. The SIMD paths must match it bit for bit.
//
// Every float operation goes through qm_add/qm_sub/qm_mul/qm_div: on the
// device they are the _rn intrinsics, which nvcc never contracts into an FMA
// (nvcc's default --fmad=true would otherwise fuse `acc + s * (q - z)` and
// break bit parity with PyTorch). On the host the build uses
// -ffp-contract=off for the same reason.
#pragma once

#include <float.h>
#include <math.h>
#include <stdint.h>

#include "core/kernels/scalar.h"  // DDPH_HD

namespace ddph {
namespace quant {

struct QParams {
  float scale;
  float zero_point;  // integral-valued, as PyTorch keeps it in a float tensor
};

#ifdef __CUDA_ARCH__
DDPH_HD inline float qm_add(float a, float b) {
  return __fadd_rn(a, b);
}
DDPH_HD inline float qm_sub(float a, float b) {
  return __fsub_rn(a, b);
}
DDPH_HD inline float qm_mul(float a, float b) {
  return __fmul_rn(a, b);
}
DDPH_HD inline float qm_div(float a, float b) {
  return __fdiv_rn(a, b);
}
#else
DDPH_HD inline float qm_add(float a, float b) {
  return a + b;
}
DDPH_HD inline float qm_sub(float a, float b) {
  return a - b;
}
DDPH_HD inline float qm_mul(float a, float b) {
  return a * b;
}
DDPH_HD inline float qm_div(float a, float b) {
  return a / b;
}
#endif

// Round half to even (torch.round), in the default rounding mode.
DDPH_HD inline float qm_rint(float v) {
  return rintf(v);
}

// torch.clamp(y, lo, hi) for non-NaN y.
DDPH_HD inline float qm_clamp(float y, float lo, float hi) {
  return y < lo ? lo : (y > hi ? hi : y);
}

// MinMaxObserver / PerChannelMinMaxObserver._calculate_qparams, quint8
// affine, quant_min 0, quant_max qmax, float32 arithmetic throughout.
DDPH_HD inline QParams qparams_from_minmax(float min_val, float max_val, int qmax) {
  const float min_neg = min_val < 0.0f ? min_val : 0.0f;
  const float max_pos = max_val > 0.0f ? max_val : 0.0f;
  float scale = qm_div(qm_sub(max_pos, min_neg), float(qmax));
  if (scale < FLT_EPSILON) scale = FLT_EPSILON;  // torch.max(scale, eps)
  // 0 - round(min_neg / scale) is never -0: min_neg / scale <= 0.
  const float zp = qm_sub(0.0f, qm_rint(qm_div(min_neg, scale)));
  return QParams{scale, qm_clamp(zp, 0.0f, float(qmax))};
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

// _dequantize_per_tensor_backend: scale * (float(q) - zero_point).
DDPH_HD inline float dequantize(uint8_t q, QParams p) {
  return qm_mul(p.scale, qm_sub(float(q), p.zero_point));
}

// Counter-based RNG. The seed is whitened once with splitmix64 into a 64-bit
// key; each draw is then two rounds of a 32-bit integer hash (Wellons'
// lowbias32), so SIMD lanes and CUDA threads compute it with 32-bit
// multiplies only, no state and no 64-bit vector multiply.
struct RngKey {
  uint32_t k0, k1;
};

DDPH_HD inline RngKey rng_key(uint64_t seed) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
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

}  // namespace quant
}  // namespace ddph
