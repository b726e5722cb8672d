// Finite values past what PyTorch's quantization formulas hold
// (docs/quantization.md, "Huge values"), at every instruction-set level the
// CPU has: the parameters dequantize every code to a finite value, each code
// is within one step of its value, PyTorch's bits are kept wherever PyTorch's
// formulas give finite values, error feedback saturates x + r and keeps the
// rest in the residual, and a mean whose float32 sum would overflow is
// summed in double. References are computed here, in double or long double.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/kernels/isa.h"
#include "core/quant/kernels/quant_cpu.h"
#include "core/quant/wire_segment.h"
#include "tests/quant/kernels_test_data.h"
#include "tests/support/isa_levels.h"

namespace {

using ddph::Isa;
namespace q = ddph::quantization;
namespace qz = ddph::quantization;
using ddph_test::IsaCap;

// The scalar level first, then every SIMD level this CPU has.
std::vector<Isa> every_level() {
  std::vector<Isa> levels{Isa::kScalar};
  for (Isa isa : ddph_test::simd_levels()) levels.push_back(isa);
  return levels;
}

struct Quantized {
  bool ok = false;
  std::vector<q::QParams> params;
  std::vector<uint8_t> codes;
  std::vector<float> residual;  // the new residual, with error feedback
};

Quantized quantize(const std::vector<float>& x, size_t channel, int qmax, bool stochastic,
                   const std::vector<float>* residual = nullptr, bool in_place = false) {
  Quantized r;
  r.params.resize(q::num_channels(x.size(), channel));
  r.codes.resize(x.size());
  std::vector<float> res_in;
  q::QuantizeArgs a;
  a.x = x.data();
  a.n = x.size();
  a.channel = channel;
  a.qmax = qmax;
  if (residual != nullptr && in_place) {
    r.residual = *residual;
    a.residual = r.residual.data();
  } else if (residual != nullptr) {
    res_in = *residual;
    r.residual.assign(x.size(), -1.0f);
    a.residual = res_in.data();
    a.residual_out = r.residual.data();
  }
  a.stochastic = stochastic;
  a.seed = 99;
  a.counter_base = 12345;
  a.params = r.params.data();
  a.q = r.codes.data();
  r.ok = q::quantize_channels(a);
  return r;
}

// PyTorch's MinMaxObserver formulas in float, written out here, and whether
// every code dequantizes to a finite value under them.
struct TorchParams {
  float scale, zero_point;
  bool finite;
};
TorchParams torch_params(float mn, float mx, int qmax) {
  const float min_neg = std::min(mn, 0.0f), max_pos = std::max(mx, 0.0f);
  volatile float range = max_pos - min_neg;  // volatile: one rounding per operation
  float scale = range / float(qmax);
  scale = std::max(scale, FLT_EPSILON);
  const float zp = std::min(std::max(-std::nearbyint(min_neg / scale), 0.0f), float(qmax));
  volatile float lo = 0.0f - zp, hi = float(qmax) - zp;
  const float d0 = scale * lo, dq = scale * hi;
  return {scale, zp, std::isfinite(d0) && std::isfinite(dq)};
}

// The channel's min(min, 0) and max(max, 0).
void channel_range(const std::vector<float>& v, size_t b, size_t e, float& mn, float& mx) {
  mn = 0.0f, mx = 0.0f;
  for (size_t i = b; i < e; ++i) mn = std::min(mn, v[i]), mx = std::max(mx, v[i]);
}

std::string level_name(Isa isa) {
  return ddph::isa_name(isa);
}

TEST(QuantHuge, EveryCodeIsFiniteAndWithinOneStepAtEveryLevel) {
  for (const auto& c : ddph_test::huge_quant_cases())
    for (int qmax : {255, 15, 3})
      for (bool stochastic : {false, true}) {
        const std::string what =
            c.name + " qmax " + std::to_string(qmax) + (stochastic ? " stochastic" : " nearest");
        Quantized scalar;
        for (Isa isa : every_level()) {
          IsaCap cap(isa);
          const Quantized r = quantize(c.x, c.channel, qmax, stochastic);
          ASSERT_TRUE(r.ok) << what << " at " << level_name(isa);
          if (isa == Isa::kScalar) {
            scalar = r;
          } else {
            EXPECT_EQ(r.codes, scalar.codes) << what << " at " << level_name(isa);
            EXPECT_EQ(std::memcmp(r.params.data(), scalar.params.data(),
                                  r.params.size() * sizeof(q::QParams)),
                      0)
                << what << " at " << level_name(isa);
          }
        }
        std::vector<float> deq(c.x.size());
        q::dequantize_into(scalar.codes.data(), c.x.size(), c.channel, scalar.params.data(),
                           deq.data());
        for (size_t ch = 0; ch < scalar.params.size(); ++ch) {
          const q::QParams p = scalar.params[ch];
          const size_t b = ch * c.channel, e = std::min(c.x.size(), b + c.channel);
          ASSERT_TRUE(std::isfinite(p.scale) && p.scale > 0) << what << " channel " << ch;
          ASSERT_TRUE(p.zero_point >= 0 && p.zero_point <= qmax &&
                      p.zero_point == std::nearbyint(p.zero_point))
              << what << " channel " << ch;
          float mn, mx;
          channel_range(c.x, b, e, mn, mx);
          const TorchParams t = torch_params(mn, mx, qmax);
          if (t.finite) {
            // Where PyTorch's formulas hold, they are what is used.
            EXPECT_EQ(p.scale, t.scale) << what << " channel " << ch;
            EXPECT_EQ(p.zero_point, t.zero_point) << what << " channel " << ch;
          } else {
            // Else the documented scale: max/qmax - min/qmax, or, where the
            // code farthest from the zero point would dequantize past
            // FLT_MAX under it, just below FLT_MAX / that distance.
            const float wide = mx / float(qmax) - mn / float(qmax);
            const double reach = std::max(p.zero_point, float(qmax) - p.zero_point);
            if (std::isfinite(wide * float(reach)))
              EXPECT_EQ(p.scale, wide) << what << " channel " << ch;
            else
              EXPECT_TRUE(p.scale < wide && double(p.scale) * reach <= FLT_MAX &&
                          double(p.scale) * reach >= FLT_MAX * (1 - 0x1p-22))
                  << what << " channel " << ch << ": scale " << p.scale;
          }
          for (size_t i = b; i < e; ++i) {
            ASSERT_TRUE(std::isfinite(deq[i])) << what << " [" << i << "]";
            // One step (nearest: half of one, but the wide grid may clamp
            // its far end by up to one).
            const long double err = std::fabs((long double)deq[i] - (long double)c.x[i]);
            ASSERT_LE(err, (long double)p.scale * (1 + 0x1p-10))
                << what << " [" << i << "] x " << c.x[i] << " deq " << deq[i];
          }
        }
      }
}

// With error feedback a finite x + r past FLT_MAX quantizes as +-FLT_MAX
// and the residual keeps the rest: x + r_in = dequantized + r_out up to
// rounding, in place and out of place alike, at every level.
TEST(QuantHuge, ErrorFeedbackSaturatesAndTheResidualKeepsTheRest) {
  std::vector<float> x(1300), r(1300);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = i % 4 == 0 ? FLT_MAX : (i % 4 == 1 ? -3e38f : (i % 4 == 2 ? 2.9e38f : 0.5f));
    r[i] = i % 4 == 0 ? 2e37f : (i % 4 == 1 ? -1e38f : (i % 4 == 2 ? 1e38f : -0.25f));
  }
  for (size_t channel : {size_t(512), x.size()})
    for (int qmax : {255, 15, 3})
      for (bool stochastic : {false, true}) {
        const std::string what = "channel " + std::to_string(channel) + " qmax " +
                                 std::to_string(qmax) + (stochastic ? " stochastic" : "");
        Quantized scalar;
        for (Isa isa : every_level()) {
          IsaCap cap(isa);
          const Quantized out = quantize(x, channel, qmax, stochastic, &r, false);
          const Quantized in = quantize(x, channel, qmax, stochastic, &r, true);
          ASSERT_TRUE(out.ok && in.ok) << what << " at " << level_name(isa);
          EXPECT_EQ(out.codes, in.codes) << what;
          EXPECT_EQ(std::memcmp(out.residual.data(), in.residual.data(), x.size() * 4), 0) << what;
          if (isa == Isa::kScalar) {
            scalar = out;
          } else {
            EXPECT_EQ(out.codes, scalar.codes) << what << " at " << level_name(isa);
            EXPECT_EQ(std::memcmp(out.residual.data(), scalar.residual.data(), x.size() * 4), 0)
                << what << " at " << level_name(isa);
          }
        }
        std::vector<float> deq(x.size());
        q::dequantize_into(scalar.codes.data(), x.size(), channel, scalar.params.data(),
                           deq.data());
        for (size_t i = 0; i < x.size(); ++i) {
          ASSERT_TRUE(std::isfinite(deq[i]) && std::isfinite(scalar.residual[i])) << what << i;
          const long double want = (long double)x[i] + r[i];
          const long double got = (long double)deq[i] + scalar.residual[i];
          ASSERT_LE(std::fabs(got - want), std::fabs(want) * 0x1p-22 + 1e-6)
              << what << " [" << i << "] x " << x[i] << " r " << r[i] << " deq " << deq[i]
              << " r_out " << scalar.residual[i];
        }
      }
}

