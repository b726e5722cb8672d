#include "plugins/powersgd/step_log.h"

#include <cstdio>

#include "core/base/host.h"

namespace ddph {
namespace powersgd {

StepLog::Timer::~Timer() {
  seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

void StepLog::count_compression(uint64_t numel_before, uint64_t numel_after, DType wire) {
  before_ += numel_before * dtype_size(wire);
  after_ += numel_after * dtype_size(wire);
}

void StepLog::finish_step(uint64_t iter, const char* name) {
  if (before_ > 0) {
    char text[256];
    std::snprintf(text, sizeof text,
                  "step %llu of %s: %llu bytes before compression, %llu after; %.3f ms "
                  "compressing, %.3f ms in collectives",
                  (unsigned long long)iter, name, (unsigned long long)before_,
                  (unsigned long long)after_, 1e3 * (total_s_ - comm_s_), 1e3 * comm_s_);
    log(DDPH_LOG_DEBUG, "powersgd", text);
  }
  before_ = after_ = 0;
  total_s_ = comm_s_ = 0;
}

}  // namespace powersgd
}  // namespace ddph
