// What a powersgd step reports: the bytes before and after compression (in
// the bucket's dtype, as PyTorch's compression statistics count them) and
// the seconds spent in the hook and, of those, in collectives, written as
// one DEBUG log line when the step's last bucket is done. On a GPU both
// times count enqueuing only. Also the bytes the hook sends, for stats().
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "core/base/dtype.h"

namespace ddph {
namespace powersgd {

class StepLog {
 public:
  // Counts the time from construction to destruction into `seconds`.
  class Timer {
   public:
    explicit Timer(double& seconds) : seconds_(seconds), t0_(std::chrono::steady_clock::now()) {}
    ~Timer();
    Timer(const Timer&) = delete;
    Timer& operator=(const Timer&) = delete;

   private:
    double& seconds_;
    std::chrono::steady_clock::time_point t0_;
  };

  // The whole of a bucket's time in the hook.
  Timer in_hook() { return Timer(total_s_); }
  // The time in one collective, which also counts `bytes` sent.
  Timer in_collective(uint64_t bytes) {
    sent_ += bytes;
    return Timer(comm_s_);
  }
  // Counts PyTorch's compression statistics, in elements of the bucket dtype.
  void count_compression(uint64_t numel_before, uint64_t numel_after, DType wire);
  // After the last bucket of step `iter` (1-based) of hook `name`: the DEBUG
  // line, if the step compressed anything; the step's counts restart.
  void finish_step(uint64_t iter, const char* name);
  // Every byte the collectives sent so far.
  uint64_t bytes_sent() const { return sent_.load(); }

 private:
  uint64_t before_ = 0, after_ = 0;
  double total_s_ = 0, comm_s_ = 0;
  std::atomic<uint64_t> sent_{0};
};

}  // namespace powersgd
}  // namespace ddph
