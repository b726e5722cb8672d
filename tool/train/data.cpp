#include "tool/train/data.h"

#include <cmath>

namespace ddph::tool {

uint64_t Rng::next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double Rng::uniform() {
  return static_cast<double>(next() >> 11) * 0x1.0p-53;
}

double Rng::normal() {
  double u1 = 1.0 - uniform();  // (0, 1]: log stays finite
  double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

uint64_t Rng::below(uint64_t n) {
  return next() % n;
}

Dataset make_spirals(int classes, int per_class, double noise, uint64_t seed) {
  Rng rng(seed);
  Dataset d;
  d.dim = 2;
  d.classes = classes;
  for (int j = 0; j < per_class; ++j) {
    for (int k = 0; k < classes; ++k) {
      double r = (j + 0.5) / per_class;
      double t = 2.0 * M_PI * k / classes + 3.0 * M_PI * r + noise * rng.normal();
      d.x.push_back(static_cast<float>(r * std::sin(t)));
      d.x.push_back(static_cast<float>(r * std::cos(t)));
      d.y.push_back(k);
    }
  }
  return d;
}

}  // namespace ddph::tool
