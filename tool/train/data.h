// The data of `ddph train`: a seeded synthetic spiral task, and the seeded
// generator that makes it (the model's initial parameters and the ranks'
// sampling use it too).
//
// Deterministic given the seed, so every rank of a job builds the same data
// set and the same initial parameters.
#pragma once

#include <cstdint>
#include <vector>

namespace ddph::tool {

// SplitMix64: tiny, portable across standard libraries (unlike
// std::normal_distribution), so the init is the same on every machine.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next();
  double uniform();            // [0, 1)
  double normal();             // N(0, 1), Box-Muller
  uint64_t below(uint64_t n);  // [0, n)

 private:
  uint64_t state_;
};

struct Dataset {
  int dim = 0;
  int classes = 0;
  std::vector<float> x;  // size() * dim, row-major
  std::vector<int> y;
  int size() const { return static_cast<int>(y.size()); }
};

// `classes` interleaved spiral arms, `per_class` points each, with Gaussian
// noise. Not linearly separable, so the hidden layers must learn.
Dataset make_spirals(int classes, int per_class, double noise, uint64_t seed);

}  // namespace ddph::tool