// A NaN or Inf x or residual is still refused, and in place the residual
// is left as it was.
TEST(QuantHuge, ANonFiniteResidualIsStillRefused) {
  for (Isa isa : every_level()) {
    IsaCap cap(isa);
    for (float bad : {NAN, INFINITY, -INFINITY}) {
      std::vector<float> x(1000, 3e38f), r(1000, 1e38f);
      r[777] = bad;
      const Quantized out = quantize(x, 512, 255, false, &r, false);
      EXPECT_FALSE(out.ok) << level_name(isa);
      const Quantized in = quantize(x, 512, 255, false, &r, true);
      EXPECT_FALSE(in.ok) << level_name(isa);
      EXPECT_EQ(std::memcmp(in.residual.data(), r.data(), r.size() * 4), 0) << level_name(isa);
    }
  }
}

// The mean of encodings of huge values: finite, within the ranks' mean step
// of the exact mean, and for a channel summed in double exactly the double
// sum of the dequantized values; bit-packed channels that do not start on
// a byte (the whole-pass path) and those that do agree with it.
TEST(QuantHuge, TheMeanOfHugeEncodingsIsFiniteAndNearTheExactMean) {
  for (int world : {2, 3})
    for (int bits : {8, 4, 2})
      for (size_t channel : {size_t(512), size_t(511)}) {
        const qz::Segment s{2600, channel};
        const int qmax = (1 << bits) - 1;
        std::vector<std::vector<float>> xs{size_t(world)};
        for (int k = 0; k < world; ++k) {
          xs[size_t(k)] = ddph_test::normal_floats(s.n, uint32_t(20 + k), 1.0f);
          std::vector<float>& v = xs[size_t(k)];
          for (size_t i = 0; i < 600; ++i) v[i] = 3e38f;  // the sum overflows
          for (size_t i = 600; i < 1100; ++i) v[i] = (i + k) % 2 ? FLT_MAX : -FLT_MAX;  // range too
          v[1500] = k % 2 ? -3.3e38f : 3.3e38f;
        }
        std::vector<std::vector<uint8_t>> enc(size_t(world),
                                              std::vector<uint8_t>(qz::encoded_bytes(s, bits)));
        std::vector<q::QParams> params(qz::segment_channels(s));
        std::vector<uint8_t> codes(s.n);
        qz::CodecScratch scratch{params.data(), codes.data()};
        qz::EncodeArgs args;
        args.bits = bits;
        std::vector<const uint8_t*> ins;
        for (int k = 0; k < world; ++k) {
          ASSERT_TRUE(
              qz::encode_segment(xs[size_t(k)].data(), s, args, enc[size_t(k)].data(), scratch));
          ins.push_back(enc[size_t(k)].data());
        }
        const std::string what = "world " + std::to_string(world) + " bits " +
                                 std::to_string(bits) + " channel " + std::to_string(channel);
        std::vector<float> scalar;
        for (Isa isa : every_level()) {
          IsaCap cap(isa);
          std::vector<float> mean(s.n);
          qz::decode_mean(ins.data(), ins.size(), s, bits, world, mean.data(), scratch);
          if (isa == Isa::kScalar)
            scalar = mean;
          else
            EXPECT_EQ(std::memcmp(mean.data(), scalar.data(), s.n * 4), 0) << what;
        }
        // Each encoding's scales and codes, read back from its bytes.
        std::vector<std::vector<q::QParams>> ps{size_t(world)};
        std::vector<std::vector<uint8_t>> qs(size_t(world), std::vector<uint8_t>(s.n));
        for (int k = 0; k < world; ++k) {
          ps[size_t(k)].resize(qz::segment_channels(s));
          std::memcpy(ps[size_t(k)].data(), ins[size_t(k)], qz::params_bytes(s));
          q::unpack(ins[size_t(k)] + qz::params_bytes(s), s.n, bits, qs[size_t(k)].data());
        }
        size_t wide = 0;
        for (size_t i = 0; i < s.n; ++i) {
          ASSERT_TRUE(std::isfinite(scalar[i])) << what << " [" << i << "]";
          long double exact = 0, deq_sum = 0, steps = 0, bound_sum = 0;
          for (int k = 0; k < world; ++k) {
            const q::QParams p = ps[size_t(k)][i / channel];
            exact += xs[size_t(k)][i];
            deq_sum += (long double)p.scale * ((long double)qs[size_t(k)][i] - p.zero_point);
            steps += p.scale;
            bound_sum += (long double)p.scale * std::max(p.zero_point, float(qmax) - p.zero_point);
          }
          ASSERT_LE(std::fabs((long double)scalar[i] - exact / world),
                    steps / world * (1 + 0x1p-10) + std::fabs(exact / world) * 0x1p-20)
              << what << " [" << i << "]";
          if (bound_sum * (1 + world * 0x1p-23L) > FLT_MAX) {
            // Summed in double: the exact mean of the dequantized values,
            // rounded (in double, then to float).
            ++wide;
            const long double want = deq_sum / world;
            ASSERT_LE(std::fabs((long double)scalar[i] - want), std::fabs(want) * 0x1p-23L)
                << what << " [" << i << "]";
          }
        }
        EXPECT_GE(wide, 1100u) << what << ": the huge channels were not summed in double";
      }
}

}  // namespace
