#include "core/base/device_allocator.h"

#include <atomic>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "core/base/error.h"

namespace ddph {
namespace {

// Which allocator is current on which thread. Not a thread_local: in a
// dlopen'ed plugin that is dynamic TLS, which LeakSanitizer's leak check
// cannot walk once a plugin has been unloaded (its tracer crashes), and
// initial-exec TLS would take static TLS from the host, which may have none
// to spare. Every hook and collective call makes a scope, so while no host
// lends an allocator (the usual case) the count of entries lets both sides
// skip the lock: a thread's own entry is only ever added by that thread.
struct CurrentByThread {
  std::mutex mu;
  std::unordered_map<std::thread::id, const ddph_device_allocator_t*> map;
  std::atomic<size_t> entries{0};  // map.size(), readable without mu
};

CurrentByThread& current_by_thread() {
  static CurrentByThread c;
  return c;
}

const ddph_device_allocator_t* swap_current(const ddph_device_allocator_t* allocator) {
  CurrentByThread& c = current_by_thread();
  if (allocator == nullptr && c.entries.load(std::memory_order_acquire) == 0) return nullptr;
  std::lock_guard<std::mutex> lock(c.mu);
  const auto id = std::this_thread::get_id();
  const auto found = c.map.find(id);
  const ddph_device_allocator_t* previous = found == c.map.end() ? nullptr : found->second;
  if (allocator == nullptr) {
    if (found != c.map.end()) c.map.erase(found);
  } else {
    c.map[id] = allocator;
  }
  c.entries.store(c.map.size(), std::memory_order_release);
  return previous;
}

}  // namespace

const ddph_device_allocator_t* current_device_allocator() {
  CurrentByThread& c = current_by_thread();
  if (c.entries.load(std::memory_order_acquire) == 0) return nullptr;
  std::lock_guard<std::mutex> lock(c.mu);
  const auto found = c.map.find(std::this_thread::get_id());
  return found == c.map.end() ? nullptr : found->second;
}

DeviceAllocatorScope::DeviceAllocatorScope(const ddph_device_allocator_t* allocator)
    : previous_(swap_current(allocator)) {}

DeviceAllocatorScope::~DeviceAllocatorScope() {
  swap_current(previous_);
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
