// LowRankOps on one GPU: LowRankCuda's cuBLAS/cuSOLVER products and
// kernels, plus the copies, all enqueued on the bucket's stream. State
// arrays (P, Q, errors) are core's resident_floats.h (resident_factors.h);
// per-step scratch comes from core's stream-ordered pool (the hooks'
// ScratchBuffers), so a warm step allocates nothing.
#include <cuda_runtime_api.h>

#include <memory>

#include "core/base/error.h"
#include "core/kernels/cuda/cuda_check.h"
#include "core/kernels/cuda/device_guard.h"
#include "plugins/powersgd/cuda/lowrank_cuda.h"
#include "plugins/powersgd/cuda/pinned_uploads.h"
#include "plugins/powersgd/math_ops.h"

namespace ddph {
namespace powersgd {
namespace {

constexpr const char* kWho = "powersgd";

// cuda::DeviceGuard for the destructor, which must not throw:
// best effort.
class OnDeviceQuietly {
 public:
  explicit OnDeviceQuietly(int device) {
    switched_ = cudaGetDevice(&previous_) == cudaSuccess && previous_ != device &&
                cudaSetDevice(device) == cudaSuccess;
  }
  ~OnDeviceQuietly() {
    if (switched_) cudaSetDevice(previous_);
  }
  OnDeviceQuietly(const OnDeviceQuietly&) = delete;
  OnDeviceQuietly& operator=(const OnDeviceQuietly&) = delete;

 private:
  int previous_ = 0;
  bool switched_ = false;
};

class CudaOps final : public LowRankOps {
 public:
  explicit CudaOps(int device) : device_(device) {
    // Asked first, so that a host without a driver or GPU hears so
    // (DDPH_UNSUPPORTED) rather than a cuBLAS status.
    int count = 0;
    DDPH_CUDA_CHECK(cudaGetDeviceCount(&count), kWho);
    DDPH_CHECK(
        device >= 0 && device < count, DDPH_INVALID_ARGUMENT,
        "powersgd: the bucket is on CUDA device " << device << ", but this host has " << count);
    cuda::DeviceGuard on(device_, kWho);
    math_ = std::make_unique<LowRankCuda>();
  }
  ~CudaOps() override {
    OnDeviceQuietly on(device_);
    math_.reset();
    uploads_.reset();
  }

  void set_stream(void* stream) override {
    stream_ = static_cast<cudaStream_t>(stream);
    cuda::DeviceGuard on(device_, kWho);
    math_->set_stream(stream);
  }
  void add(float* a, const float* b, size_t n) override { on_device(&LowRankCuda::add, a, b, n); }
  void subtract(float* a, const float* b, size_t n) override {
    on_device(&LowRankCuda::subtract, a, b, n);
  }
  void scaled_copy(float* dst, const float* src, size_t n, float factor) override {
    on_device(&LowRankCuda::scaled_copy, dst, src, n, factor);
  }
  void flag_unusable(const float* x, size_t n, float limit, float* flag) override {
    on_device(&LowRankCuda::flag_unusable, x, n, limit, flag);
  }
  bool flag_set(const float* flag) override {
    cuda::DeviceGuard on(device_, kWho);
    // Only this stream's work: the step's, not other hooks'.
    float v = 0.0f;
    DDPH_CUDA_CHECK(cudaMemcpyAsync(&v, flag, sizeof v, cudaMemcpyDeviceToHost, stream_), kWho);
    DDPH_CUDA_CHECK(cudaStreamSynchronize(stream_), kWho);
    return v != 0.0f;
  }
  void poison_unusable(float* x, size_t n, float limit) override {
    on_device(&LowRankCuda::poison_unusable, x, n, limit);
  }
  void saturate_overflow(float* m, const float* data, size_t n) override {
    on_device(&LowRankCuda::saturate_overflow, m, data, n);
  }
  void fallback_error(float* err, const float* mean, size_t n) override {
    on_device(&LowRankCuda::fallback_error, err, mean, n);
  }
  void copy(float* dst, const float* src, size_t n) override {
    if (n == 0) return;
    cuda::DeviceGuard on(device_, kWho);
    DDPH_CUDA_CHECK(cudaMemcpyAsync(dst, src, n * sizeof(float), cudaMemcpyDeviceToDevice, stream_),
                    kWho);
  }
  void zero(float* dst, size_t n) override {
    if (n == 0) return;
    cuda::DeviceGuard on(device_, kWho);
    DDPH_CUDA_CHECK(cudaMemsetAsync(dst, 0, n * sizeof(float), stream_), kWho);
  }
  void multiply_mq(const float* data, float* err, int rows, int cols, const float* q, int r,
                   float* p) override {
    cuda::DeviceGuard on(device_, kWho);
    const float* m = data;
    if (err != nullptr) {  // the CPU fuses this add into the product's pass
      math_->add(err, data, size_t(rows) * size_t(cols));
      m = err;
    }
    math_->multiply_mq(m, rows, cols, q, r, p);
  }
  void multiply_mtp(const float* m, int rows, int cols, const float* p, int r, float* q) override {
    on_device(&LowRankCuda::multiply_mtp, m, rows, cols, p, r, q);
  }
  void reconstruct(const float* p, const float* q, int rows, int cols, int r, float* out,
                   float* before) override {
    on_device(&LowRankCuda::reconstruct, p, q, rows, cols, r, out, before);
  }
  void orthogonalize(float* a, int batch, int rows, int cols, float eps) override {
    on_device(&LowRankCuda::orthogonalize, a, batch, rows, cols, eps);
  }
  void upload(float* dst, const float* host, size_t n) override {
    if (n == 0) return;
    cuda::DeviceGuard on(device_, kWho);
    uploads_->upload(dst, host, n * sizeof(float), stream_);
  }
  void download(float* host, const float* src, size_t n) override {
    if (n == 0) return;
    cuda::DeviceGuard on(device_, kWho);
    // save_state's host wait, for every step enqueued so far: the device,
    // not the last bucket's stream, which the host may have destroyed since.
    DDPH_CUDA_CHECK(cudaDeviceSynchronize(), kWho);
    DDPH_CUDA_CHECK(cudaMemcpy(host, src, n * sizeof(float), cudaMemcpyDeviceToHost), kWho);
  }

 private:
  // LowRankCuda's op, with this device current for its cuBLAS calls and launches.
  template <class... Params, class... Args>
  void on_device(void (LowRankCuda::*op)(Params...), Args... args) {
    cuda::DeviceGuard on(device_, kWho);
    (math_.get()->*op)(args...);
  }

  int device_;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<LowRankCuda> math_;
  std::unique_ptr<PinnedUploads> uploads_ = std::make_unique<PinnedUploads>();
};

}  // namespace

std::unique_ptr<LowRankOps> make_cuda_ops(int device) {
  return std::make_unique<CudaOps>(device);
}

}  // namespace powersgd
}  // namespace ddph
