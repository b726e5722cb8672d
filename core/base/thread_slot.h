// One pointer per thread, for code that is linked into dlopen'ed plugins.
//
// Not a thread_local: in a dlopen'ed plugin that is dynamic TLS, which
// LeakSanitizer's leak check cannot walk once a plugin has been unloaded (its
// tracer crashes with SIGSEGV), and initial-exec TLS would take static TLS
// from the host, which may have none to spare. A slot is a map from thread
// id to pointer under a mutex. While no thread has set its pointer (the
// usual case for every slot core has) the count of entries lets get() and
// a clearing exchange() skip the lock: a thread's own entry is only ever
// added by that thread, so it cannot appear between the count and the use.
//
// Thread-safe. A slot lives as long as the plugin (a function-local static).
#pragma once

#include <atomic>
#include <cstddef>
#include <mutex>
#include <thread>
#include <unordered_map>

namespace ddph {

template <typename T>
class ThreadSlot {
 public:
  // The calling thread's pointer; nullptr when it set none.
  T* get() const {
    if (entries_.load(std::memory_order_acquire) == 0) return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    const auto found = map_.find(std::this_thread::get_id());
    return found == map_.end() ? nullptr : found->second;
  }

  // Sets the calling thread's pointer (nullptr forgets it) and returns the
  // one it replaces. Throws std::bad_alloc only when setting a new entry.
  T* exchange(T* value) {
    if (value == nullptr && entries_.load(std::memory_order_acquire) == 0) return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    const auto id = std::this_thread::get_id();
    const auto found = map_.find(id);
    T* previous = found == map_.end() ? nullptr : found->second;
    if (value == nullptr) {
      if (found != map_.end()) map_.erase(found);
    } else if (found != map_.end()) {
      found->second = value;
    } else {
      map_.emplace(id, value);
    }
    entries_.store(map_.size(), std::memory_order_release);
    return previous;
  }

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::thread::id, T*> map_;
  std::atomic<size_t> entries_{0};  // map_.size(), readable without mu_
};

}  // namespace ddph
