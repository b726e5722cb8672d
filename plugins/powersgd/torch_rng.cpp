#include "plugins/powersgd/torch_rng.h"

#include <cmath>

namespace ddph {
namespace powersgd {

void Mt19937::seed_with(uint32_t seed) {
  mt[0] = seed;
  for (int i = 1; i < kN; ++i) mt[i] = 1812433253u * (mt[i - 1] ^ (mt[i - 1] >> 30)) + uint32_t(i);
  pos = kN;
}

uint32_t Mt19937::next() {
  if (pos >= kN) {
    constexpr int kM = 397;
    for (int i = 0; i < kN; ++i) {
      const uint32_t y = (mt[i] & 0x80000000u) | (mt[(i + 1) % kN] & 0x7fffffffu);
      mt[i] = mt[(i + kM) % kN] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
    }
    pos = 0;
  }
  uint32_t y = mt[pos++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}

uint32_t numpy_randint_1e9(Mt19937& rng) {
  // numpy: rng = high - low = 999999999; mask = next power of two - 1.
  constexpr uint32_t kRange = 999999999u, kMask = (1u << 30) - 1;
  uint32_t v;
  while ((v = rng.next() & kMask) > kRange) {
  }
  return v;
}

namespace {

// normal_fill_16: Box-Muller on 8 pairs (u1 = 1 - data[j], u2 = data[j + 8]).
void box_muller_16(float* d) {
  constexpr double kTwoPi = 2.0 * 3.14159265358979323846;
  for (int j = 0; j < 8; ++j) {
    const float u1 = 1.0f - d[j], u2 = d[j + 8];
    const float radius = std::sqrt(-2.0f * std::log(u1));
    const float theta = float(kTwoPi * u2);
    d[j] = radius * std::cos(theta);
    d[j + 8] = radius * std::sin(theta);
  }
}

}  // namespace

// at::uniform_real_distribution<float>: 24 random bits of one 32-bit word.
float TorchGenerator::uniform_f32() {
  return float(mt_.next() & ((1u << 24) - 1)) * 0x1.0p-24f;
}

// at::uniform_real_distribution<double>: 53 bits of random64() = (w1 << 32) | w2.
double TorchGenerator::uniform_f64() {
  const uint64_t hi = mt_.next(), lo = mt_.next();
  return double(((hi << 32) | lo) & ((uint64_t(1) << 53) - 1)) * 0x1.0p-53;
}

void TorchGenerator::randn(float* out, size_t n) {
  if (n >= 16) {
    for (size_t i = 0; i < n; ++i) out[i] = uniform_f32();
    for (size_t i = 0; i + 16 <= n; i += 16) box_muller_16(out + i);
    if (n % 16 != 0) {
      float* tail = out + n - 16;
      for (int i = 0; i < 16; ++i) tail[i] = uniform_f32();
      box_muller_16(tail);
    }
    return;
  }
  // at::normal_distribution<double>.
  for (size_t i = 0; i < n; ++i) {
    if (has_next_normal_) {
      out[i] = float(next_normal_);
      has_next_normal_ = false;
      continue;
    }
    const double u1 = uniform_f64(), u2 = uniform_f64();
    const double r = std::sqrt(-2.0 * std::log(1.0 - u2));
    const double theta = 2.0 * 3.14159265358979323846 * u1;
    next_normal_ = r * std::sin(theta);
    has_next_normal_ = true;
    out[i] = float(r * std::cos(theta));
  }
}

}  // namespace powersgd
}  // namespace ddph
