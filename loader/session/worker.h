// One background thread that runs tasks one at a time, in the order they
// were posted. The session runs buckets (and checkpointing, which must not
// overlap a bucket) on it.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace ddph {
namespace loader {

class Worker {
 public:
  using Task = std::function<void()>;  // must not throw

  Worker();
  // Runs every task still queued, then joins.
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Queues task after every task posted before. [thread-safe], also while
  // the task it posts may lead to this Worker's destruction: post touches
  // nothing of it once the task can run.
  void post(Task task);
  // Blocks until every task posted before this call has finished. Must not be
  // called from a task. [thread-safe]
  void wait_idle();
  // Posts task and waits for it to finish.
  void run_and_wait(Task task);
  bool on_worker_thread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable wake_, idle_;
  std::deque<Task> queue_;
  bool running_task_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace loader
}  // namespace ddph
