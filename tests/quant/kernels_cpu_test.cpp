// Properties of the CPU array kernels at the active level: packing round
// trips, stochastic rounding statistics and determinism, non-finite
// detection, and the error-feedback identity.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/quant/kernels/quant_cpu.h"
#include "tests/quant/kernels_test_data.h"

namespace {

namespace q = ddph::quantization;

struct Quantized {
  bool ok;
  std::vector<q::QParams> params;
  std::vector<uint8_t> codes;
};

Quantized run(const std::vector<float>& x, size_t channel, int qmax, float* residual = nullptr,
              bool stochastic = false, uint64_t seed = 0, uint64_t counter = 0) {
  Quantized r{false, std::vector<q::QParams>(q::num_channels(x.size(), channel)),
              std::vector<uint8_t>(x.size())};
  q::QuantizeArgs a;
  a.x = x.data();
  a.n = x.size();
  a.channel = channel;
  a.qmax = qmax;
  a.residual = residual;
  a.stochastic = stochastic;
  a.seed = seed;
  a.counter_base = counter;
  a.params = r.params.data();
  a.q = r.codes.data();
  r.ok = q::quantize_channels(a);
  return r;
}

TEST(QuantCpu, Sizes) {
  EXPECT_EQ(q::num_channels(0, 512), 1u);
  EXPECT_EQ(q::num_channels(1, 512), 1u);
  EXPECT_EQ(q::num_channels(512, 512), 1u);
  EXPECT_EQ(q::num_channels(513, 512), 2u);
  EXPECT_EQ(q::num_channels(1000, 1000), 1u);
  EXPECT_EQ(q::num_channels(1000, 0), 1u);
  EXPECT_EQ(q::packed_bytes(7, 8), 7u);
  EXPECT_EQ(q::packed_bytes(7, 4), 4u);
  EXPECT_EQ(q::packed_bytes(7, 2), 2u);
  EXPECT_EQ(q::packed_bytes(8, 2), 2u);
  EXPECT_EQ(q::packed_bytes(0, 4), 0u);
}

TEST(QuantCpu, EmptyBucketGetsDefaultParams) {
  const Quantized r = run({}, 512, 255);
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.params[0].scale, FLT_EPSILON);
  EXPECT_EQ(r.params[0].zero_point, 0.0f);
}

TEST(QuantCpu, ShortLastChannelIsZeroPadded) {
  // The last channel holds only positives: zero padding keeps min_neg at 0.
  std::vector<float> x(600, -1.0f);
  for (size_t i = 512; i < 600; ++i) x[i] = 2.0f + float(i - 512);
  const Quantized r = run(x, 512, 255);
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.params[1].zero_point, 0.0f);
  EXPECT_EQ(r.params[1].scale, q::qparams_from_minmax(0.0f, 89.0f, 255).scale);
  EXPECT_EQ(r.params[0].zero_point, 255.0f);
}

TEST(QuantCpu, PackRoundTripsEveryCode) {
  for (int bits : {8, 4, 2}) {
    const int codes = 1 << bits;
    for (size_t n : {0, 1, 2, 3, 5, 31, 33, 63, 65, 255, 256, 257, 1001}) {
      std::vector<uint8_t> in(n);
      for (size_t i = 0; i < n; ++i) in[i] = uint8_t((i * 7 + i / codes) % codes);
      std::vector<uint8_t> packed(q::packed_bytes(n, bits) + 1, 0x5A), out(n + 1, 0x5A);
      q::pack(in.data(), n, bits, packed.data());
      EXPECT_EQ(packed.back(), 0x5A) << "pack wrote past packed_bytes";
      q::unpack(packed.data(), n, bits, out.data());
      EXPECT_EQ(out.back(), 0x5A) << "unpack wrote past n";
      out.pop_back();
      EXPECT_EQ(out, in) << "bits " << bits << " n " << n;
    }
  }
  // The documented layout: element 2k in the low nibble, element 4k in the low bits.
  const uint8_t c4[3] = {0x3, 0xC, 0x7}, c2[5] = {1, 2, 3, 0, 3};
  uint8_t p4[2], p2[2];
  q::pack(c4, 3, 4, p4);
  q::pack(c2, 5, 2, p2);
  EXPECT_EQ(p4[0], 0xC3);
  EXPECT_EQ(p4[1], 0x07);  // padding bits are zero
  EXPECT_EQ(p2[0], 0x39);  // 0b00'11'10'01
  EXPECT_EQ(p2[1], 0x03);
}

TEST(QuantCpu, StochasticRoundingIsUnbiased) {
  // One channel with scale 1/16 (from -8 and 7.9375); every other value sits
  // at k + f for several fractions f. The mean code over many draws must
  // approach zero_point + x / scale.
  const size_t n = 1 << 16;
  std::vector<float> x(n);
  const float fracs[4] = {0.1f, 0.25f, 0.5f, 0.9f};
  for (size_t i = 0; i < n; ++i) x[i] = (3.0f + fracs[i % 4]) / 16.0f;
  x[0] = -8.0f;
  x[1] = 7.9375f;
  const Quantized r = run(x, n, 255, nullptr, true, 99, 0);
  ASSERT_TRUE(r.ok);
  ASSERT_EQ(r.params[0].scale, 0.0625f);
  for (int f = 0; f < 4; ++f) {
    double sum = 0;
    size_t count = 0;
    for (size_t i = 4 + size_t(f); i < n; i += 4) {
      EXPECT_TRUE(r.codes[i] == 131 || r.codes[i] == 132) << i;
      sum += r.codes[i];
      ++count;
    }
    const double want = 128.0 + 3.0 + fracs[f];
    // Bernoulli(p) over ~16k draws: standard error <= 0.004; allow 5 sigma.
    EXPECT_NEAR(sum / double(count), want, 0.02) << "fraction " << fracs[f];
  }
  // Values on the grid never move.
  std::vector<float> grid(1000);
  for (size_t i = 0; i < grid.size(); ++i) grid[i] = float(int(i % 200) - 100) / 16.0f;
  grid[0] = -8.0f;
  grid[1] = 7.9375f;
  const Quantized g = run(grid, grid.size(), 255, nullptr, true, 5, 0);
  const Quantized gn = run(grid, grid.size(), 255);
  EXPECT_EQ(g.codes, gn.codes);
}

