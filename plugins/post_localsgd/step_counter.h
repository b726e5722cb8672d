// PyTorch's state.iter / averager.step: training steps seen so far, advanced
// by the bucket that ends a step (is_last), and saved with the hook state.
#pragma once

#include <ddph/ddph.h>

#include <cstdint>

namespace ddph {
namespace post_localsgd {

class StepCounter {
 public:
  uint64_t step() const { return step_; }
  void advance(const ddph_bucket_t& bucket) {
    if (bucket.is_last) ++step_;
  }
  // Blob: "DDPHLSGD", u32 version 1, u64 step; little-endian.
  void save(ddph_write_fn write, void* sink) const;
  // Throws DDPH_INVALID_ARGUMENT on another magic or version, or a wrong size.
  void load(const void* bytes, size_t n);

 private:
  uint64_t step_ = 0;
};

}  // namespace post_localsgd
}  // namespace ddph
