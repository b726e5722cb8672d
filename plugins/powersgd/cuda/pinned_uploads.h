// Host-to-device copies that never make the host wait: each goes through a
// pinned staging buffer that stays untouched until the stream has copied
// it. A copy from pageable memory (cudaMemcpyAsync's plain case) waits for
// the stream's earlier work first, which inside a hook would stall the
// host once per fresh Q. Slots are reused once their copy has finished
// (cudaEventQuery, no wait), so there are about as many as copies in
// flight: a step's fresh Qs, one per bucket.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

namespace ddph {
namespace powersgd {

class PinnedUploads {
 public:
  PinnedUploads() = default;
  ~PinnedUploads();
  PinnedUploads(const PinnedUploads&) = delete;
  PinnedUploads& operator=(const PinnedUploads&) = delete;

  // dst (device) = bytes from host, ordered on stream; host may change as
  // soon as this returns. On the current device.
  void upload(void* dst, const void* host, size_t bytes, cudaStream_t stream);

  // Larger copies go from pageable memory instead (see upload()).
  static constexpr size_t kLargest = size_t(4) << 20;

 private:
  struct Slot {
    void* pinned = nullptr;
    size_t capacity = 0;
    cudaEvent_t copied = nullptr;  // recorded after the slot's last copy
  };
  Slot& free_slot(size_t bytes);
  std::vector<Slot> slots_;
};

}  // namespace powersgd
}  // namespace ddph
