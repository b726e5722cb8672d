// Buckets that stress the quantization kernels: random ones of awkward
// lengths, constant and all-negative ones, values exactly at rounding ties,
// tiny and huge magnitudes. Shared by the kernel tests.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/quant/kernels/quant_math.h"

namespace ddph_test {

struct QuantCase {
  std::string name;
  std::vector<float> x;
  size_t channel;  // 512, or x.size() for per-tensor
};

inline std::vector<float> normal_floats(size_t n, uint32_t seed, float sigma, float mean = 0.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(mean, sigma);
  std::vector<float> v(n);
  for (float& f : v) f = d(gen);
  return v;
}

// Each run of `channel` holds -8 and 7.9375, so its scale is exactly 1/16
// (zero point 128), and every other value is (k + 0.5) / 16: x / scale is a
// tie, which torch.round sends to the even neighbour.
inline std::vector<float> tie_floats(size_t n, size_t channel, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> k(-128, 126);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    const size_t j = i % channel;
    v[i] = j == 0 ? -8.0f : j == 1 ? 7.9375f : (float(k(gen)) + 0.5f) / 16.0f;
  }
  return v;
}

// Ties for a scale that is not a power of two: x = (k + 0.5) * scale rounded
// to float, so some land exactly on k + 0.5 and the rest just beside it.
inline std::vector<float> near_tie_floats(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> k(-100, 100);
  const float scale = 0.3f / 255.0f;
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = (float(k(gen)) + 0.5f) * scale;
  v[0] = -0.1f;
  if (n > 1) v[1] = 0.2f;
  return v;
}

// Values beside ties where x / scale and x * (1 / scale) round to different
// integers: they tell true division (PyTorch's) from a reciprocal multiply.
inline std::vector<float> div_vs_recip_floats(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> k(-90, 90);
  const float lo = -0.1f, hi = 0.2f;
  const float scale = ddph::quantization::qparams_from_minmax(lo, hi, 255).scale;
  std::vector<float> v{lo, hi};
  while (v.size() < n) {
    float x = (float(k(gen)) + 0.5f) * scale;
    for (int step = 0; step < 8; ++step, x = std::nextafter(x, 1.0f))
      if (std::rint(x / scale) != std::rint(x * (1.0f / scale)) && v.size() < n) v.push_back(x);
  }
  return v;
}

// The cases, per-channel (512) and per-tensor, including lengths that are
// not multiples of 512 (and of 8, 16 and 32 lanes).
inline std::vector<QuantCase> quant_cases() {
  std::vector<QuantCase> cases;
  auto both = [&](const std::string& name, std::vector<float> x) {
    cases.push_back({name + "/channel", x, 512});
    const size_t n = x.size();
    cases.push_back({name + "/tensor", std::move(x), n});
  };
  both("random_1", normal_floats(1, 1, 1.0f));
  both("random_511", normal_floats(511, 2, 0.01f));
  both("random_512", normal_floats(512, 3, 1.0f));
  both("random_5000", normal_floats(5000, 4, 0.02f));
  both("random_70001", normal_floats(70001, 5, 3.0f, 0.5f));
  both("constant_zero_1000", std::vector<float>(1000, 0.0f));
  both("constant_3_1000", std::vector<float>(1000, 3.0f));
  both("constant_neg_1027", std::vector<float>(1027, -0.25f));
  both("negative_3001", normal_floats(3001, 6, 0.1f, -1.0f));
  both("positive_2049", normal_floats(2049, 7, 0.1f, 1.0f));
  both("ties_4099", tie_floats(4099, 512, 8));
  both("near_ties_1537", near_tie_floats(1537, 9));
  both("div_vs_recip_700", div_vs_recip_floats(700, 15));
  both("tiny_1500", normal_floats(1500, 10, 1e-30f));
  both("subnormal_777", normal_floats(777, 11, 1e-39f));
  both("large_2500", normal_floats(2500, 12, 1e30f));
  both("huge_1100", normal_floats(1100, 13, 5e37f));
  // A range just below FLT_MAX: PyTorch's formulas still hold, and ddph
  // must keep their bits (kernels_huge_test.cpp has the cases past it).
  std::vector<float> edge = normal_floats(1100, 17, 1e37f);
  for (size_t i = 0; i < edge.size(); i += 5) edge[i] = i % 2 ? 1.7e38f : -1.6e38f;
  both("edge_of_range_1100", edge);
  // Channels of very different magnitudes side by side.
  std::vector<float> mixed = normal_floats(512 * 6 + 100, 14, 1.0f);
  for (size_t i = 0; i < mixed.size(); ++i) mixed[i] *= (i / 512) % 2 ? 1e-6f : 1e4f;
  both("mixed_3172", mixed);
  return cases;
}

// Finite buckets past what PyTorch's formulas hold (docs/quantization.md,
// "Huge values"): ranges wider than FLT_MAX, FLT_MAX itself, and huge
// values among ordinary ones, per channel (512) and per tensor.
inline std::vector<QuantCase> huge_quant_cases() {
  std::vector<QuantCase> cases;
  auto both = [&](const std::string& name, std::vector<float> x) {
    cases.push_back({name + "/channel", x, 512});
    const size_t n = x.size();
    cases.push_back({name + "/tensor", std::move(x), n});
  };
  std::vector<float> pm(1500);
  for (size_t i = 0; i < pm.size(); ++i) pm[i] = i % 2 ? 3e38f : -3e38f;
  both("plus_minus_3e38_1500", pm);
  both("flt_max_1100", std::vector<float>(1100, FLT_MAX));
  both("minus_flt_max_700", std::vector<float>(700, -FLT_MAX));
  std::vector<float> ends(1030);
  for (size_t i = 0; i < ends.size(); ++i) ends[i] = i % 3 ? FLT_MAX : -FLT_MAX;
  both("plus_minus_flt_max_1030", ends);
  // Ordinary values with a few huge ones in some channels, and channels
  // whose range sits just below and just above FLT_MAX.
  std::vector<float> mix = normal_floats(512 * 5 + 77, 16, 1.0f);
  mix[3] = 3e38f;
  mix[700] = -3e38f;
  mix[701] = 3e38f;
  mix[1500] = -FLT_MAX;
  for (size_t i = 2048; i < 2560; ++i) mix[i] = i % 2 ? 1.7e38f : -1.6e38f;  // PyTorch's still
  for (size_t i = 2560; i < mix.size(); ++i) mix[i] = i % 2 ? 1.7e38f : -1.71e38f;  // past it
  both("mixed_2637", mix);
  return cases;
}

}  // namespace ddph_test
