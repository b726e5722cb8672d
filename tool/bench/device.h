// Where `ddph bench --device cuda` keeps its bucket: device memory on this
// rank's GPU (rank modulo the GPU count), with a stream of its own on which
// the hook and the baseline allreduce are enqueued. Timings then include
// waiting for that stream, so they are the GPU's work, not just its launch.
#pragma once

#include <ddph/ddph.h>

#include <cstddef>

namespace ddph::tool {

class CudaBucketMemory {
 public:
  // `bytes` of device memory. Throws std::runtime_error saying why when
  // there is no usable GPU, or when this build has no CUDA.
  CudaBucketMemory(size_t bytes, int rank);
  ~CudaBucketMemory();
  CudaBucketMemory(const CudaBucketMemory&) = delete;
  CudaBucketMemory& operator=(const CudaBucketMemory&) = delete;

  // Copies n bytes (at most the size) of host memory in, and waits until
  // the device has them.
  void upload(const void* host, size_t n);
  // Waits for everything enqueued on the stream.
  void wait();
  // b moved onto this memory and stream.
  ddph_bucket_t onto(ddph_bucket_t b) const;
  // An fp32 SUM allreduce of the memory on comm, enqueued on the stream and
  // waited for: the GPU twin of the raw allreduce baseline.
  void allreduce(ddph_comm_t* comm, int64_t numel);

 private:
  size_t bytes_;
  void* data_ = nullptr;
  int device_ = 0;
  void* stream_ = nullptr;  // cudaStream_t
};

}  // namespace ddph::tool
