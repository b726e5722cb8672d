#include "plugins/powersgd/cuda/pinned_uploads.h"

#include <cstring>

#include "core/kernels/cuda/cuda_check.h"

namespace ddph {
namespace powersgd {
namespace {

constexpr const char* kWho = "powersgd";

}  // namespace

PinnedUploads::~PinnedUploads() {
  for (Slot& s : slots_) {
    if (s.copied != nullptr) {
      cudaEventSynchronize(s.copied);  // the copy still reads the buffer
      cudaEventDestroy(s.copied);
    }
    cudaFreeHost(s.pinned);
  }
}

PinnedUploads::Slot& PinnedUploads::free_slot(size_t bytes) {
  Slot* idle = nullptr;
  for (Slot& s : slots_) {
    const cudaError_t state = cudaEventQuery(s.copied);
    if (state == cudaErrorNotReady) continue;
    DDPH_CUDA_CHECK(state, kWho);
    if (s.capacity >= bytes) return s;
    if (idle == nullptr) idle = &s;
  }
  if (idle == nullptr) {
    Slot fresh;
    DDPH_CUDA_CHECK(cudaEventCreateWithFlags(&fresh.copied, cudaEventDisableTiming), kWho);
    slots_.push_back(fresh);
    idle = &slots_.back();
  }
  // An idle slot too small for this copy grows (its copy has finished).
  if (idle->pinned != nullptr) DDPH_CUDA_CHECK(cudaFreeHost(idle->pinned), kWho);
  idle->pinned = nullptr;
  idle->capacity = 0;
  DDPH_CUDA_CHECK(cudaMallocHost(&idle->pinned, bytes), kWho);
  idle->capacity = bytes;
  return *idle;
}

void PinnedUploads::upload(void* dst, const void* host, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return;
  if (bytes > kLargest) {
    // Only a loaded checkpoint's error buffers are this large, once each:
    // not worth pinned memory of the model's size. From pageable memory
    // the copy is staged before this returns (after a wait for the stream).
    DDPH_CUDA_CHECK(cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, stream), kWho);
    return;
  }
  Slot& s = free_slot(bytes);
  std::memcpy(s.pinned, host, bytes);
  DDPH_CUDA_CHECK(cudaMemcpyAsync(dst, s.pinned, bytes, cudaMemcpyHostToDevice, stream), kWho);
  DDPH_CUDA_CHECK(cudaEventRecord(s.copied, stream), kWho);
}

}  // namespace powersgd
}  // namespace ddph
