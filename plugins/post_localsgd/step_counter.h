// PyTorch's state.iter / averager.step: training steps seen so far, advanced
// by the bucket that ends a step (is_last), and saved with the hook state.
#pragma once

#include <ddph/ddph.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace ddph {
namespace post_localsgd {

// The checkpoint blob of both hooks, little-endian, in core's checksummed
// frame (core/base/le_bytes.h; docs/post_localsgd.md#checkpoints):
//   "DDPHLSGD"  8 bytes magic
//   u32         version (kStepStateVersion; 1 had no checksum)
//   u64         step
//   u64         FNV-1a 64 of every byte before it
constexpr uint32_t kStepStateVersion = 2;
// The largest step a blob may hold: 2^53, the bound of the hooks' step
// options (start_localsgd_iter, period, warmup_steps). A counter that runs
// one step a microsecond reaches it after 285 years, and it keeps advance()
// far from wrapping around.
constexpr uint64_t kMaxStep = uint64_t(1) << 53;

std::string encode_step(uint64_t step);
// `hook` names the hook in messages ("post_localsgd/model_averaging").
// Throws DDPH_INVALID_ARGUMENT on a wrong magic or version, a checksum
// mismatch, a wrong size, or a step above kMaxStep.
uint64_t decode_step(const void* bytes, size_t n, const char* hook);

class StepCounter {
 public:
  explicit StepCounter(const char* hook) : hook_(hook) {}
  uint64_t step() const { return step_; }
  void advance(const ddph_bucket_t& bucket) {
    if (bucket.is_last) ++step_;
  }
  void save(ddph_write_fn write, void* sink) const;
  // All or nothing: the counter changes only when the blob is valid.
  void load(const void* bytes, size_t n) { step_ = decode_step(bytes, n, hook_); }

 private:
  const char* hook_;
  uint64_t step_ = 0;
};

}  // namespace post_localsgd
}  // namespace ddph
