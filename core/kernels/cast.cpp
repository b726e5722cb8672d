#include "core/kernels/cast.h"

#include <cstring>

#include "core/base/error.h"
#include "core/kernels/cpu_table.h"
#include "core/kernels/divide.h"

namespace ddph {
namespace {

using kernels::cpu_table;

bool is_low(DType t) {
  return t == DType::F16 || t == DType::BF16;
}

// float64 travels through a small float32 buffer: cheap next to the memory
// traffic, and it keeps one set of 16-bit kernels.
constexpr size_t kChunk = 4096;

template <class Body>
void in_f32_chunks(size_t n, Body body) {
  float tmp[kChunk];
  for (size_t i = 0; i < n; i += kChunk) body(tmp, i, n - i < kChunk ? n - i : kChunk);
}

void down(DType low, const float* src, uint16_t* dst, size_t n) {
  (low == DType::F16 ? cpu_table().f32_to_f16 : cpu_table().f32_to_bf16)(src, dst, n);
}

void up(DType low, const uint16_t* src, float* dst, size_t n) {
  (low == DType::F16 ? cpu_table().f16_to_f32 : cpu_table().bf16_to_f32)(src, dst, n);
}

[[noreturn]] void unsupported(const char* what, DType from, DType to) {
  DDPH_FAIL(DDPH_UNSUPPORTED,
            what << ": no cast from " << dtype_name(from) << " to " << dtype_name(to));
}

}  // namespace

void cast_f32_to_f16(const float* src, uint16_t* dst, size_t n) {
  cpu_table().f32_to_f16(src, dst, n);
}
void cast_f16_to_f32(const uint16_t* src, float* dst, size_t n) {
  cpu_table().f16_to_f32(src, dst, n);
}
void cast_f32_to_bf16(const float* src, uint16_t* dst, size_t n) {
  cpu_table().f32_to_bf16(src, dst, n);
}
void cast_bf16_to_f32(const uint16_t* src, float* dst, size_t n) {
  cpu_table().bf16_to_f32(src, dst, n);
}

void cast_into(DType from, const void* src, DType to, void* dst, size_t n) {
  if (from == to) {
    if (n != 0) std::memmove(dst, src, n * dtype_size(from));
    return;
  }
  if (from == DType::F32 && is_low(to)) {
    down(to, static_cast<const float*>(src), static_cast<uint16_t*>(dst), n);
  } else if (is_low(from) && to == DType::F32) {
    up(from, static_cast<const uint16_t*>(src), static_cast<float*>(dst), n);
  } else if (from == DType::F64 && is_low(to)) {
    const double* s = static_cast<const double*>(src);
    uint16_t* d = static_cast<uint16_t*>(dst);
    in_f32_chunks(n, [&](float* tmp, size_t at, size_t len) {
      for (size_t i = 0; i < len; ++i) tmp[i] = float(s[at + i]);
      down(to, tmp, d + at, len);
    });
  } else if (is_low(from) && to == DType::F64) {
    const uint16_t* s = static_cast<const uint16_t*>(src);
    double* d = static_cast<double*>(dst);
    in_f32_chunks(n, [&](float* tmp, size_t at, size_t len) {
      up(from, s + at, tmp, len);
      for (size_t i = 0; i < len; ++i) d[at + i] = tmp[i];
    });
  } else {
    unsupported("cast_into", from, to);
  }
}

void cast_div_into(DType from, const void* src, DType low, uint16_t* dst, size_t n, int64_t w) {
  DDPH_CHECK(is_low(low), DDPH_UNSUPPORTED,
             "cast_div_into: target " << dtype_name(low) << " is not float16 or bfloat16");
  DDPH_CHECK(w >= 1, DDPH_INVALID_ARGUMENT, "cast_div_into: divisor " << w << " is below 1");
  const float fw = float(w);
  auto down_div = low == DType::F16 ? cpu_table().f32_to_f16_div : cpu_table().f32_to_bf16_div;
  if (from == DType::F32) {
    down_div(static_cast<const float*>(src), dst, n, fw);
  } else if (from == DType::F64) {
    const double* s = static_cast<const double*>(src);
    in_f32_chunks(n, [&](float* tmp, size_t at, size_t len) {
      for (size_t i = 0; i < len; ++i) tmp[i] = float(s[at + i]);
      down_div(tmp, dst + at, len, fw);
    });
  } else if (from == low) {
    cast_into(from, src, low, dst, n);
    divide_inplace(low, dst, n, w);
  } else {
    unsupported("cast_div_into", from, low);
  }
}

}  // namespace ddph