TEST(QuantCpu, StochasticIsDeterministicPerSeedAndCounter) {
  const std::vector<float> x = ddph_test::normal_floats(5000, 1, 1.0f);
  const Quantized a = run(x, 512, 15, nullptr, true, 7, 1000);
  const Quantized b = run(x, 512, 15, nullptr, true, 7, 1000);
  EXPECT_EQ(a.codes, b.codes);
  const Quantized other_seed = run(x, 512, 15, nullptr, true, 8, 1000);
  const Quantized other_counter = run(x, 512, 15, nullptr, true, 7, 1000 + x.size());
  EXPECT_NE(a.codes, other_seed.codes);
  EXPECT_NE(a.codes, other_counter.codes);
  // Element i draws uniform01(seed, counter_base + i): a suffix quantized on
  // its own, with the same parameters, gets the same codes.
  for (size_t i = 0; i < x.size(); ++i) {
    const q::QParams p = a.params[i / 512];
    ASSERT_EQ(a.codes[i], q::quantize_stochastic(x[i], p, 15, q::uniform01(7, 1000 + i))) << i;
  }
}

TEST(QuantCpu, NonFiniteIsRejected) {
  for (float bad : {NAN, INFINITY, -INFINITY}) {
    for (size_t where : {size_t(0), size_t(511), size_t(512), size_t(1999)}) {
      std::vector<float> x = ddph_test::normal_floats(2000, 2, 1.0f);
      x[where] = bad;
      EXPECT_FALSE(q::all_finite(x.data(), x.size()));
      EXPECT_FALSE(run(x, 512, 255).ok) << bad << " at " << where;
      EXPECT_FALSE(run(x, x.size(), 255).ok);
      EXPECT_FALSE(run(x, 512, 255, nullptr, true).ok);
      // With error feedback the residual is left as it was.
      std::vector<float> res = ddph_test::normal_floats(2000, 3, 0.01f);
      const std::vector<float> before = res;
      EXPECT_FALSE(run(x, 512, 255, res.data()).ok);
      EXPECT_EQ(std::memcmp(res.data(), before.data(), res.size() * 4), 0);
    }
  }
  // A finite x + residual past FLT_MAX is not: it saturates
  // (kernels_huge_test.cpp checks how).
  std::vector<float> x(100, 1.0f), res(100, 0.0f);
  x[50] = 3e38f;
  res[50] = 3e38f;
  EXPECT_TRUE(run(x, 512, 255).ok);
  EXPECT_TRUE(run(x, 512, 255, res.data()).ok);
  EXPECT_TRUE(q::all_finite(x.data(), x.size()));
}

TEST(QuantCpu, ErrorFeedbackConservesTheValue) {
  // x + r_in == dequantize(q) + r_out, up to the rounding of the sums.
  for (int qmax : {255, 15, 3})
    for (bool stochastic : {false, true}) {
      const std::vector<float> x = ddph_test::normal_floats(4099, 4, 1.0f);
      std::vector<float> res = ddph_test::normal_floats(4099, 5, 0.05f);
      const std::vector<float> r_in = res;
      const Quantized r = run(x, 512, qmax, res.data(), stochastic, 11, 0);
      ASSERT_TRUE(r.ok);
      std::vector<float> deq(x.size());
      q::dequantize_into(r.codes.data(), x.size(), 512, r.params.data(), deq.data());
      for (size_t i = 0; i < x.size(); ++i) {
        const float v = x[i] + r_in[i];
        // r_out is v - deq computed in float: exact when the two are within
        // a factor of 2 (Sterbenz), else one rounding of the difference.
        EXPECT_NEAR(double(deq[i]) + double(res[i]), double(v), 1e-6 * (std::fabs(v) + 1.0)) << i;
        EXPECT_EQ(res[i], v - deq[i]);
        // The residual is at most one quantization step (half of one when nearest).
        EXPECT_LE(std::fabs(res[i]), r.params[i / 512].scale * (stochastic ? 1.0f : 0.5f) * 1.0001f)
            << i;
      }
    }
}

TEST(QuantCpu, DequantizeAddAccumulates) {
  const std::vector<float> x = ddph_test::normal_floats(1500, 6, 1.0f);
  const Quantized r = run(x, 512, 255);
  std::vector<float> acc(x.size(), 1.0f), deq(x.size());
  q::dequantize_into(r.codes.data(), x.size(), 512, r.params.data(), deq.data());
  q::dequantize_add(r.codes.data(), x.size(), 512, r.params.data(), acc.data());
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(acc[i], 1.0f + deq[i]);
    // Nearest rounding: within half a step of the input.
    EXPECT_LE(std::fabs(deq[i] - x[i]), r.params[i / 512].scale * 0.5001f);
  }
}

}  // namespace
