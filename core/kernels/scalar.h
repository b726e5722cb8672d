// Per-element math shared by every kernel: the CPU reference loops, the SIMD
// paths (which must agree with these bit for bit) and, later, CUDA kernels.
// Only plain integer and float operations, so nvcc can compile it as is.
#pragma once

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define DDPH_HD __host__ __device__
#else
#define DDPH_HD
#endif

namespace ddph {
namespace kernels {

DDPH_HD inline uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

DDPH_HD inline float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

// IEEE binary16, round to nearest even. A NaN keeps its sign and the top
// payload bits and becomes quiet: what F16C's vcvtps2ph does, so the SIMD
// path needs no fix-up. (PyTorch's scalar path returns a canonical 0x7E00;
// the two agree on every non-NaN input.)
DDPH_HD inline uint16_t f32_to_f16_bits(float f) {
  const uint32_t x = float_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7FFFFFFFu;
  if (ax >= 0x7F800000u) {
    if (ax == 0x7F800000u) return uint16_t(sign | 0x7C00u);
    return uint16_t(sign | 0x7E00u | ((ax >> 13) & 0x3FFu));
  }
  // 65520 is the midpoint between 65504 (max half) and 65536: ties go to
  // the even neighbour, which is infinity.
  if (ax >= 0x477FF000u) return uint16_t(sign | 0x7C00u);
  if (ax >= 0x38800000u) {          // a normal half (exponent >= -14)
    uint32_t r = ax - 0x38000000u;  // rebias the exponent from 127 to 15
    r += 0x0FFFu + ((r >> 13) & 1u);
    return uint16_t(sign | (r >> 13));
  }
  if (ax < 0x33000000u) return uint16_t(sign);  // below 2^-25: rounds to zero
  // Subnormal half: count in units of 2^-24, rounding the shifted-out bits.
  const uint32_t e = ax >> 23;
  const uint32_t m = (ax & 0x7FFFFFu) | 0x800000u;
  const uint32_t shift = 126u - e;  // 14..24
  uint32_t r = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (r & 1u))) ++r;  // may carry into the smallest normal
  return uint16_t(sign | r);
}

// Exact; a NaN becomes quiet (as vcvtph2ps and PyTorch both do).
DDPH_HD inline float f16_bits_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1Fu;
  uint32_t m = h & 0x3FFu;
  if (e == 0x1Fu) return bits_float(sign | 0x7F800000u | (m << 13) | (m ? 0x400000u : 0u));
  if (e == 0) {
    if (m == 0) return bits_float(sign);
    uint32_t fe = 113;  // the float exponent field of 2^-14
    while (!(m & 0x400u)) {
      m <<= 1;
      --fe;
    }
    return bits_float(sign | (fe << 23) | ((m & 0x3FFu) << 13));
  }
  return bits_float(sign | ((e + 112u) << 23) | (m << 13));
}

// bfloat16, round to nearest even. A NaN keeps its sign and top payload bits
// and is made quiet, so a payload that lives only in the dropped low bits
// cannot turn into infinity. Denormals round like any other value.
DDPH_HD inline uint16_t f32_to_bf16_bits(float f) {
  const uint32_t x = float_bits(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return uint16_t((x >> 16) | 0x40u);
  return uint16_t((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

DDPH_HD inline float bf16_bits_to_f32(uint16_t b) {
  return bits_float(uint32_t(b) << 16);
}

// Reduce ops. NaN wins in max/min (like torch.maximum); otherwise ties keep
// b, so a fixed rank order gives the same bits on every rank.
struct OpSum {
  template <class T>
  DDPH_HD T operator()(T a, T b) const {
    return a + b;
  }
};
struct OpMax {
  template <class T>
  DDPH_HD T operator()(T a, T b) const {
    return a != a ? a : (b != b ? b : (a > b ? a : b));
  }
};
struct OpMin {
  template <class T>
  DDPH_HD T operator()(T a, T b) const {
    return a != a ? a : (b != b ? b : (a < b ? a : b));
  }
};

// Integer sums wrap (two's complement) instead of overflowing into UB, as
// torch's integer adds do.
DDPH_HD inline int32_t wrap_add(int32_t a, int32_t b) {
  return int32_t(uint32_t(a) + uint32_t(b));
}
DDPH_HD inline int64_t wrap_add(int64_t a, int64_t b) {
  return int64_t(uint64_t(a) + uint64_t(b));
}
DDPH_HD inline uint8_t wrap_add(uint8_t a, uint8_t b) {
  return uint8_t(a + b);
}

// Low-precision arithmetic: compute in float, round once, like c10::Half,
// c10::BFloat16 and gloo::float16.
template <class Op>
DDPH_HD inline uint16_t f16_op(Op op, uint16_t a, uint16_t b) {
  return f32_to_f16_bits(op(f16_bits_to_f32(a), f16_bits_to_f32(b)));
}
DDPH_HD inline uint16_t f16_div(uint16_t a, float w) {
  return f32_to_f16_bits(f16_bits_to_f32(a) / w);
}
DDPH_HD inline uint16_t bf16_div(uint16_t a, float w) {
  return f32_to_bf16_bits(bf16_bits_to_f32(a) / w);
}

}  // namespace kernels
}  // namespace ddph
