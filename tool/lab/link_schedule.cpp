#include "tool/lab/link_schedule.h"

#include <exception>
#include <utility>

namespace ddph::tool {

LinkScheduler::LinkScheduler(const NetLab& lab, Clock::time_point start,
                             std::function<void(const Made&)> report)
    : lab_(lab), start_(start), report_(std::move(report)), thread_([this] { loop(); }) {}

LinkScheduler::~LinkScheduler() {
  stop();
}

std::vector<LinkScheduler::Made> LinkScheduler::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  return made_;
}

void LinkScheduler::loop() {
  for (const LinkChange& change : lab_.link().changes) {
    const auto due = start_ + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(change.at_s));
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (wake_.wait_until(lock, due, [this] { return stopping_; })) return;
    }
    // The tc runs outside the lock, so stop() waits for at most one change.
    Made made;
    made.rate_bits_per_s = change.rate_bits_per_s;
    try {
      lab_.change_rate(change.rate_bits_per_s);
    } catch (const std::exception& e) {
      made.error = e.what();
    }
    made.at_s = std::chrono::duration<double>(Clock::now() - start_).count();
    made_.push_back(made);
    report_(made);
    if (!made.error.empty()) return;
  }
}

}  // namespace ddph::tool
