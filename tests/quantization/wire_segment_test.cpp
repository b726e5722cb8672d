// decode_mean, the owner's mean of the reduce_scatter protocol, against the
// formula computed element by element from quant_math.h's scalar dequantize:
// (0 + sum over contributions in order) / world, in float32. The fused
// per-channel loop must give exactly those bits for every bit width and
// channel length, including the lengths that fall back to whole passes.
#include "plugins/quantization/wire_segment.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

namespace q = ddph::quant;
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
      std::vector<const uint8_t*> ins;
      for (const auto& b : e.bytes) ins.push_back(b.data());
      std::vector<q::QParams> params(segment_channels(s) + 1);
      std::vector<uint8_t> codes(s.n + 1);
      CodecScratch scratch{params.data(), codes.data()};
      std::vector<float> got(s.n, std::nanf(""));
      decode_mean(ins.data(), ins.size(), s, c.bits, world, got.data(), scratch);
      for (size_t i = 0; i < s.n; ++i) {
        float sum = 0.0f;
        for (const auto& b : e.bytes) sum += value_at(b, s, c.bits, i);
        const float want = sum / float(world);
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
