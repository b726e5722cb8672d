#include "plugins/quantization/device.h"

#include <climits>
#include <cstring>

#include "core/base/error.h"
#ifdef DDPH_HAVE_CUDA
#include "core/kernels/cuda/cuda_check.h"
#include "core/kernels/cuda/device_guard.h"
#else
namespace ddph {
namespace cuda {
class DeviceGuard {};  // never made without CUDA; complete for unique_ptr
}  // namespace cuda
}  // namespace ddph
#endif

namespace ddph {
namespace quantization {
namespace {

constexpr const char* kWho = "quantization";
#ifdef DDPH_HAVE_CUDA
cudaStream_t stream_of(const Where& at) {
  return static_cast<cudaStream_t>(at.stream);
}
#endif

}  // namespace

void zero_bytes(const Where& at, void* p, size_t bytes) {
  if (bytes == 0) return;
  if (!at.cuda()) {
    std::memset(p, 0, bytes);
    return;
  }
#ifdef DDPH_HAVE_CUDA
  DeviceGuard guard(at);
  DDPH_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream_of(at)), kWho);
#else
  refuse_cuda_memory(kWho);
#endif
}

void read_column(const Where& at, const uint8_t* first, size_t stride, size_t rows, uint8_t* out) {
  if (rows == 0) return;
  if (!at.cuda()) {
    for (size_t r = 0; r < rows; ++r) out[r] = first[r * stride];
    return;
  }
#ifdef DDPH_HAVE_CUDA
  DeviceGuard guard(at);
  // One strided copy, unless the stride is past what a 2-D copy's pitch may
  // be (blocks of gigabytes): then a byte at a time.
  if (stride <= size_t(INT_MAX)) {
    DDPH_CUDA_CHECK(
        cudaMemcpy2DAsync(out, 1, first, stride, 1, rows, cudaMemcpyDeviceToHost, stream_of(at)),
        kWho);
  } else {
    for (size_t r = 0; r < rows; ++r)
      DDPH_CUDA_CHECK(
          cudaMemcpyAsync(out + r, first + r * stride, 1, cudaMemcpyDeviceToHost, stream_of(at)),
          kWho);
  }
  DDPH_CUDA_CHECK(cudaStreamSynchronize(stream_of(at)), kWho);
#else
  refuse_cuda_memory(kWho);
#endif
}

DeviceGuard::DeviceGuard(const Where& at) {
  if (!at.cuda()) return;
#ifdef DDPH_HAVE_CUDA
  guard_ = std::make_unique<cuda::DeviceGuard>(at.device.device_id, kWho);
#else
  refuse_cuda_memory(kWho);
#endif
}

DeviceGuard::~DeviceGuard() = default;

}  // namespace quantization
}  // namespace ddph
