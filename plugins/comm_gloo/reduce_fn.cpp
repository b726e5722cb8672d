// Plain scalar loops, on purpose: they are the placeholder for core/kernels'
// vectorized reductions (see reduce_fn.h).
#include "plugins/comm_gloo/reduce_fn.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/error.h"

namespace ddph {
namespace comm_gloo {
namespace {

float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

uint32_t float_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float half_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return bits_to_float(sign | 0x7f800000u | (man << 13));  // inf / nan
  if (exp == 0) {
    // Zero or subnormal: value = man * 2^-24.
    float v = float(man) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  return bits_to_float(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t float_to_half(float f) {
  uint32_t u = float_to_bits(f);
  uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  uint32_t abs = u & 0x7fffffffu;
  if (abs >= 0x7f800000u) return sign | (abs > 0x7f800000u ? 0x7e00u : 0x7c00u);
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: overflow to inf
  if (abs < 0x38800000u) {
    // Below the smallest normal half: round to a multiple of 2^-24, ties to even.
    float scaled = bits_to_float(abs) * 16777216.0f;
    float r = scaled;
    float fl = float(int32_t(scaled));
    float diff = scaled - fl;
    if (diff > 0.5f || (diff == 0.5f && (int32_t(fl) & 1)))
      r = fl + 1;
    else
      r = fl;
    return sign | uint16_t(r);
  }
  // Normal: drop 13 mantissa bits with round to nearest even.
  uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return sign | uint16_t((rounded - (112u << 23)) >> 13);
}

float bf16_to_float(uint16_t b) {
  return bits_to_float(uint32_t(b) << 16);
}

uint16_t float_to_bf16(float f) {
  uint32_t u = float_to_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);  // quiet nan
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

template <class T, class Op>
void apply(void* out, const void* a, const void* b, size_t n, Op op) {
  T* o = static_cast<T*>(out);
  const T* x = static_cast<const T*>(a);
  const T* y = static_cast<const T*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = op(x[i], y[i]);
}

// 16-bit floats: widen to float, reduce, round back (one rounding per step,
// as a native half adder would do).
template <float (*ToF)(uint16_t), uint16_t (*FromF)(float), class Op>
void apply16(void* out, const void* a, const void* b, size_t n, Op op) {
  uint16_t* o = static_cast<uint16_t*>(out);
  const uint16_t* x = static_cast<const uint16_t*>(a);
  const uint16_t* y = static_cast<const uint16_t*>(b);
  for (size_t i = 0; i < n; ++i) o[i] = FromF(op(ToF(x[i]), ToF(y[i])));
}

struct Add {
  template <class T>
  T operator()(T a, T b) const {
    return T(a + b);
  }
};
struct Max {
  template <class T>
  T operator()(T a, T b) const {
    return std::max(a, b);
  }
};
struct Min {
  template <class T>
  T operator()(T a, T b) const {
    return std::min(a, b);
  }
};

template <class Op>
ReduceFn for_dtype(DType dtype, Op op) {
  switch (dtype) {
    case DType::F32:
      return
          [op](void* o, const void* a, const void* b, size_t n) { apply<float>(o, a, b, n, op); };
    case DType::F64:
      return
          [op](void* o, const void* a, const void* b, size_t n) { apply<double>(o, a, b, n, op); };
    case DType::I32:
      return
          [op](void* o, const void* a, const void* b, size_t n) { apply<int32_t>(o, a, b, n, op); };
    case DType::I64:
      return
          [op](void* o, const void* a, const void* b, size_t n) { apply<int64_t>(o, a, b, n, op); };
    case DType::U8:
      return
          [op](void* o, const void* a, const void* b, size_t n) { apply<uint8_t>(o, a, b, n, op); };
    case DType::F16:
      return [op](void* o, const void* a, const void* b, size_t n) {
        apply16<half_to_float, float_to_half>(o, a, b, n, op);
      };
    case DType::BF16:
      return [op](void* o, const void* a, const void* b, size_t n) {
        apply16<bf16_to_float, float_to_bf16>(o, a, b, n, op);
      };
  }
  DDPH_FAIL(DDPH_INTERNAL, "comm_gloo: no reduction for dtype " << int(dtype));
}

template <class T>
void divide_int(void* data, size_t n, int divisor) {
  T* p = static_cast<T*>(data);
  for (size_t i = 0; i < n; ++i) p[i] = T(p[i] / T(divisor));
}

}  // namespace

ReduceFn reduce_function(DType dtype, ddph_reduce_op_t op) {
  switch (op) {
    case DDPH_SUM:
    case DDPH_AVG:
      return for_dtype(dtype, Add{});
    case DDPH_MAX:
      return for_dtype(dtype, Max{});
    case DDPH_MIN:
      return for_dtype(dtype, Min{});
  }
  DDPH_FAIL(DDPH_INVALID_ARGUMENT, "op " << int(op) << " is not a ddph_reduce_op_t");
}

void divide_by(DType dtype, void* data, size_t n, int divisor) {
  switch (dtype) {
    case DType::F32: {
      float* p = static_cast<float*>(data);
      for (size_t i = 0; i < n; ++i) p[i] /= float(divisor);
      return;
    }
    case DType::F64: {
      double* p = static_cast<double*>(data);
      for (size_t i = 0; i < n; ++i) p[i] /= double(divisor);
      return;
    }
    case DType::F16: {
      uint16_t* p = static_cast<uint16_t*>(data);
      for (size_t i = 0; i < n; ++i) p[i] = float_to_half(half_to_float(p[i]) / float(divisor));
      return;
    }
    case DType::BF16: {
      uint16_t* p = static_cast<uint16_t*>(data);
      for (size_t i = 0; i < n; ++i) p[i] = float_to_bf16(bf16_to_float(p[i]) / float(divisor));
      return;
    }
    case DType::I32:
      return divide_int<int32_t>(data, n, divisor);
    case DType::I64:
      return divide_int<int64_t>(data, n, divisor);
    case DType::U8:
      return divide_int<uint8_t>(data, n, divisor);
  }
}

}  // namespace comm_gloo
}  // namespace ddph
