#include "tool/bench/device.h"

#include <stdexcept>
#include <string>

#ifdef DDPH_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include "tool/ranks/session.h"

namespace ddph::tool {

#ifdef DDPH_HAVE_CUDA
namespace {

void cuda_ok(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return;
  const bool no_gpu = e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver;
  throw std::runtime_error(std::string("--device cuda: ") +
                           (no_gpu ? "no usable CUDA device: " : "") + call +
                           " failed: " + cudaGetErrorString(e));
}

cudaStream_t as_stream(void* s) {
  return static_cast<cudaStream_t>(s);
}

}  // namespace

CudaBucketMemory::CudaBucketMemory(size_t bytes, int rank) : bytes_(bytes) {
  int count = 0;
  cuda_ok(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (count == 0) throw std::runtime_error("--device cuda: no usable CUDA device: none found");
  device_ = rank % count;
  cuda_ok(cudaSetDevice(device_), "cudaSetDevice");
  cudaStream_t s = nullptr;
  cuda_ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  stream_ = s;
  cuda_ok(cudaMalloc(&data_, bytes_ == 0 ? 1 : bytes_), "cudaMalloc");
}

CudaBucketMemory::~CudaBucketMemory() {
  if (stream_ != nullptr) cudaStreamSynchronize(as_stream(stream_));
  cudaFree(data_);
  if (stream_ != nullptr) cudaStreamDestroy(as_stream(stream_));
}

void CudaBucketMemory::upload(const void* host, size_t n) {
  if (n > bytes_) throw std::runtime_error("--device cuda: upload past the buffer");
  cuda_ok(cudaMemcpyAsync(data_, host, n, cudaMemcpyHostToDevice, as_stream(stream_)),
          "cudaMemcpyAsync");
  wait();
}

void CudaBucketMemory::wait() {
  cuda_ok(cudaStreamSynchronize(as_stream(stream_)), "cudaStreamSynchronize");
}

ddph_bucket_t CudaBucketMemory::onto(ddph_bucket_t b) const {
  b.buffer.data = data_;
  b.buffer.byte_offset = 0;
  b.buffer.device = DLDevice{kDLCUDA, device_};
  b.stream = stream_;
  return b;
}

void CudaBucketMemory::allreduce(ddph_comm_t* comm, int64_t numel) {
  int64_t shape = numel;
  DLTensor t{data_, DLDevice{kDLCUDA, device_}, 1, DLDataType{kDLFloat, 32, 1}, &shape, nullptr, 0};
  check(comm->allreduce(comm->ctx, &t, &t, DDPH_SUM, stream_), "allreduce (baseline)");
  wait();
}

#else

CudaBucketMemory::CudaBucketMemory(size_t bytes, int) : bytes_(bytes) {
  throw std::runtime_error(
      "--device cuda: this build of ddphooks has no CUDA (DDPH_WITH_CUDA was off; docs/cuda.md)");
}
CudaBucketMemory::~CudaBucketMemory() = default;
void CudaBucketMemory::upload(const void*, size_t) {}
void CudaBucketMemory::wait() {}
ddph_bucket_t CudaBucketMemory::onto(ddph_bucket_t b) const {
  return b;
}
void CudaBucketMemory::allreduce(ddph_comm_t*, int64_t) {}

#endif

}  // namespace ddph::tool
