#include "core/kernels/cuda/scratch_pool.h"

#include <cstdint>
#include <mutex>
#include <vector>

#include "core/base/device_allocator.h"

namespace ddph {
namespace cuda {
namespace {

// One pool per device, made on first use and kept while this plugin is
// loaded: hosts (PyTorch's caching allocator among them) keep their own
// pools, and ours must not shrink between steps. Each plugin links its own
// copy of this file, so the pools go back to the driver when the plugin is
// unloaded (the loader unloads a plugin when the last session using it
// closes) instead of staying reserved for the rest of the process.
struct Pools {
  std::mutex mu;
  std::vector<cudaMemPool_t> by_device;

  ~Pools() {
    // Frees still pending on a stream complete first: a destroyed pool's
    // memory goes back once nothing uses it. Errors are dropped (at process
    // exit the runtime may already be gone).
    for (cudaMemPool_t pool : by_device)
      if (pool != nullptr) {
        cudaMemPoolTrimTo(pool, 0);
        cudaMemPoolDestroy(pool);
      }
    (void)cudaGetLastError();
  }
};

cudaError_t pool_of(int device, cudaMemPool_t* out) {
  static Pools pools;
  std::lock_guard<std::mutex> lock(pools.mu);
  std::vector<cudaMemPool_t>& by_device = pools.by_device;
  if (device < 0) return cudaErrorInvalidDevice;
  if (size_t(device) >= by_device.size()) by_device.resize(size_t(device) + 1, nullptr);
  if (by_device[size_t(device)] == nullptr) {
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
    by_device[size_t(device)] = pool;
  }
  *out = by_device[size_t(device)];
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
