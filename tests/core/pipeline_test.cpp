// core/comm/pipeline.h: a slice's stages run in order, the next slice is
// computed while one is in transfer, and the first failure stops the
// pipeline and reaches the caller once no stage runs any more; run_beside
// computes while it transfers and waits for both.
#include "core/comm/pipeline.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

// Stage events in the order they began, from both threads.
class Log {
 public:
  void add(const std::string& e) {
    std::lock_guard<std::mutex> lock(m_);
    events_.push_back(e);
    cv_.notify_all();
  }
  // Waits up to 10 s for event e to be logged.
  bool wait_for(const std::string& e) {
    std::unique_lock<std::mutex> lock(m_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return has(e); });
  }
  std::vector<std::string> events() {
    std::lock_guard<std::mutex> lock(m_);
    return events_;
  }
  size_t position(const std::string& e) {
    std::lock_guard<std::mutex> lock(m_);
    for (size_t i = 0; i < events_.size(); ++i)
      if (events_[i] == e) return i;
    return size_t(-1);
  }

 private:
  bool has(const std::string& e) const {
    for (const std::string& x : events_)
      if (x == e) return true;
    return false;
  }
  std::mutex m_;
  std::condition_variable cv_;
  std::vector<std::string> events_;
};

ddph::PipelineStages logged(Log& log, std::thread::id* caller) {
  ddph::PipelineStages s;
  s.before = [&log](size_t i) { log.add("b" + std::to_string(i)); };
  s.transfer = [&log, caller](size_t i) {
    EXPECT_EQ(std::this_thread::get_id(), *caller) << "transfer " << i << " left the caller";
    log.add("t" + std::to_string(i));
  };
  s.after = [&log](size_t i) { log.add("a" + std::to_string(i)); };
  return s;
}

TEST(Pipeline, EachSliceRunsBeforeTransferAfterInOrderAndTransfersStayOnTheCaller) {
  for (size_t count : {1, 2, 5}) {
    Log log;
    std::thread::id caller = std::this_thread::get_id();
    ddph::run_pipelined(count, logged(log, &caller));
    const std::vector<std::string> ev = log.events();
    ASSERT_EQ(ev.size(), 3 * count);
    for (size_t i = 0; i < count; ++i) {
      const std::string n = std::to_string(i);
      EXPECT_LT(log.position("b" + n), log.position("t" + n)) << "slice " << i;
      EXPECT_LT(log.position("t" + n), log.position("a" + n)) << "slice " << i;
      if (i + 1 < count) {
        const std::string next = std::to_string(i + 1);
        EXPECT_LT(log.position("t" + n), log.position("t" + next)) << "transfers out of order";
        // The helper computes the next slice before it uses this one.
        EXPECT_LT(log.position("b" + next), log.position("a" + n)) << "slice " << i;
      }
    }
  }
}

TEST(Pipeline, TheNextSliceIsComputedWhileOneIsInTransfer) {
  // Transfer 0 returns only once before(1) has begun: run one after the
  // other, the pipeline would wait 10 s and fail.
  Log log;
  bool overlapped = false;
  ddph::PipelineStages s;
  s.before = [&](size_t i) { log.add("b" + std::to_string(i)); };
  s.transfer = [&](size_t i) {
    if (i == 0) overlapped = log.wait_for("b1");
  };
  ddph::run_pipelined(3, s);
  EXPECT_TRUE(overlapped) << "before(1) did not run during transfer(0)";
}

TEST(Pipeline, AFailingStageStopsTheRestAndReachesTheCaller) {
  // Stage `failing` throws at slice 1 of 4. What must never run: every
  // stage that waits on the failed one. (A transfer already under way on
  // the caller when a helper stage fails may finish: transfer 2 after
  // after(1), since before(2) ran first.)
  struct Case {
    const char* failing;
    std::vector<std::string> never;
  };
  const Case cases[] = {
      {"before", {"b2", "b3", "t1", "t2", "t3", "a0", "a1", "a2", "a3"}},
      {"transfer", {"b3", "t2", "t3", "a1", "a2", "a3"}},
      {"after", {"b3", "t3", "a2", "a3"}},
  };
  for (const Case& c : cases) {
    Log log;
    std::thread::id caller = std::this_thread::get_id();
    ddph::PipelineStages s = logged(log, &caller);
    const std::string which = c.failing;
    std::function<void(size_t)>& f = which == "before"     ? s.before
                                     : which == "transfer" ? s.transfer
                                                           : s.after;
    const std::function<void(size_t)> inner = f;
    f = [inner, which](size_t i) {
      if (i == 1) throw std::runtime_error(which + " 1 failed");
      inner(i);
    };
    try {
      ddph::run_pipelined(4, s);
      ADD_FAILURE() << which << ": no exception";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), which + " 1 failed");
    }
    const std::vector<std::string> ev = log.events();
    for (const std::string& e : c.never)
      EXPECT_EQ(log.position(e), size_t(-1)) << which << " failed, yet " << e << " ran";
    // No stage runs after run_pipelined threw.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(log.events().size(), ev.size()) << which << ": a stage ran after the throw";
  }
}

TEST(Beside, ComputeRunsWhileTheTransferRunsAndBothFinish) {
  // The transfer returns only once compute has begun: run one after the
  // other, it would wait 10 s and fail.
  Log log;
  bool overlapped = false, computed = false;
  std::thread::id caller = std::this_thread::get_id(), transfer_thread;
  ddph::run_beside(
      [&] {
        log.add("compute");
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        computed = true;
      },
      [&] {
        transfer_thread = std::this_thread::get_id();
        overlapped = log.wait_for("compute");
      });
  EXPECT_TRUE(overlapped) << "compute did not run during the transfer";
  EXPECT_TRUE(computed) << "run_beside returned before compute ended";
  EXPECT_EQ(transfer_thread, caller);
}

TEST(Beside, EitherFailureReachesTheCallerAfterBothEnded) {
  bool computed = false;
  try {
    ddph::run_beside(
        [&] {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          computed = true;
        },
        [] { throw std::runtime_error("transfer failed"); });
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "transfer failed");
  }
  EXPECT_TRUE(computed) << "the exception came before compute ended";
  try {
    ddph::run_beside([] { throw std::runtime_error("compute failed"); }, [] {});
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "compute failed");
  }
}

TEST(Pipeline, NoSliceDoesNothing) {
  bool ran = false;
  ddph::PipelineStages s;
  s.transfer = [&](size_t) { ran = true; };
  ddph::run_pipelined(0, s);
  EXPECT_FALSE(ran);
}

}  // namespace
