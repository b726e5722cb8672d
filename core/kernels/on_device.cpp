#include "core/kernels/on_device.h"

#include <climits>
#include <cstring>

#include "core/base/error.h"
#include "core/kernels/cast.h"
#include "core/kernels/divide.h"
#ifdef DDPH_HAVE_CUDA
#include "core/kernels/cuda/cuda_check.h"
#include "core/kernels/cuda/device_guard.h"
#include "core/kernels/cuda/elementwise_cuda.h"
#include "core/kernels/cuda/scratch_pool.h"
#endif

namespace ddph {
namespace {

#ifdef DDPH_HAVE_CUDA
// Kernel launches and pool calls: a failure here is the GPU's, not the caller's.
void enqueued(cudaError_t error, const char* what) {
  cuda::check(error, "on the GPU", what);
}
cudaStream_t stream_of(const Where& at) {
  return static_cast<cudaStream_t>(at.stream);
}
// Launches go to the buffer's device, whatever the calling thread's is.
class OnDevice : public cuda::DeviceGuard {
 public:
  explicit OnDevice(const Where& at) : cuda::DeviceGuard(at.device.device_id, "on the GPU") {}
};
#endif

}  // namespace

#ifndef DDPH_HAVE_CUDA
namespace cuda {
class DeviceGuard {};  // never made without CUDA; complete for unique_ptr
}  // namespace cuda
#endif

void refuse_cuda_memory(const char* who) {
  DDPH_FAIL(DDPH_UNSUPPORTED, who << ": the buffer is CUDA memory, but this build of ddphooks "
                                     "has no CUDA (DDPH_WITH_CUDA was off; docs/cuda.md)");
}

void require_cuda_build(const Where& at, const char* who) {
#ifndef DDPH_HAVE_CUDA
  if (at.cuda()) refuse_cuda_memory(who);
#else
  (void)at;
  (void)who;
#endif
}

Where where_of(const ddph_bucket_t& bucket) {
  return Where{bucket.buffer.device, bucket.stream};
}

DeviceScope::DeviceScope(const Where& at, const char* who) {
  if (!at.cuda()) return;
#ifdef DDPH_HAVE_CUDA
  guard_ = std::make_unique<cuda::DeviceGuard>(at.device.device_id, who);
#else
  refuse_cuda_memory(who);
#endif
}

DeviceScope::~DeviceScope() = default;

void zero_bytes(const Where& at, void* p, size_t bytes, const char* who) {
  if (bytes == 0) return;
  if (!at.cuda()) {
    std::memset(p, 0, bytes);
    return;
  }
#ifdef DDPH_HAVE_CUDA
  DeviceScope on(at, who);
  DDPH_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_of(at)), who);
#else
  refuse_cuda_memory(who);
#endif
}

void read_strided_bytes(const Where& at, const uint8_t* first, size_t stride, size_t rows,
                        uint8_t* out, const char* who) {
  if (rows == 0) return;
  if (!at.cuda()) {
    for (size_t r = 0; r < rows; ++r) out[r] = first[r * stride];
    return;
  }
#ifdef DDPH_HAVE_CUDA
  DeviceScope on(at, who);
  // One strided copy, unless the stride is past what a 2-D copy's pitch may
  // be (blocks of gigabytes): then a byte at a time.
  if (stride <= size_t(INT_MAX)) {
    DDPH_CUDA_CHECK(
        cudaMemcpy2DAsync(out, 1, first, stride, 1, rows, cudaMemcpyDeviceToHost, stream_of(at)),
        who);
  } else {
    for (size_t r = 0; r < rows; ++r)
      DDPH_CUDA_CHECK(
          cudaMemcpyAsync(out + r, first + r * stride, 1, cudaMemcpyDeviceToHost, stream_of(at)),
          who);
  }
  DDPH_CUDA_CHECK(cudaStreamSynchronize(stream_of(at)), who);
#else
  refuse_cuda_memory(who);
#endif
}

