// The host's device allocator (ABI 1.3, ddph_device_allocator_t) as seen by
// code deep inside a plugin: the table trampolines (core/hook/hook.h,
// core/comm/backend.cpp) make the allocator of the hook or communicator
// they call current on the calling thread for the length of the call, and
// the device scratch pool (core/kernels/cuda/scratch_pool.h) takes its
// memory from it when there is one. So no hook passes it around, and memory
// is always given back to the allocator it came from: every call into one
// hook or communicator sees the same allocator.
#pragma once

#include <ddph/ddph.h>

namespace ddph {

// The allocator current on this thread, or NULL (ddphooks' own pool).
const ddph_device_allocator_t* current_device_allocator();

// Makes `allocator` (may be NULL) current on this thread while alive, and
// restores the one before.
class DeviceAllocatorScope {
 public:
  explicit DeviceAllocatorScope(const ddph_device_allocator_t* allocator);
  ~DeviceAllocatorScope();
  DeviceAllocatorScope(const DeviceAllocatorScope&) = delete;
  DeviceAllocatorScope& operator=(const DeviceAllocatorScope&) = delete;

 private:
  const ddph_device_allocator_t* previous_;
};

// The allocator an init struct carries: NULL when its struct_size predates
// ABI 1.3 or none was given. Throws DDPH_INVALID_ARGUMENT for a table that
// is too small or lacks alloc or free, naming `who`.
const ddph_device_allocator_t* device_allocator_of(const ddph_hook_init_t& init, const char* who);
const ddph_device_allocator_t* device_allocator_of(const ddph_comm_init_t& init, const char* who);
// The same check for a table from anywhere (the session options).
const ddph_device_allocator_t* checked_device_allocator(const ddph_device_allocator_t* allocator,
                                                        const char* who);

}  // namespace ddph
