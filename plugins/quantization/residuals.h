// Error feedback: each rank's quantization residual, one fp32 vector per
// bucket index, carried from step to step and through checkpoints.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/kernels/on_device.h"
#include "core/memory/resident_floats.h"

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

// The residuals a hook keeps, each in the memory of the buckets of its
// index (host or GPU; core/memory/resident_floats.h).
class Residuals {
 public:
  // The residuals of bucket `index`, in at's memory: n floats of `own`, m of
  // `owner`. Zeros on first use, and again whenever a length differs from
  // the last time: a residual of another layout would add error to the
  // wrong elements. Moved to at's memory when they are elsewhere (after
  // load_state, which leaves them on the host).
  float* own(uint64_t index, size_t n, const Where& at);
  float* owner(uint64_t index, size_t m, const Where& at);
  // A spare buffer the size of bucket `index`'s own residual (own() first),
  // in at's memory, its values unspecified, for a run to write the new
  // residual into; keep_copy makes it the own residual.
  float* spare_own(uint64_t index, const Where& at);
  void keep_copy(uint64_t index);
  // Host copies of bucket `index`'s residuals into *out, or false when
  // none are kept for it; forget drops them (take_residual, ABI 1.10).
  bool peek(uint64_t index, BucketResidual* out);
  void forget(uint64_t index);
  // Host copies of every residual, for save_state.
  ResidualMap to_host() const;
  void replace(ResidualMap map);

 private:
  static constexpr size_t kOwn = 0, kOwner = 1;
  ResidentFloats& spare(uint64_t index);

  // own and owner by bucket index: what a checkpoint keeps.
  ResidentTable<uint64_t, 2> kept_{"quantization"};
  // The spare own residual by bucket index.
  std::map<uint64_t, ResidentFloats> spare_;
};

// The hook's checkpoint blob, little-endian whatever the host, in core's
// checksummed frame (core/base/le_bytes.h; docs/quantization.md#checkpoints):
//   "DDPHQRES"  8 bytes magic
//   u32         version (kResidualStateVersion; 1 had no checksum)
//   u32         bucket count
//   per bucket: u64 index, u64 length, length x f32 (own; IEEE bits as u32),
//               u64 owner length, owner length x f32
//   u64         FNV-1a 64 of every byte before it
constexpr uint32_t kResidualStateVersion = 2;
std::string encode_residuals(const ResidualMap& map);
// Throws DDPH_INVALID_ARGUMENT on a wrong magic or version, a checksum
// mismatch, truncation, trailing bytes, bucket indices out of ascending
// order (or repeated) or a non-finite residual element (naming its bucket
// and element).
ResidualMap decode_residuals(const void* bytes, size_t n);

}  // namespace quantization
}  // namespace ddph