void order_after(const Where& later, const Where& earlier, const char* who) {
  if (!later.cuda() || !earlier.cuda() || later.stream == earlier.stream) return;
#ifdef DDPH_HAVE_CUDA
  DeviceScope on(earlier, who);
  cudaEvent_t event = nullptr;
  DDPH_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), who);
  // The wait takes the event as recorded now, so it may be destroyed at once.
  const cudaError_t recorded = cudaEventRecord(event, stream_of(earlier));
  const cudaError_t waited =
      recorded == cudaSuccess ? cudaStreamWaitEvent(stream_of(later), event, 0) : cudaSuccess;
  cudaEventDestroy(event);
  cuda::check(recorded, who, "cudaEventRecord");
  cuda::check(waited, who, "cudaStreamWaitEvent");
#else
  refuse_cuda_memory(who);
#endif
}

void divide_inplace(const Where& at, DType dtype, void* data, size_t n, int64_t w) {
  if (!at.cuda()) return divide_inplace(dtype, data, n, w);
#ifdef DDPH_HAVE_CUDA
  DDPH_CHECK(w >= 1, DDPH_INVALID_ARGUMENT, "divide_inplace: divisor " << w << " is below 1");
  OnDevice device(at);
  enqueued(cuda::divide_inplace(dtype, data, n, w, stream_of(at)), "divide");
#else
  refuse_cuda_memory("divide");
#endif
}

void cast_into(const Where& at, DType from, const void* src, DType to, void* dst, size_t n) {
  if (!at.cuda()) return cast_into(from, src, to, dst, n);
#ifdef DDPH_HAVE_CUDA
  OnDevice device(at);
  const cudaError_t e = cuda::cast_into(from, src, to, dst, n, stream_of(at));
  DDPH_CHECK(
      e != cudaErrorInvalidValue, DDPH_UNSUPPORTED,
      "cast_into: " << dtype_name(from) << " -> " << dtype_name(to) << " is not a supported cast");
  enqueued(e, "cast");
#else
  refuse_cuda_memory("cast");
#endif
}

void cast_div_into(const Where& at, DType from, const void* src, DType low, uint16_t* dst, size_t n,
                   int64_t w) {
  if (!at.cuda()) return cast_div_into(from, src, low, dst, n, w);
#ifdef DDPH_HAVE_CUDA
  OnDevice device(at);
  const cudaError_t e = cuda::cast_div_into(from, src, low, dst, n, w, stream_of(at));
  DDPH_CHECK(e != cudaErrorInvalidValue, DDPH_UNSUPPORTED,
             "cast_div_into: " << dtype_name(from) << " -> " << dtype_name(low) << " / " << w
                               << " is not supported");
  enqueued(e, "cast and divide");
#else
  refuse_cuda_memory("cast and divide");
#endif
}

ScratchBuffers::Lease::~Lease() {
#ifdef DDPH_HAVE_CUDA
  if (data_ == nullptr || !at_.cuda()) return;
  // On the device it came from: with the legacy stream (NULL), the free
  // must be ordered after that device's work, not the current one's.
  cuda::quietly_on_device(at_.device.device_id, [&] { cuda::scratch_free(data_, stream_of(at_)); });
#endif
}

ScratchBuffers::Lease ScratchBuffers::get(const Where& at, uint64_t index, size_t bytes) {
  if (!at.cuda()) {
    std::vector<unsigned char>& v = host_[index];
    if (v.size() < bytes) v.resize(bytes);
    return Lease(v.data(), at);
  }
#ifdef DDPH_HAVE_CUDA
  void* p = nullptr;
  if (bytes > 0) {
    OnDevice device(at);
    enqueued(cuda::scratch_alloc(&p, bytes, at.device.device_id, stream_of(at)),
             "scratch allocation");
  }
  return Lease(p, at);
#else
  refuse_cuda_memory("scratch");
#endif
}

}  // namespace ddph
