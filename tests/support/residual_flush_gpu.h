// residual_flush.h's checks on the hooks' CUDA paths: each bucket, and each
// bucket a residual is taken into, lent from GPU 0 on a non-blocking stream
// of the rank's own, over Gloo (which stages CUDA buffers through the host).
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/support/cuda_device.h"
#include "tests/support/residual_flush.h"

namespace ddph_test {

class GpuPlace : public BufferPlace {
 public:
  ~GpuPlace() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  std::string prepare(int /*rank*/) override {
    cudaError_t e = cudaSetDevice(0);
    if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking);
    return e == cudaSuccess ? std::string() : std::string("GPU 0: ") + cudaGetErrorString(e);
  }
  // The hook's success only means "ordered on the stream": the copy back
  // waits for it.
  void lend(const ddph_bucket_t& b, std::vector<float>& data,
            const std::function<void(const ddph_bucket_t&)>& use) override {
    DeviceVec<float> device(data);
    use(on_gpu(b, device.get(), stream_));
    data = device.host(stream_);
  }

  static std::unique_ptr<BufferPlace> make() { return std::make_unique<GpuPlace>(); }

 private:
  cudaStream_t stream_ = nullptr;
};

}  // namespace ddph_test
