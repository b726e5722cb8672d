#include "core/device_allocator.h"

#include "core/error.h"

namespace ddph {
namespace {
thread_local const ddph_device_allocator_t* t_current = nullptr;
}  // namespace

const ddph_device_allocator_t* current_device_allocator() {
  return t_current;
}

DeviceAllocatorScope::DeviceAllocatorScope(const ddph_device_allocator_t* allocator)
    : previous_(t_current) {
  t_current = allocator;
}

DeviceAllocatorScope::~DeviceAllocatorScope() {
  t_current = previous_;
}

const ddph_device_allocator_t* checked_device_allocator(const ddph_device_allocator_t* allocator,
                                                        const char* who) {
  if (allocator == nullptr) return nullptr;
  DDPH_CHECK(allocator->struct_size >= DDPH_DEVICE_ALLOCATOR_SIZE_V1_3, DDPH_INVALID_ARGUMENT,
             who << ": device_allocator->struct_size is " << allocator->struct_size
                 << ", smaller than the v1.3 size " << DDPH_DEVICE_ALLOCATOR_SIZE_V1_3);
  DDPH_CHECK(allocator->alloc != nullptr && allocator->free != nullptr, DDPH_INVALID_ARGUMENT,
             who << ": device_allocator has no " << (allocator->alloc == nullptr ? "alloc" : "free")
                 << " function");
  return allocator;
}

const ddph_device_allocator_t* device_allocator_of(const ddph_hook_init_t& init, const char* who) {
  if (init.struct_size < DDPH_HOOK_INIT_SIZE_V1_3) return nullptr;
  return checked_device_allocator(init.device_allocator, who);
}

const ddph_device_allocator_t* device_allocator_of(const ddph_comm_init_t& init, const char* who) {
  if (init.struct_size < DDPH_COMM_INIT_SIZE_V1_3) return nullptr;
  return checked_device_allocator(init.device_allocator, who);
}

}  // namespace ddph
