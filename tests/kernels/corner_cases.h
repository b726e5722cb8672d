// Inputs that exercise the corners of the 16-bit formats: every 16-bit
// pattern, the exact midpoints between neighbouring 16-bit values (where
// round-to-nearest-even decides), and random floats including specials.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/base/dtype.h"

namespace ddph_test {

std::vector<uint16_t> all_16bit_patterns();
// Floats for the float -> 16-bit casts: specials, NaNs with assorted
// payloads, denormals, float16 and bfloat16 midpoints and their float
// neighbours, and `random_count` random bit patterns and random normals.
std::vector<float> float_corner_cases(size_t random_count, uint32_t seed = 1);
// Random bytes (any bit pattern, NaNs included for float types).
std::vector<uint8_t> random_bytes(size_t n, uint32_t seed);

// Whether the element of dtype t at p is a NaN (false for integer dtypes);
// reads only the element's own bytes.
bool is_nan(ddph::DType t, const uint8_t* p);

}  // namespace ddph_test
