// The array kernels on whatever memory a bucket is in: the CPU kernels for
// host memory; for CUDA memory their CUDA twins (core/kernels/cuda),
// enqueued on the bucket's stream with no host wait. In a build without CUDA
// a CUDA buffer is DDPH_UNSUPPORTED. Hooks that use only these (and the
// communicator) can declare kRunsOnCuda.
#pragma once

#include <ddph/ddph.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "core/base/dtype.h"

namespace ddph {
namespace cuda {
class DeviceGuard;
}

// Where a kernel runs: the device of the memory, and the stream for CUDA.
struct Where {
  DLDevice device;
  void* stream;
  bool cuda() const { return device.device_type == kDLCUDA; }
};
Where where_of(const ddph_bucket_t& bucket);

// A build without CUDA refuses CUDA memory with this one message wherever it
// meets it: DDPH_UNSUPPORTED, "<who>: the buffer is CUDA memory, but this
// build of ddphooks has no CUDA (DDPH_WITH_CUDA was off; docs/cuda.md)".
[[noreturn]] void refuse_cuda_memory(const char* who);
// refuse_cuda_memory(who) when `at` is CUDA memory and this build has no
// CUDA; nothing otherwise. For hooks that must refuse before sending
// anything, on every rank alike, rather than fail midway.
void require_cuda_build(const Where& at, const char* who);

// Makes the GPU of at's memory current for a scope, whatever the calling
// thread had, and restores the caller's at its end (cuda::DeviceGuard,
// behind a header that needs no CUDA). Nothing for host memory; `who` names
// the caller in the error of a failed switch.
class DeviceScope {
 public:
  DeviceScope(const Where& at, const char* who);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  std::unique_ptr<cuda::DeviceGuard> guard_;
};

// Zeroes `bytes` at p; on a GPU enqueued on at's stream, with no host wait.
void zero_bytes(const Where& at, void* p, size_t bytes, const char* who);
// out[r] = first[r * stride] for r < rows (out on the host), once the work
// enqueued so far is done: on a GPU one strided copy and a wait for at's
// stream. A failed CUDA call is DDPH_INTERNAL naming `who` and the call.
void read_strided_bytes(const Where& at, const uint8_t* first, size_t stride, size_t rows,
                        uint8_t* out, const char* who);

// Orders the work enqueued on later's stream after all that was enqueued on
// earlier's so far, with no host wait (an event between the two streams).
// Nothing when both are the same stream, or for host memory. A failed CUDA
// call is DDPH_INTERNAL naming `who` and the call.
void order_after(const Where& later, const Where& earlier, const char* who);

// As in divide.h and cast.h.
void divide_inplace(const Where& at, DType dtype, void* data, size_t n, int64_t w);
void cast_into(const Where& at, DType from, const void* src, DType to, void* dst, size_t n);
void cast_div_into(const Where& at, DType from, const void* src, DType low, uint16_t* dst, size_t n,
                   int64_t w);

// Scratch kept by a hook: on the host one buffer per bucket index, grown as
// needed and reused every step; on a GPU, pool memory leased for one run.
class ScratchBuffers {
 public:
  // Frees the run's device memory, ordered on its stream, when it ends.
  class Lease {
   public:
    Lease(void* data, const Where& at) : data_(data), at_(at) {}
    Lease(Lease&& other) noexcept : data_(other.data_), at_(other.at_) { other.data_ = nullptr; }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease();
    void* data() const { return data_; }

   private:
    void* data_;
    Where at_;
  };

  // bytes of scratch for bucket `index` in at's memory.
  Lease get(const Where& at, uint64_t index, size_t bytes);

 private:
  std::unordered_map<uint64_t, std::vector<unsigned char>> host_;
};

}  // namespace ddph
