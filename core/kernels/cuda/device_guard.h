// Makes a device current for a scope and restores the caller's on exit:
// ddphooks runs on the host's threads, whose current device is the host's
// business, while a buffer's work must go to the buffer's own device.
#pragma once

#include <cuda_runtime_api.h>

#include "core/kernels/cuda/cuda_check.h"

namespace ddph {
namespace cuda {

class DeviceGuard {
 public:
  // `who` names the caller in the error of a failed switch.
  DeviceGuard(int device, const char* who) {
    check(cudaGetDevice(&previous_), who, "cudaGetDevice");
    if (previous_ != device) check(cudaSetDevice(device), who, "cudaSetDevice");
  }
  ~DeviceGuard() {
    int now = -1;
    if (cudaGetDevice(&now) == cudaSuccess && now != previous_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

}  // namespace cuda
}  // namespace ddph
