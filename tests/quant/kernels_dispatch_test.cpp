// Every SIMD level of the quantization kernels gives the same bytes as the
// scalar level, through the public entry points, on the shared cases, in
// every mode, with unaligned pointers (the pattern of
// tests/kernels/dispatch_test.cpp).
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#include "core/kernels/isa.h"
#include "core/quant/kernels/quant_cpu.h"
#include "tests/quant/kernels_test_data.h"
#include "tests/support/isa_levels.h"

namespace {

using ddph::Isa;
namespace q = ddph::quantization;

using ddph_test::IsaCap;
using ddph_test::simd_levels;

template <class T>
void append(std::vector<uint8_t>& out, const T* p, size_t n) {
  const uint8_t* b = reinterpret_cast<const uint8_t*>(p);
  out.insert(out.end(), b, b + n * sizeof(T));
}

void expect_same_at_every_level(const std::string& what,
                                const std::function<std::vector<uint8_t>()>& fn) {
  std::vector<uint8_t> want;
  {
    IsaCap cap(Isa::kScalar);
    want = fn();
  }
  for (Isa isa : simd_levels()) {
    IsaCap cap(isa);
    ASSERT_EQ(ddph::isa_active(), isa);
    const std::vector<uint8_t> got = fn();
    ASSERT_EQ(got.size(), want.size()) << what;
    size_t first = 0;
    while (first < got.size() && got[first] == want[first]) ++first;
    EXPECT_EQ(first, got.size()) << what << ": " << ddph::isa_name(isa)
                                 << " differs from scalar at byte " << first;
  }
}

TEST(QuantDispatch, HasSimdLevels) {
  if (simd_levels().empty()) GTEST_SKIP() << "no SIMD level on this CPU";
  std::printf("quantization kernels: scalar vs %zu SIMD level(s), best %s\n", simd_levels().size(),
              ddph::isa_name(ddph::isa_supported()));
}

TEST(QuantDispatch, QuantizeAllModes) {
  for (const auto& c : ddph_test::quant_cases()) {
    for (int qmax : {255, 15, 3})
      for (bool stochastic : {false, true})
        for (bool ef : {false, true}) {
          const std::string what = c.name + " qmax " + std::to_string(qmax) +
                                   (stochastic ? " stochastic" : " nearest") + (ef ? " ef" : "");
          expect_same_at_every_level(what, [&] {
            std::vector<float> xs(c.x.size() + 1);
            std::memcpy(xs.data() + 1, c.x.data(), c.x.size() * sizeof(float));
            std::vector<float> res(c.x.size() + 1);
            for (size_t i = 0; i < c.x.size(); ++i) res[i + 1] = c.x[(i * 7) % c.x.size()] * 0.01f;
            std::vector<uint8_t> codes(c.x.size() + 1);
            std::vector<q::QParams> params(q::num_channels(c.x.size(), c.channel));
            q::QuantizeArgs a;
            a.x = xs.data() + 1;
            a.n = c.x.size();
            a.channel = c.channel;
            a.qmax = qmax;
            a.residual = ef ? res.data() + 1 : nullptr;
            a.stochastic = stochastic;
            a.seed = 1234;
            a.counter_base = 0xFFFFFFFFull - 40;  // the counter's low word wraps inside
            a.params = params.data();
            a.q = codes.data() + 1;
            const bool ok = q::quantize_channels(a);
            std::vector<uint8_t> out{uint8_t(ok)};
            append(out, codes.data() + 1, c.x.size());
            append(out, params.data(), params.size());
            if (ef) append(out, res.data() + 1, c.x.size());
            return out;
          });
        }
  }
}

// Error feedback out of place (residual_out) is the in-place update written
// elsewhere: the same codes, params and new residual at every level, and the
// input residual untouched, a rejected (non-finite) bucket included.
TEST(QuantDispatch, ErrorFeedbackOutOfPlaceEqualsInPlace) {
  std::vector<Isa> levels = simd_levels();
  levels.insert(levels.begin(), Isa::kScalar);
  for (Isa isa : levels) {
    IsaCap cap(isa);
    for (auto c : ddph_test::quant_cases()) {
      for (int mode = 0; mode < 3; ++mode) {
        // 0: nearest; 1: stochastic rounding; 2: nearest with an Inf.
        const bool poison = mode == 2, stochastic = mode == 1;
        if (poison) c.x[c.x.size() / 2] = std::numeric_limits<float>::infinity();
        const std::string what = c.name + (poison ? " with Inf" : "") +
                                 (stochastic ? " stochastic" : "") + " at " + ddph::isa_name(isa);
        const size_t n = c.x.size();
        std::vector<float> res(n);
        for (size_t i = 0; i < n; ++i) res[i] = c.x[(i * 7) % n] * 0.01f;
        const std::vector<float> kept = res;
        std::vector<float> in_place = res, out(n, -7.0f);
        std::vector<uint8_t> codes_a(n), codes_b(n);
        std::vector<q::QParams> params_a(q::num_channels(n, c.channel)), params_b(params_a.size());
        q::QuantizeArgs a;
        a.x = c.x.data();
        a.n = n;
        a.channel = c.channel;
        a.qmax = 15;
        a.stochastic = stochastic;
        a.seed = 77;
        a.counter_base = (uint64_t(1) << 32) - 5;  // the low word wraps inside the bucket
        a.residual = in_place.data();
        a.params = params_a.data();
        a.q = codes_a.data();
        const bool ok_a = q::quantize_channels(a);
        q::QuantizeArgs b = a;
        b.residual = res.data();
        b.residual_out = out.data();
        b.params = params_b.data();
        b.q = codes_b.data();
        const bool ok_b = q::quantize_channels(b);
        ASSERT_EQ(ok_a, ok_b) << what;
        EXPECT_EQ(std::memcmp(res.data(), kept.data(), n * sizeof(float)), 0)
            << what << ": the input residual was written";
        if (!ok_a) {
          EXPECT_TRUE(poison) << what;
          EXPECT_EQ(std::memcmp(in_place.data(), kept.data(), n * sizeof(float)), 0) << what;
          continue;
        }
        EXPECT_EQ(codes_a, codes_b) << what;
        EXPECT_EQ(
            std::memcmp(params_a.data(), params_b.data(), params_a.size() * sizeof(q::QParams)), 0)
            << what;
        EXPECT_EQ(std::memcmp(out.data(), in_place.data(), n * sizeof(float)), 0) << what;
      }
    }
  }
}

TEST(QuantDispatch, Dequantize) {
  // 262147 floats: an output past 1 MiB, written with streaming stores from
  // an address that is not a vector's (out + 1), through channels whose
  // length (1000) moves each one's alignment.
  for (size_t n : {1, 7, 8, 31, 33, 512, 1000, 4099, 262147}) {
    for (size_t channel : {size_t(512), size_t(1000), n}) {
      std::vector<uint8_t> codes(n + 1);
      for (size_t i = 0; i < codes.size(); ++i) codes[i] = uint8_t(i * 37 + 11);
      std::vector<q::QParams> params(q::num_channels(n, channel));
      for (size_t c = 0; c < params.size(); ++c)
        params[c] = q::qparams_from_minmax(-0.3f * float(c + 1), 0.7f / float(c + 1), 255);
      const std::vector<float> acc0 = ddph_test::normal_floats(n + 1, uint32_t(n), 1.0f);
      expect_same_at_every_level("dequantize n " + std::to_string(n), [&] {
        std::vector<float> acc = acc0, out(n + 1);
        q::dequantize_add(codes.data() + 1, n, channel, params.data(), acc.data() + 1);
        q::dequantize_into(codes.data() + 1, n, channel, params.data(), out.data() + 1);
        std::vector<uint8_t> b;
        append(b, acc.data(), acc.size());
        append(b, out.data(), out.size());
        return b;
      });
    }
  }
}

TEST(QuantDispatch, PackUnpack) {
  for (int bits : {4, 2})
    for (size_t n : {1, 3, 31, 32, 33, 63, 64, 65, 127, 1000, 4097}) {
      expect_same_at_every_level("pack bits " + std::to_string(bits), [&] {
        std::vector<uint8_t> codes(n + 1);
        for (size_t i = 0; i < codes.size(); ++i) codes[i] = uint8_t((i * 13 + 5) % (1 << bits));
        std::vector<uint8_t> packed(q::packed_bytes(n, bits) + 1, 0xAA);
        q::pack(codes.data() + 1, n, bits, packed.data() + 1);
        std::vector<uint8_t> back(n + 1);
        q::unpack(packed.data() + 1, n, bits, back.data() + 1);
        packed.insert(packed.end(), back.begin(), back.end());
        return packed;
      });
    }
}

TEST(QuantDispatch, AllFinite) {
  for (size_t n : {1, 9, 17, 100, 4099}) {
    for (size_t bad = 0; bad < n; bad += 1 + n / 7) {
      for (float v : {NAN, INFINITY, -INFINITY}) {
        std::vector<float> x = ddph_test::normal_floats(n, 3, 1.0f);
        x[bad] = v;
        expect_same_at_every_level("all_finite", [&] {
          return std::vector<uint8_t>{uint8_t(q::all_finite(x.data(), n)),
                                      uint8_t(q::all_finite(x.data(), bad))};
        });
      }
    }
  }
}

}  // namespace
