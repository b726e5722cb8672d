// What the hooks do to memory besides coding it, on the host or, for a CUDA
// bucket, enqueued on its stream: zeroing, copying, reading the rank
// headers back, and float storage that stays on a GPU (error feedback).
// Every CUDA call is checked; a failure is DDPH_INTERNAL naming the call.
// In a build without CUDA each device branch is DDPH_UNSUPPORTED.
#pragma once

#include <ddph/ddph.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/kernels/on_device.h"

namespace ddph {
namespace cuda {
class DeviceGuard;
}
namespace quantization {

void zero_bytes(const Where& at, void* p, size_t bytes);
// out[r] = first[r * stride] for r < rows, once the work enqueued so far is
// done. On a GPU: one small copy to the host and a wait for the stream.
void read_column(const Where& at, const uint8_t* first, size_t stride, size_t rows, uint8_t* out);

// Core's cuda::DeviceGuard for at's GPU, behind a header that needs no CUDA
// (codec.h holds one): launches go to the device of the bucket's memory,
// whatever the calling thread had. Nothing for a host bucket.
class DeviceGuard {
 public:
  explicit DeviceGuard(const Where& at);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  std::unique_ptr<cuda::DeviceGuard> guard_;
};

// Floats in host memory or on one GPU. Device memory is allocated only when
// the length or the device changes, so a steady step allocates nothing.
class FloatStore {
 public:
  FloatStore() = default;
  ~FloatStore();
  FloatStore(FloatStore&& other) noexcept;
  FloatStore& operator=(FloatStore&& other) noexcept;
  FloatStore(const FloatStore&) = delete;
  FloatStore& operator=(const FloatStore&) = delete;

  size_t size() const { return n_; }
  float* data() { return device_ != nullptr ? device_ : host_.data(); }
  // Whether the floats are in at's memory (the same GPU for a CUDA bucket).
  bool in(const Where& at) const;
  // n zeros in at's memory.
  void zeros(const Where& at, size_t n);
  // Puts the floats in at's memory, keeping their values.
  void move_to(const Where& at);
  // n floats in at's memory, their values unspecified (kept if already so).
  void ensure(const Where& at, size_t n);
  // Host floats, as loaded from a checkpoint.
  void set_host(std::vector<float> v);
  // The values, waiting for the GPU first: checkpoints are rare, and the
  // stream that last wrote them may be gone by then, so the whole device is
  // waited for.
  std::vector<float> to_host() const;

 private:
  void release();
  std::vector<float> host_;
  float* device_ = nullptr;
  int device_id_ = -1;
  size_t n_ = 0;
};

}  // namespace quantization
}  // namespace ddph
