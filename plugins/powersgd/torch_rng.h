// The random Q of PowerSGD, drawn exactly as PyTorch's hooks draw it, so that
// a run from the same seed starts from the same Q as PyTorch (up to the last
// bits of its vectorized log/sin/cos):
//   seed = state.rng.randint(1_000_000_000)   numpy RandomState(random_seed)
//   torch.manual_seed(seed); q = torch.randn(*shape)   per batch of matrices
// Both generators are MT19937. Only numpy's is state that survives a step
// (torch's is reseeded for each draw), so only it is checkpointed.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace ddph {
namespace powersgd {

// MT19937 (Matsumoto and Nishimura) with the reference init_genrand seeding,
// as numpy's legacy RandomState and torch's CPU generator use it. The state
// is public so that it can be checkpointed word for word.
struct Mt19937 {
  static constexpr int kN = 624;
  std::array<uint32_t, kN> mt{};
  int pos = kN;  // next word of mt to temper; kN means "twist first"

  explicit Mt19937(uint32_t seed = 5489u) { seed_with(seed); }
  void seed_with(uint32_t seed);
  uint32_t next();
};

// numpy's RandomState(seed).randint(1_000_000_000): masked rejection sampling
// on 30-bit words. Advances rng.
uint32_t numpy_randint_1e9(Mt19937& rng);

// torch's CPU generator after torch.manual_seed(seed): successive randn()
// calls continue one stream, as successive torch.randn calls do.
class TorchGenerator {
 public:
  explicit TorchGenerator(uint64_t seed) : mt_(uint32_t(seed)) {}
  // torch.randn(n), float32: n >= 16 takes torch's normal_fill (uniforms,
  // then Box-Muller 16 at a time, the last 16 redrawn when n % 16 != 0);
  // n < 16 its serial double-precision path, whose second value of each
  // pair the generator keeps for the next call.
  void randn(float* out, size_t n);

 private:
  float uniform_f32();
  double uniform_f64();
  Mt19937 mt_;
  bool has_next_normal_ = false;
  double next_normal_ = 0;
};

}  // namespace powersgd
}  // namespace ddph
