#include "tests/kernels/corner_cases.h"

#include <cmath>
#include <cstring>
#include <random>

#include "core/kernels/scalar.h"

namespace ddph_test {

using ddph::kernels::bits_float;
using ddph::kernels::float_bits;

std::vector<uint16_t> all_16bit_patterns() {
  std::vector<uint16_t> v(65536);
  for (uint32_t i = 0; i < 65536; ++i) v[i] = uint16_t(i);
  return v;
}

std::vector<float> float_corner_cases(size_t random_count, uint32_t seed) {
  std::vector<float> v;
  for (uint32_t sign : {0u, 0x80000000u}) {
    for (uint32_t b :
         {0x0u,        0x1u,        0x7FFFFFu,   0x800000u,   0x7F7FFFFFu, 0x7F800000u, 0x7F800001u,
          0x7FC00000u, 0x7FFFFFFFu, 0x7F801234u, 0x7FA00000u, 0x7F80FFFFu, 0x7F810000u, 0x477FEFFFu,
          0x477FF000u, 0x477FF001u, 0x477FE000u, 0x33000000u, 0x33000001u, 0x32FFFFFFu, 0x33800000u,
          0x387FC000u, 0x387FE000u, 0x387FFFFFu, 0x38800000u, 0x7F7F8000u, 0x7F7F7FFFu})
      v.push_back(bits_float(sign | b));
  }
  // Midpoints between neighbouring halves and bfloat16s, and one ulp either side.
  for (uint32_t h = 0; h < 0x7C00u; ++h) {
    const double lo = ddph::kernels::f16_bits_to_f32(uint16_t(h));
    const double hi = ddph::kernels::f16_bits_to_f32(uint16_t(h + 1));
    const float mid = float((lo + hi) / 2);  // exact: halves have 11 significant bits
    for (float f : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)}) {
      v.push_back(f);
      v.push_back(-f);
    }
  }
  for (uint32_t b = 0; b < 0x7F80u; ++b) {
    const uint32_t mid = (b << 16) | 0x8000u;
    for (uint32_t x : {mid, mid - 1, mid + 1}) {
      v.push_back(bits_float(x));
      v.push_back(bits_float(x | 0x80000000u));
    }
  }
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> scale(-40, 20);
  for (size_t i = 0; i < random_count; ++i) {
    v.push_back(bits_float(uint32_t(rng())));
    v.push_back(std::ldexp(normal(rng), scale(rng)));
  }
  return v;
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = uint8_t(rng());
  return v;
}

bool is_nan(ddph::DType t, const uint8_t* p) {
  uint16_t h = 0;
  if (ddph::dtype_size(t) == 2) std::memcpy(&h, p, 2);  // a 1-byte last element has no second byte
  switch (t) {
    case ddph::DType::F32: {
      float f;
      std::memcpy(&f, p, 4);
      return std::isnan(f);
    }
    case ddph::DType::F64: {
      double d;
      std::memcpy(&d, p, 8);
      return std::isnan(d);
    }
    case ddph::DType::F16:
      return (h & 0x7C00) == 0x7C00 && (h & 0x3FF);
    case ddph::DType::BF16:
      return (h & 0x7F80) == 0x7F80 && (h & 0x7F);
    default:
      return false;
  }
}

}  // namespace ddph_test
