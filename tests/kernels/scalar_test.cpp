// scalar.h against references that share no code with it: exact arithmetic
// in double, and the CPU's own conversion instructions where it has them.
#include <gtest/gtest.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/kernels/scalar.h"
#include "tests/kernels/corner_cases.h"

namespace {

using namespace ddph::kernels;

// The nearest of two candidates, ties to the one with an even last bit, by
// exact comparison of distances in double (both candidates and x fit in
// double's 53 bits, so the differences are exact).
uint16_t nearest_even(double x, uint16_t lo, double lo_v, uint16_t hi, double hi_v) {
  const double dlo = x - lo_v, dhi = hi_v - x;
  if (dlo < dhi) return lo;
  if (dhi < dlo) return hi;
  return (lo & 1) ? hi : lo;
}

// Round to float16 by search over all positive finite halves.
uint16_t ref_f16(float f) {
  static const std::vector<double> values = [] {
    std::vector<double> v;
    for (int h = 0; h < 0x7C00; ++h) {
      const int e = h >> 10, m = h & 0x3FF;
      v.push_back(e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25));
    }
    v.push_back(65536.0);  // infinity, as if the exponent were unbounded
    return v;
  }();
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double x = std::fabs(double(f));
  auto it = std::lower_bound(values.begin(), values.end(), x);
  if (it == values.end()) return sign | 0x7C00;
  const uint16_t hi = uint16_t(it - values.begin());
  if (*it == x || hi == 0) return sign | hi;
  return sign | nearest_even(x, uint16_t(hi - 1), values[hi - 1], hi, *it);
}

// Round to bfloat16: the two candidates are the truncation and the next one up.
uint16_t ref_bf16(float f) {
  const uint32_t bits = float_bits(f);
  const uint16_t sign = uint16_t((bits >> 16) & 0x8000);
  const double x = std::fabs(double(f));
  const uint16_t lo = uint16_t((bits >> 16) & 0x7FFF);
  const double lo_v = std::fabs(double(bits_float(uint32_t(lo) << 16)));
  if (lo_v == x) return sign | lo;
  const uint16_t hi = uint16_t(lo + 1);
  const double hi_v = hi == 0x7F80 ? std::ldexp(1.0, 128) : double(bits_float(uint32_t(hi) << 16));
  return sign | nearest_even(x, lo, lo_v, hi, hi_v);
}

double ref_f16_value(uint16_t h) {
  const int e = (h >> 10) & 0x1F, m = h & 0x3FF;
  const double mag = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -mag : mag;
}

TEST(ScalarHalf, ToFloatIsExactForEveryPattern) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = f16_bits_to_f32(uint16_t(h));
    const int e = (h >> 10) & 0x1F;
    if (e == 0x1F) {
      EXPECT_EQ(std::isnan(f), (h & 0x3FF) != 0) << h;
      if (std::isnan(f)) {
        EXPECT_EQ(float_bits(f) & 0x400000u, 0x400000u) << "NaN not quiet " << h;
      }
      EXPECT_EQ(std::signbit(f), bool(h & 0x8000)) << h;
      continue;
    }
    EXPECT_EQ(double(f), ref_f16_value(uint16_t(h))) << h;
    EXPECT_EQ(std::signbit(f), bool(h & 0x8000)) << h;
  }
}

TEST(ScalarHalf, FromFloatRoundsToNearestEven) {
  for (float f : ddph_test::float_corner_cases(1 << 20)) {
    const uint16_t got = f32_to_f16_bits(f);
    if (std::isnan(f)) {
      EXPECT_TRUE((got & 0x7C00) == 0x7C00 && (got & 0x200)) << float_bits(f);
      continue;
    }
    ASSERT_EQ(got, ref_f16(f)) << "float bits 0x" << std::hex << float_bits(f);
  }
}

TEST(ScalarHalf, RoundTripOfEveryPattern) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t back = f32_to_f16_bits(f16_bits_to_f32(uint16_t(h)));
    const bool nan = (h & 0x7C00) == 0x7C00 && (h & 0x3FF);
    EXPECT_EQ(back, nan ? uint16_t(h | 0x200) : uint16_t(h)) << h;
  }
}

