#include "core/memory/resident_floats.h"

#include <algorithm>
#include <vector>

#ifdef DDPH_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "core/kernels/cuda/cuda_check.h"
#include "core/kernels/cuda/device_guard.h"
#endif

namespace ddph {
namespace {

// The device memory the arrays use: the only code of the kit that differs
// between builds with and without CUDA. Each call makes the memory's GPU
// current for its length.
#ifdef DDPH_HAVE_CUDA
cudaStream_t stream_of(const Where& at) {
  return static_cast<cudaStream_t>(at.stream);
}

float* device_allocate(const Where& at, size_t n, const char* who) {
  cuda::DeviceGuard on(at.device.device_id, who);
  void* p = nullptr;
  DDPH_CUDA_CHECK(cudaMalloc(&p, n * sizeof(float)), who);
  return static_cast<float*>(p);
}

// cudaFree waits for the work still using the memory. It runs only when a
// length or device changes, or when the array goes (and cannot report).
void device_free(int device, float* p) noexcept {
  cuda::quietly_on_device(device, [&] { (void)cudaFree(p); });
}

void device_zero(const Where& at, float* p, size_t n, const char* who) {
  cuda::DeviceGuard on(at.device.device_id, who);
  DDPH_CUDA_CHECK(cudaMemsetAsync(p, 0, n * sizeof(float), stream_of(at)), who);
}

// From pageable memory the copy has taken the bytes when it returns (CUDA's
// API sync behavior), so the caller may change them at once.
void device_upload(const Where& at, float* p, const float* host, size_t n, const char* who) {
  cuda::DeviceGuard on(at.device.device_id, who);
  DDPH_CUDA_CHECK(
      cudaMemcpyAsync(p, host, n * sizeof(float), cudaMemcpyHostToDevice, stream_of(at)), who);
}

void device_download(int device, const float* p, float* host, size_t n, const char* who) {
  cuda::DeviceGuard on(device, who);
  DDPH_CUDA_CHECK(cudaDeviceSynchronize(), who);
  DDPH_CUDA_CHECK(cudaMemcpy(host, p, n * sizeof(float), cudaMemcpyDeviceToHost), who);
}
#else
// No device memory is ever made, so there is none to free or read.
float* device_allocate(const Where&, size_t, const char* who) {
  refuse_cuda_memory(who);
}
void device_free(int, float*) noexcept {}
void device_zero(const Where&, float*, size_t, const char* who) {
  refuse_cuda_memory(who);
}
void device_upload(const Where&, float*, const float*, size_t, const char* who) {
  refuse_cuda_memory(who);
}
void device_download(int, const float*, float*, size_t, const char* who) {
  refuse_cuda_memory(who);
}
#endif

}  // namespace

void add_host_floats(const Where& at, DType dtype, void* dst, const float* add, size_t n,
                     const char* who) {
  if (n == 0) return;
  if (!at.cuda() && dtype == DType::F32) {
    float* x = static_cast<float*>(dst);
    for (size_t i = 0; i < n; ++i) x[i] += add[i];
    return;
  }
  // The values as float32 on the host (through a float32 copy in at's
  // memory on a GPU), the sum there, and back.
  ResidentFloats staged(who);
  std::vector<float> sum(n);
  if (at.cuda()) {
    staged.zeros(at, n);
    cast_into(at, dtype, dst, DType::F32, staged.data(), n);
    staged.download(sum.data());
  } else {
    cast_into(at, dtype, dst, DType::F32, sum.data(), n);
  }
  for (size_t i = 0; i < n; ++i) sum[i] += add[i];
  if (!at.cuda()) return cast_into(at, DType::F32, sum.data(), dtype, dst, n);
  staged.upload(at, sum.data(), n);
  cast_into(at, DType::F32, staged.data(), dtype, dst, n);
}

ResidentFloats::~ResidentFloats() {
  release();
}

ResidentFloats::ResidentFloats(ResidentFloats&& other) noexcept
    : who_(other.who_),
      host_(std::move(other.host_)),
      device_(other.device_),
      device_id_(other.device_id_),
      n_(other.n_) {
  other.host_.clear();
  other.device_ = nullptr;
  other.device_id_ = -1;
  other.n_ = 0;
}

ResidentFloats& ResidentFloats::operator=(ResidentFloats&& other) noexcept {
  if (this != &other) {
    release();
    who_ = other.who_;
    host_ = std::move(other.host_);
    device_ = other.device_;
    device_id_ = other.device_id_;
    n_ = other.n_;
    other.host_.clear();
    other.device_ = nullptr;
    other.device_id_ = -1;
    other.n_ = 0;
  }
  return *this;
}

void ResidentFloats::release() noexcept {
  if (device_ != nullptr) device_free(device_id_, device_);
  device_ = nullptr;
  device_id_ = -1;
  host_.clear();
  host_.shrink_to_fit();
  n_ = 0;
}

bool ResidentFloats::in(const Where& at) const {
  return at.cuda() ? device_ != nullptr && device_id_ == at.device.device_id : device_ == nullptr;
}

void ResidentFloats::zeros(const Where& at, size_t n) {
  if (!at.cuda()) {
    release();
    host_.assign(n, 0.0f);
    n_ = n;
    return;
  }
  place_on_gpu(at, n);
  if (n != 0) device_zero(at, device_, n, who_);
}

void ResidentFloats::fit(const Where& at, size_t n) {
  if (!in(at) || n_ != n) zeros(at, n);
}

void ResidentFloats::move_to(const Where& at) {
  if (in(at)) return;
  std::vector<float> values = to_host();
  if (!at.cuda()) {
    set_host(std::move(values));
    return;
  }
  upload(at, values.data(), values.size());
}

void ResidentFloats::upload(const Where& at, const float* host, size_t n) {
  if (!at.cuda()) {
    std::vector<float> values(host, host + n);
    set_host(std::move(values));
    return;
  }
  place_on_gpu(at, n);
  if (n != 0) device_upload(at, device_, host, n, who_);
}

void ResidentFloats::place_on_gpu(const Where& at, size_t n) {
  if (in(at) && n_ == n) return;
  // Memory of another length on the same GPU goes first, so that the GPU
  // never holds both. Memory elsewhere stays until the new memory is made:
  // a failed move leaves the floats where they were.
  if (device_ != nullptr && device_id_ == at.device.device_id) release();
  float* fresh = n == 0 ? nullptr : device_allocate(at, n, who_);
  release();
  device_ = fresh;
  device_id_ = fresh == nullptr ? -1 : at.device.device_id;
  n_ = n;
}

void ResidentFloats::set_host(std::vector<float> v) {
  release();
  host_ = std::move(v);
  n_ = host_.size();
}

std::vector<float> ResidentFloats::to_host() const {
  if (device_ == nullptr) return host_;
  std::vector<float> out(n_);
  download(out.data());
  return out;
}

void ResidentFloats::download(float* host) const {
  if (device_ == nullptr) {
    std::copy(host_.begin(), host_.end(), host);
    return;
  }
  device_download(device_id_, device_, host, n_, who_);
}

}  // namespace ddph
