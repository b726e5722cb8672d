// Casts between the float buffers a bucket holds (float32, float64) and the
// 16-bit formats the compression hooks send (float16, bfloat16). Round to
// nearest even, NaN stays NaN; vectorized at run time (see isa.h).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "core/base/dtype.h"

namespace ddph {

void cast_f32_to_f16(const float* src, uint16_t* dst, size_t n);
void cast_f16_to_f32(const uint16_t* src, float* dst, size_t n);
void cast_f32_to_bf16(const float* src, uint16_t* dst, size_t n);
void cast_bf16_to_f32(const uint16_t* src, float* dst, size_t n);

// dst = src cast to `to`, for from/to in {F32, F64} x {F16, BF16} either way,
// or from == to (a copy). float64 goes through float32 on the way down, as
// torch's double -> Half conversion does. src and dst must not overlap.
// Throws DDPH_UNSUPPORTED for any other pair.
void cast_into(DType from, const void* src, DType to, void* dst, size_t n);

// Cast down to `low` (F16 or BF16), then divide by w in that precision
// (float(x) / w, rounded once), in one pass: PyTorch's
// `buffer.to(torch.float16).div_(world_size)`. from is F32, F64 or low itself.
void cast_div_into(DType from, const void* src, DType low, uint16_t* dst, size_t n, int64_t w);

}  // namespace ddph