TEST(ScalarBf16, FromFloatRoundsToNearestEven) {
  for (float f : ddph_test::float_corner_cases(1 << 20)) {
    const uint16_t got = f32_to_bf16_bits(f);
    if (std::isnan(f)) {
      EXPECT_EQ(got, uint16_t((float_bits(f) >> 16) | 0x40)) << float_bits(f);
      continue;
    }
    ASSERT_EQ(got, ref_bf16(f)) << "float bits 0x" << std::hex << float_bits(f);
  }
}

TEST(ScalarBf16, RoundTripOfEveryPattern) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const uint16_t back = f32_to_bf16_bits(bf16_bits_to_f32(uint16_t(b)));
    const bool nan = (b & 0x7F80) == 0x7F80 && (b & 0x7F);
    EXPECT_EQ(back, nan ? uint16_t(b | 0x40) : uint16_t(b)) << b;
  }
}

__attribute__((target("f16c"))) uint16_t hw_f16(float f) {
  return uint16_t(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
__attribute__((target("f16c"))) float hw_f32(uint16_t h) {
  return _cvtsh_ss(h);
}

TEST(ScalarHalf, MatchesF16cInstructions) {
  if (!__builtin_cpu_supports("f16c")) GTEST_SKIP() << "this CPU has no F16C";
  for (uint32_t h = 0; h < 65536; ++h)
    ASSERT_EQ(float_bits(f16_bits_to_f32(uint16_t(h))), float_bits(hw_f32(uint16_t(h)))) << h;
  for (float f : ddph_test::float_corner_cases(1 << 22, 7))
    ASSERT_EQ(f32_to_f16_bits(f), hw_f16(f)) << "float bits 0x" << std::hex << float_bits(f);
}

__attribute__((target("avx512f,avx512vl,avx512bf16"))) uint16_t hw_bf16(float f) {
  const auto b = _mm_cvtness_sbh(f);  // __bfloat16 in GCC 12, __bf16 later
  static_assert(sizeof b == 2, "bf16 is 16 bits");
  uint16_t u;
  std::memcpy(&u, &b, sizeof u);
  return u;
}

TEST(ScalarBf16, MatchesAvx512Bf16InstructionExceptOnDenormals) {
  if (!__builtin_cpu_supports("avx512bf16") || !__builtin_cpu_supports("avx512vl"))
    GTEST_SKIP() << "this CPU has no AVX-512 BF16";
  for (float f : ddph_test::float_corner_cases(1 << 22, 9)) {
    if (std::fpclassify(f) == FP_SUBNORMAL) continue;  // the instruction flushes them to zero
    ASSERT_EQ(f32_to_bf16_bits(f), hw_bf16(f)) << "float bits 0x" << std::hex << float_bits(f);
  }
}

TEST(ScalarOps, MaxMinLetNaNWinAndAreDeterministic) {
  const float nan = bits_float(0x7FC00001u);
  EXPECT_TRUE(std::isnan(OpMax()(nan, 1.0f)));
  EXPECT_TRUE(std::isnan(OpMax()(1.0f, nan)));
  EXPECT_TRUE(std::isnan(OpMin()(nan, 1.0f)));
  EXPECT_EQ(OpMax()(1.0f, 2.0f), 2.0f);
  EXPECT_EQ(OpMin()(1.0f, 2.0f), 1.0f);
  EXPECT_EQ(OpMax()(int32_t(-3), int32_t(5)), 5);
  EXPECT_EQ(wrap_add(int32_t(INT32_MAX), int32_t(1)), INT32_MIN);
  EXPECT_EQ(wrap_add(uint8_t(200), uint8_t(100)), uint8_t(44));
}

TEST(ScalarOps, LowPrecisionAddRoundsOnce) {
  // 1 + 2^-11 is a float16 tie: rounds to even (1.0); 1 + 3*2^-11, also a
  // tie, rounds up to the even 1 + 2^-9.
  const uint16_t one = 0x3C00, tiny = 0x1000, three_tiny = 0x1600;  // 2^-11, 3*2^-11
  EXPECT_EQ(f16_op(OpSum(), one, tiny), one);
  EXPECT_EQ(f16_op(OpSum(), one, three_tiny), 0x3C02);
  EXPECT_EQ(f16_div(0x4200 /* 3 */, 3.0f), one);
}

}  // namespace
