// decode_mean, the owner's mean of the reduce_scatter protocol, against the
// formula computed element by element from quant_math.h's scalar dequantize:
// (0 + sum over contributions in order) / world, in float32. The fused
// per-channel loop must give exactly those bits for every bit width and
// channel length, including the lengths that fall back to whole passes.
// encode_mean, which also re-quantizes the mean a group of channels at a
// time, must give the bytes of encode_segment (checked against PyTorch in
// kernels_torch_test) applied to that formula's mean.
#include "core/quant/wire_segment.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace q = ddph::quantization;
using namespace ddph::quantization;

namespace {

struct Encoded {
  std::vector<std::vector<uint8_t>> bytes;  // one encoding per contribution
  std::vector<std::vector<float>> expected_values;
};

Encoded encode_contributions(const Segment& s, int bits, size_t count) {
  std::vector<q::QParams> params(segment_channels(s) + 1);
  std::vector<uint8_t> codes(s.n + 1);
  CodecScratch scratch{params.data(), codes.data()};
  Encoded e;
  for (size_t k = 0; k < count; ++k) {
    std::vector<float> x(s.n);
    for (size_t i = 0; i < s.n; ++i)
      x[i] = std::sin(float(i * (k + 3)) * 0.37f) * float(k + 1) + (k == 2 ? -5.0f : 0.0f);
    std::vector<uint8_t> out(encoded_bytes(s, bits));
    EncodeArgs args;
    args.bits = bits;
    EXPECT_TRUE(encode_segment(x.data(), s, args, out.data(), scratch));
    e.bytes.push_back(out);
  }
  return e;
}

// The dequantized value i of one encoding, from the bytes and the scalar
// formula: no vector kernel, no unpack routine of the code under test.
float value_at(const std::vector<uint8_t>& enc, const Segment& s, int bits, size_t i) {
  const size_t ch = s.channel == 0 || s.channel > s.n ? s.n : s.channel;
  q::QParams p;
  std::memcpy(&p, enc.data() + (i / ch) * sizeof p, sizeof p);
  const uint8_t* packed = enc.data() + params_bytes(s);
  const size_t per_byte = size_t(8 / bits);
  const uint8_t code =
      uint8_t((packed[i / per_byte] >> ((i % per_byte) * size_t(bits))) & ((1u << bits) - 1));
  return q::dequantize(code, p);
}

// The mean by the formula above, element by element.
std::vector<float> scalar_mean(const Encoded& e, const Segment& s, int bits, int world) {
  std::vector<float> mean(s.n);
  for (size_t i = 0; i < s.n; ++i) {
    float sum = 0.0f;
    for (const auto& b : e.bytes) sum += value_at(b, s, bits, i);
    mean[i] = sum / float(world);
  }
  return mean;
}

struct Scratch {
  explicit Scratch(const Segment& s) : params(segment_channels(s) + 1), codes(s.n + 1) {}
  std::vector<q::QParams> params;
  std::vector<uint8_t> codes;
  CodecScratch view() { return CodecScratch{params.data(), codes.data()}; }
};

std::vector<const uint8_t*> pointers(const Encoded& e) {
  std::vector<const uint8_t*> ins;
  for (const auto& b : e.bytes) ins.push_back(b.data());
  return ins;
}

}  // namespace

TEST(DecodeMean, MatchesTheScalarFormulaBitForBit) {
  struct Case {
    size_t n, channel;
    int bits;
  };
  const Case cases[] = {
      {5000, 512, 8}, {5000, 512, 4}, {5000, 512, 2}, {4096, 512, 8},  // whole and short channels
      {1000, 7, 8},   {1000, 3, 4},   {1000, 6, 2},   {999, 2, 4},     // 3 and 6: fall back
      {777, 0, 8},    {777, 0, 4},    {10, 1000, 2},  {1, 512, 8},     // per-tensor, tiny
  };
  for (const Case& c : cases) {
    const Segment s{c.n, c.channel};
    for (int world = 1; world <= 4; ++world) {
      const Encoded e = encode_contributions(s, c.bits, size_t(world));
      const std::vector<const uint8_t*> ins = pointers(e);
      Scratch buffers(s);
      CodecScratch scratch = buffers.view();
      std::vector<float> got(s.n, std::nanf(""));
      decode_mean(ins.data(), ins.size(), s, c.bits, world, got.data(), scratch);
      const std::vector<float> mean = scalar_mean(e, s, c.bits, world);
      for (size_t i = 0; i < s.n; ++i) {
        const float want = mean[i];
        uint32_t wb, gb;
        std::memcpy(&wb, &want, 4);
        std::memcpy(&gb, &got[i], 4);
        ASSERT_EQ(gb, wb) << "n " << c.n << " channel " << c.channel << " bits " << c.bits
                          << " world " << world << " element " << i << ": " << got[i] << " vs "
                          << want;
      }
    }
  }
}

