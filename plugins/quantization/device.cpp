#include "plugins/quantization/device.h"

#include <climits>
#include <cstring>
#include <utility>

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

#ifdef DDPH_HAVE_CUDA
cudaStream_t stream_of(const Where& at) {
  return static_cast<cudaStream_t>(at.stream);
}
void cuda_ok(cudaError_t error, const char* call) {
  cuda::check(error, "quantization", call);
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
  cuda_ok(cudaMemsetAsync(p, 0, bytes, stream_of(at)), "cudaMemsetAsync");
#else
  refuse_cuda_memory("quantization");
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
    cuda_ok(
        cudaMemcpy2DAsync(out, 1, first, stride, 1, rows, cudaMemcpyDeviceToHost, stream_of(at)),
        "cudaMemcpy2DAsync (device to host)");
  } else {
    for (size_t r = 0; r < rows; ++r)
      cuda_ok(
          cudaMemcpyAsync(out + r, first + r * stride, 1, cudaMemcpyDeviceToHost, stream_of(at)),
          "cudaMemcpyAsync (device to host)");
  }
  cuda_ok(cudaStreamSynchronize(stream_of(at)), "cudaStreamSynchronize");
#else
  refuse_cuda_memory("quantization");
#endif
}

DeviceGuard::DeviceGuard(const Where& at) {
  if (!at.cuda()) return;
#ifdef DDPH_HAVE_CUDA
  guard_ = std::make_unique<cuda::DeviceGuard>(at.device.device_id, "quantization");
#else
  refuse_cuda_memory("quantization");
#endif
}

DeviceGuard::~DeviceGuard() = default;

FloatStore::~FloatStore() {
  release();
}

FloatStore::FloatStore(FloatStore&& other) noexcept
    : host_(std::move(other.host_)),
      device_(other.device_),
      device_id_(other.device_id_),
      n_(other.n_) {
  other.device_ = nullptr;
  other.n_ = 0;
}

FloatStore& FloatStore::operator=(FloatStore&& other) noexcept {
  if (this != &other) {
    release();
    host_ = std::move(other.host_);
    device_ = other.device_;
    device_id_ = other.device_id_;
    n_ = other.n_;
    other.device_ = nullptr;
    other.n_ = 0;
  }
  return *this;
}

void FloatStore::release() {
#ifdef DDPH_HAVE_CUDA
  // cudaFree waits for the work using the memory; it runs only when a
  // length or device changes, or when the hook is destroyed (so it cannot
  // report).
  if (device_ != nullptr) cuda::quietly_on_device(device_id_, [&] { cudaFree(device_); });
#endif
  device_ = nullptr;
  device_id_ = -1;
}

bool FloatStore::in(const Where& at) const {
  return at.cuda() ? device_ != nullptr && device_id_ == at.device.device_id : device_ == nullptr;
}

void FloatStore::zeros(const Where& at, size_t n) {
  if (!at.cuda()) {
    release();
    host_.assign(n, 0.0f);
    n_ = n;
    return;
  }
#ifdef DDPH_HAVE_CUDA
  DeviceGuard guard(at);
  if (!in(at) || n_ != n) {
    release();
    host_.clear();
    host_.shrink_to_fit();
    n_ = 0;
    if (n != 0) {
      cuda_ok(cudaMalloc(reinterpret_cast<void**>(&device_), n * sizeof(float)),
              "cudaMalloc (error-feedback residual)");
      device_id_ = at.device.device_id;
    }
    n_ = n;
  }
  if (n != 0)
    cuda_ok(cudaMemsetAsync(device_, 0, n * sizeof(float), stream_of(at)), "cudaMemsetAsync");
#else
  refuse_cuda_memory("quantization");
#endif
}

void FloatStore::move_to(const Where& at) {
  if (in(at)) return;
  if (!at.cuda()) {
    set_host(to_host());
    return;
  }
#ifdef DDPH_HAVE_CUDA
  const std::vector<float> values = to_host();
  DeviceGuard guard(at);
  zeros(at, values.size());
  // From pageable memory the copy has taken the bytes when it returns, so
  // `values` may go out of scope at once.
  if (!values.empty())
    cuda_ok(cudaMemcpyAsync(device_, values.data(), values.size() * sizeof(float),
                            cudaMemcpyHostToDevice, stream_of(at)),
            "cudaMemcpyAsync (host to device)");
#else
  refuse_cuda_memory("quantization");
#endif
}

void FloatStore::ensure(const Where& at, size_t n) {
  if (!in(at) || n_ != n) zeros(at, n);
}

void FloatStore::set_host(std::vector<float> v) {
  release();
  host_ = std::move(v);
  n_ = host_.size();
}

std::vector<float> FloatStore::to_host() const {
  if (device_ == nullptr) return host_;
  std::vector<float> out(n_);
#ifdef DDPH_HAVE_CUDA
  DeviceGuard guard(Where{DLDevice{kDLCUDA, device_id_}, nullptr});
  cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  cuda_ok(cudaMemcpy(out.data(), device_, n_ * sizeof(float), cudaMemcpyDeviceToHost),
          "cudaMemcpy (device to host)");
#endif
  return out;
}

}  // namespace quantization
}  // namespace ddph
