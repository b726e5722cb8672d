// What the hooks do to memory besides coding it, on the host or, for a CUDA
// bucket, enqueued on its stream: zeroing and reading the rank headers
// back. (The residuals kept between steps are core's resident state,
// core/hook/resident_floats.h.) Every CUDA call is checked; a failure is
// DDPH_INTERNAL naming the call.
// In a build without CUDA each device branch is DDPH_UNSUPPORTED.
#pragma once

#include <ddph/ddph.h>

#include <cstddef>
#include <cstdint>
#include <memory>

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

}  // namespace quantization
}  // namespace ddph
