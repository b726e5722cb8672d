#include "core/kernels/cuda/scratch_pool.h"

#include <cstdint>
#include <mutex>
#include <vector>

#include "core/device_allocator.h"

namespace ddph {
namespace cuda {
namespace {

// One pool per device, made on first use and kept for the process: hosts
// (PyTorch's caching allocator among them) keep their own pools, and ours
// must not shrink between steps.
cudaError_t pool_of(int device, cudaMemPool_t* out) {
  static std::mutex mu;
  static std::vector<cudaMemPool_t> pools;
  std::lock_guard<std::mutex> lock(mu);
  if (device < 0) return cudaErrorInvalidDevice;
  if (size_t(device) >= pools.size()) pools.resize(size_t(device) + 1, nullptr);
  if (pools[size_t(device)] == nullptr) {
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = device;
    cudaMemPool_t pool = nullptr;
    cudaError_t made = cudaMemPoolCreate(&pool, &props);
    if (made != cudaSuccess) return made;
    uint64_t keep_all = UINT64_MAX;
    made = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all);
    if (made != cudaSuccess) {
      cudaMemPoolDestroy(pool);
      return made;
    }
    pools[size_t(device)] = pool;
  }
  *out = pools[size_t(device)];
  return cudaSuccess;
}

}  // namespace

cudaError_t scratch_alloc(void** p, size_t bytes, int device, cudaStream_t stream) {
  if (const ddph_device_allocator_t* host = current_device_allocator()) {
    *p = host->alloc(host->ctx, bytes, DLDevice{kDLCUDA, device}, stream);
    return *p != nullptr ? cudaSuccess : cudaErrorMemoryAllocation;
  }
  cudaMemPool_t pool = nullptr;
  cudaError_t got = pool_of(device, &pool);
  if (got != cudaSuccess) return got;
  return cudaMallocFromPoolAsync(p, bytes, pool, stream);
}

cudaError_t scratch_free(void* p, cudaStream_t stream) {
  if (p == nullptr) return cudaSuccess;
  if (const ddph_device_allocator_t* host = current_device_allocator()) {
    cudaPointerAttributes attr{};
    const cudaError_t asked = cudaPointerGetAttributes(&attr, p);
    if (asked != cudaSuccess) return asked;
    host->free(host->ctx, p, DLDevice{kDLCUDA, attr.device}, stream);
    return cudaSuccess;
  }
  return cudaFreeAsync(p, stream);
}

}  // namespace cuda
}  // namespace ddph
