// A link that changes while the ranks run: `ddph lab --link
// 400mbit@0s,40mbit@1.5s` (tool/lab/net_lab.h parses it). A thread sleeps
// until each change is due and then changes every rank's rate. It forks
// `tc` while the main thread forks the ranks: glibc's fork leaves malloc and
// stdio usable in either child, and the thread holds no other lock.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tool/lab/net_lab.h"

namespace ddph::tool {

class LinkScheduler {
 public:
  using Clock = std::chrono::steady_clock;

  // A change as it was made, or tried.
  struct Made {
    double at_s = 0;             // when it took effect on every rank, from start
    double rate_bits_per_s = 0;  // the new rate
    std::string error;           // empty: made; else why it failed (the schedule then stops)
  };

  // Makes lab.link().changes at their times from start (the ranks' clock
  // zero), calling report(made) after each, on a thread of its own, until
  // the schedule ends, one change fails or stop() is called.
  LinkScheduler(const NetLab& lab, Clock::time_point start,
                std::function<void(const Made&)> report);
  ~LinkScheduler();  // stop()
  LinkScheduler(const LinkScheduler&) = delete;
  LinkScheduler& operator=(const LinkScheduler&) = delete;

  // Ends the thread (a change in progress completes; those not yet due are
  // not made) and returns what it did.
  std::vector<Made> stop();

 private:
  void loop();

  const NetLab& lab_;
  const Clock::time_point start_;
  const std::function<void(const Made&)> report_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::vector<Made> made_;
  std::thread thread_;  // last: it starts once the rest is set
};

}  // namespace ddph::tool
