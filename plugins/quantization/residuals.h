// Error feedback: each rank's quantization residual, one fp32 vector per
// bucket index, carried from step to step and through checkpoints.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace ddph {
namespace quantization {

// What error feedback remembers of one bucket index.
struct BucketResidual {
  // This rank's error in quantizing its own data (both protocols).
  std::vector<float> own;
  // reduce_scatter only: as owner of a chunk, the error of re-quantizing the
  // chunk's mean (the "server" error of DeepSpeed's compressed allreduce).
  // Without it that error would never be paid back, and a sum of the
  // communicated means would drift from the sum of the true means.
  std::vector<float> owner;
};

// Ordered by bucket index, so a saved blob does not depend on hash order.
using ResidualMap = std::map<uint64_t, BucketResidual>;

class Residuals {
 public:
  // The residuals of bucket `index`: n floats of `own`, m of `owner`. Zeros
  // on first use, and again whenever a length differs from the last time: a
  // residual of another layout would add error to the wrong elements.
  float* own(uint64_t index, size_t n);
  float* owner(uint64_t index, size_t m);
  // Makes `updated` (as long as own) bucket `index`'s own residual; the old
  // one is left in `updated`, to be reused as scratch.
  void swap_own(uint64_t index, std::vector<float>& updated);
  const ResidualMap& all() const { return map_; }
  void replace(ResidualMap map) { map_ = std::move(map); }

 private:
  ResidualMap map_;
};

// The hook's checkpoint blob, little-endian whatever the host:
//   "DDPHQRES"  8 bytes magic
//   u32         version (kResidualStateVersion)
//   u32         bucket count
//   per bucket: u64 index, u64 length, length x f32 (own; IEEE bits as u32),
//               u64 owner length, owner length x f32
constexpr uint32_t kResidualStateVersion = 1;
std::string encode_residuals(const ResidualMap& map);
// Throws DDPH_INVALID_ARGUMENT on a wrong magic or version, truncation,
// trailing bytes or a repeated bucket index.
ResidualMap decode_residuals(const void* bytes, size_t n);

}  // namespace quantization
}  // namespace ddph
