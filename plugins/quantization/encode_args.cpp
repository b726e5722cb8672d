#include "plugins/quantization/protocols.h"

namespace ddph {
namespace quantization {
namespace {

// splitmix64's finalizer: a bijection with good avalanche, so nearby
// (rank, step, index) triples land on unrelated counter ranges.
uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

}  // namespace

uint64_t counter_base(int rank, uint64_t step, uint64_t index) {
  const uint64_t h = mix64(mix64(mix64(uint64_t(uint32_t(rank))) ^ step) ^ index);
  return h << 32;
}

EncodeArgs own_encode_args(const QuantOptions& o, const BucketJob& job, size_t begin) {
  EncodeArgs a;
  a.bits = o.bits;
  a.stochastic = o.rounding == Rounding::kStochastic;
  a.seed = o.seed;
  a.counter_base = counter_base(job.rank, job.step, job.index) + begin;
  a.residual = job.residual != nullptr ? job.residual + begin : nullptr;
  a.residual_in =
      job.residual != nullptr && job.residual_in != nullptr ? job.residual_in + begin : nullptr;
  return a;
}

}  // namespace quantization
}  // namespace ddph
