// The per-element formulas of quant_math.h on inputs whose results are exact
// (power-of-two scales), so each expectation is checkable by hand.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <set>

#include "core/quant/kernels/quant_math.h"

namespace {

using ddph::quantization::dequantize;
using ddph::quantization::QParams;
using ddph::quantization::qparams_from_minmax;
using ddph::quantization::quantize_nearest;
using ddph::quantization::quantize_stochastic;
using ddph::quantization::uniform01;

TEST(QuantMath, PowerOfTwoScale) {
  // range 255/16 -> scale 1/16; zero point -round(-8 * 16) = 128.
  const QParams p = qparams_from_minmax(-8.0f, 7.9375f, 255);
  EXPECT_EQ(p.scale, 0.0625f);
  EXPECT_EQ(p.zero_point, 128.0f);
  // 4 bits: range 15/8 -> scale 1/8, zero point 8.
  const QParams p4 = qparams_from_minmax(-1.0f, 0.875f, 15);
  EXPECT_EQ(p4.scale, 0.125f);
  EXPECT_EQ(p4.zero_point, 8.0f);
  // 2 bits: range 3/4 -> scale 1/4, zero point 1.
  const QParams p2 = qparams_from_minmax(-0.25f, 0.5f, 3);
  EXPECT_EQ(p2.scale, 0.25f);
  EXPECT_EQ(p2.zero_point, 1.0f);
}

TEST(QuantMath, ZeroIsAlwaysInTheRange) {
  // All positive: min_neg is 0, so zero point 0.
  QParams p = qparams_from_minmax(1.0f, 255.0f, 255);
  EXPECT_EQ(p.scale, 1.0f);
  EXPECT_EQ(p.zero_point, 0.0f);
  // All negative: max_pos is 0, so zero point qmax.
  p = qparams_from_minmax(-255.0f, -1.0f, 255);
  EXPECT_EQ(p.scale, 1.0f);
  EXPECT_EQ(p.zero_point, 255.0f);
  EXPECT_FALSE(std::signbit(qparams_from_minmax(0.0f, 1.0f, 255).zero_point));
}

TEST(QuantMath, ConstantBufferGetsEpsilon) {
  for (float v : {0.0f, -0.0f, 1e-30f}) {
    const QParams p = qparams_from_minmax(v, v, 255);
    EXPECT_EQ(p.scale, FLT_EPSILON) << v;
    EXPECT_EQ(p.zero_point, 0.0f) << v;
  }
  // A constant 3: the range is [0, 3], not empty.
  EXPECT_EQ(qparams_from_minmax(3.0f, 3.0f, 255).scale, 3.0f / 255.0f);
}

TEST(QuantMath, NearestRoundsHalfToEven) {
  const QParams p{0.0625f, 128.0f};
  EXPECT_EQ(quantize_nearest(0.5f * 0.0625f, p, 255), 128);   // 0.5 -> 0
  EXPECT_EQ(quantize_nearest(1.5f * 0.0625f, p, 255), 130);   // 1.5 -> 2
  EXPECT_EQ(quantize_nearest(2.5f * 0.0625f, p, 255), 130);   // 2.5 -> 2
  EXPECT_EQ(quantize_nearest(-0.5f * 0.0625f, p, 255), 128);  // -0.5 -> -0
  EXPECT_EQ(quantize_nearest(-1.5f * 0.0625f, p, 255), 126);  // -1.5 -> -2
  EXPECT_EQ(quantize_nearest(0.51f * 0.0625f, p, 255), 129);
  // Clamped at both ends.
  EXPECT_EQ(quantize_nearest(100.0f, p, 255), 255);
  EXPECT_EQ(quantize_nearest(-100.0f, p, 255), 0);
  EXPECT_EQ(quantize_nearest(100.0f, QParams{0.125f, 8.0f}, 15), 15);
  EXPECT_EQ(quantize_nearest(100.0f, QParams{0.25f, 1.0f}, 3), 3);
}

TEST(QuantMath, StochasticFloorsAfterAddingU) {
  const QParams p{0.0625f, 128.0f};
  const float x = 1.25f * 0.0625f;
  EXPECT_EQ(quantize_stochastic(x, p, 255, 0.0f), 129);
  EXPECT_EQ(quantize_stochastic(x, p, 255, 0.74f), 129);
  EXPECT_EQ(quantize_stochastic(x, p, 255, 0.75f), 130);
  EXPECT_EQ(quantize_stochastic(-x, p, 255, 0.0f), 126);   // floor(-1.25) = -2
  EXPECT_EQ(quantize_stochastic(-x, p, 255, 0.25f), 127);  // floor(-1.0) = -1
  EXPECT_EQ(quantize_stochastic(100.0f, p, 255, 0.5f), 255);
}

TEST(QuantMath, DequantizeIsScaleTimesOffset) {
  const QParams p{0.0625f, 128.0f};
  EXPECT_EQ(dequantize(130, p), 0.125f);
  EXPECT_EQ(dequantize(128, p), 0.0f);
  EXPECT_EQ(dequantize(0, p), -8.0f);
  EXPECT_EQ(dequantize(255, p), 7.9375f);
  for (int q = 0; q < 256; ++q) EXPECT_EQ(quantize_nearest(dequantize(uint8_t(q), p), p, 255), q);
}

TEST(QuantMath, UniformHas24BitsInUnitInterval) {
  std::set<float> seen;
  for (uint64_t c = 0; c < 4096; ++c) {
    const float u = uniform01(42, c);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    EXPECT_EQ(u * 16777216.0f, std::floor(u * 16777216.0f));  // a multiple of 2^-24
    seen.insert(u);
  }
  EXPECT_GT(seen.size(), 4000u);  // distinct counters give distinct draws
}

TEST(QuantMath, UniformIsAPureFunction) {
  for (uint64_t c : {0ull, 1ull, 0xFFFFFFFFull, 0x100000000ull, ~0ull}) {
    EXPECT_EQ(uniform01(7, c), uniform01(7, c));
    EXPECT_NE(uniform01(7, c), uniform01(8, c));
  }
  // The counter's high word matters too.
  EXPECT_NE(uniform01(7, 5), uniform01(7, 5 + (1ull << 32)));
}

}  // namespace
