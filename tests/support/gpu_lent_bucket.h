// For the GPU tests: a bucket lent to a hook the way a host lends it, its
// gradient buffer (float32 or bfloat16) and its float32 parameters
// (params[i].data) all on the host or all on GPU 0, so the same test can run
// a hook's CPU path and its CUDA path on the same values.
#pragma once

#include <ddph/ddph.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ddph_test {

class LentBucket {
 public:
  // One 1-D parameter per entry of sizes, back to back in the buffer.
  LentBucket(bool cuda, const std::vector<size_t>& sizes, bool bf16 = false);
  ~LentBucket();
  LentBucket(const LentBucket&) = delete;
  LentBucket& operator=(const LentBucket&) = delete;

  size_t numel() const { return size_t(numel_); }
  // bf16 buckets take the upper half of each float (exact for values whose
  // lower half is zero).
  void set_grads(const std::vector<float>& g);
  void set_params(const std::vector<float>& p);
  // Every copy waits for the device first, as a host must before reusing or
  // reading memory that work on a stream may still touch.
  std::vector<float> grads() const;
  std::vector<float> params() const;
  ddph_bucket_t bucket(uint64_t index, uint64_t step, bool is_last, void* stream);

 private:
  void copy_in(void* dst, const void* src, size_t bytes);
  void copy_out(void* dst, const void* src, size_t bytes) const;
  bool cuda_, bf16_;
  int64_t numel_ = 0;
  std::vector<int64_t> shapes_;
  std::vector<ddph_param_t> views_;
  void* grads_ = nullptr;   // numel_ floats or bf16 values
  void* params_ = nullptr;  // numel_ floats
  std::vector<float> host_grads_, host_params_;
  std::vector<uint16_t> host_low_;
};

// Gradients of every sign and magnitudes from 1e-3 to 1e3, different per
// step and per salt (a bucket index, a rank).
std::vector<float> varied_gradients(uint64_t step, double salt, size_t n);
// Parameters in [-1, 1], different per bucket.
std::vector<float> initial_params(size_t bucket, size_t n);

// Whether a and b hold the same bits, where a NaN matches any NaN (x86 and
// the GPU make different NaN payloads).
bool same_bits(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace ddph_test