TEST(EncodeMean, GivesTheBytesOfEncodingTheFormulasMean) {
  struct Case {
    size_t n, channel;
    int bits;
    bool stochastic, residual;
  };
  const Case cases[] = {
      // Several groups of 8 channels, the last one short; 4 and 2 bits pack
      // each group in place.
      {10000, 512, 8, false, false},
      {10000, 512, 4, false, false},
      {10000, 512, 2, false, false},
      {9001, 1000, 4, false, false},  // 4 channels a group
      {8192, 4096, 8, false, false},  // one channel a group
      // Stochastic rounding: each group's counters continue the segment's.
      {10000, 512, 8, true, false},
      {10000, 6, 4, true, false},
      // The fallbacks: longer channels than a group, codes that do not start
      // on a byte, per-tensor, error feedback.
      {9000, 4097, 8, false, false},
      {1000, 3, 4, false, false},
      {5000, 0, 8, false, false},
      {100, 0, 2, false, false},
      {10000, 512, 4, false, true},
  };
  for (const Case& c : cases) {
    const Segment s{c.n, c.channel};
    for (int world = 1; world <= 4; ++world) {
      const Encoded e = encode_contributions(s, c.bits, size_t(world));
      const std::vector<const uint8_t*> ins = pointers(e);
      const std::vector<float> mean = scalar_mean(e, s, c.bits, world);
      EncodeArgs args;
      args.bits = c.bits;
      args.stochastic = c.stochastic;
      args.seed = 7;
      args.counter_base = 12345;
      std::vector<float> want_residual(s.n, 0.25f), got_residual(s.n, 0.25f);
      Scratch buffers(s);
      CodecScratch scratch = buffers.view();

      std::vector<uint8_t> want(encoded_bytes(s, c.bits), 0xAA);
      if (c.residual) args.residual = want_residual.data();
      ASSERT_TRUE(encode_segment(mean.data(), s, args, want.data(), scratch));

      std::vector<uint8_t> got(want.size(), 0x55);
      std::vector<float> acc(s.n);
      if (c.residual) args.residual = got_residual.data();
      ASSERT_TRUE(
          encode_mean(ins.data(), ins.size(), s, world, args, got.data(), acc.data(), scratch));
      EXPECT_EQ(got, want) << "n " << c.n << " channel " << c.channel << " bits " << c.bits
                           << " stochastic " << c.stochastic << " world " << world;
      EXPECT_EQ(got_residual, want_residual) << "n " << c.n << " world " << world;
    }
  }
}

TEST(EncodeMean, AMeanPastFloatMaxIsSummedInDoubleAndEncoded) {
  // Two finite contributions whose float32 sum overflows: the mean is
  // summed in double, so it is 3e38 (within the two quantizations' steps)
  // and re-quantizes.
  const Segment s{5000, 512};
  std::vector<std::vector<uint8_t>> bytes(2, std::vector<uint8_t>(encoded_bytes(s, 8)));
  Scratch buffers(s);
  CodecScratch scratch = buffers.view();
  std::vector<float> x(s.n, 3.0e38f);
  x[100] = -1.0f;
  for (auto& b : bytes) ASSERT_TRUE(encode_segment(x.data(), s, EncodeArgs{}, b.data(), scratch));
  const std::vector<const uint8_t*> ins{bytes[0].data(), bytes[1].data()};
  std::vector<uint8_t> out(encoded_bytes(s, 8));
  std::vector<float> acc(s.n), mean(s.n);
  ASSERT_TRUE(encode_mean(ins.data(), 2, s, 2, EncodeArgs{}, out.data(), acc.data(), scratch));
  decode_into(out.data(), s, 8, mean.data(), scratch);
  const double step = 3.0e38 / 255;  // of each quantization, the second's included
  for (size_t i = 0; i < s.n; ++i)
    ASSERT_LE(std::fabs(double(mean[i]) - double(x[i])), 2 * step) << i << ": " << mean[i];
}
