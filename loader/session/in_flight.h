// How many pipelined buckets (ABI 1.6) a session has started and not
// finished yet. Flush, checkpoints, close and any bucket not started
// pipelined wait for none to be left, which also keeps the host's dones in
// submission order. [thread-safe]
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace ddph {
namespace loader {

class InFlightCount {
 public:
  void enter() {
    std::lock_guard<std::mutex> lock(mu_);
    ++count_;
  }
  // One less; wakes wait() at zero.
  void leave() {
    std::lock_guard<std::mutex> lock(mu_);
    if (--count_ == 0) cv_.notify_all();
  }
  // Blocks until every started bucket has been finished.
  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return count_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t count_ = 0;
};

}  // namespace loader
}  // namespace ddph
