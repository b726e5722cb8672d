#include "core/base/device_allocator.h"

#include "core/base/error.h"
#include "core/base/thread_slot.h"

namespace ddph {
namespace {

// Which allocator is current on which thread (a ThreadSlot, not a
// thread_local: this file goes into dlopen'ed plugins).
ThreadSlot<const ddph_device_allocator_t>& current_by_thread() {
  static ThreadSlot<const ddph_device_allocator_t> slot;
  return slot;
}

}  // namespace

const ddph_device_allocator_t* current_device_allocator() {
  return current_by_thread().get();
}

DeviceAllocatorScope::DeviceAllocatorScope(const ddph_device_allocator_t* allocator)
    : previous_(current_by_thread().exchange(allocator)) {}

DeviceAllocatorScope::~DeviceAllocatorScope() {
  current_by_thread().exchange(previous_);
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
