#include "loader/session/worker.h"

namespace ddph {
namespace loader {

Worker::Worker() : thread_([this] { loop(); }) {}

Worker::~Worker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

// Notifies under the lock: the task may end the Worker's owner (a
// session's last pipelined bucket lets close destroy the finisher), so
// nothing of the Worker may be touched once the lock is released.
void Worker::post(Task task) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_.push_back(std::move(task));
  wake_.notify_one();
}

void Worker::wait_idle() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_.wait(lock, [&] { return queue_.empty() && !running_task_; });
}

void Worker::run_and_wait(Task task) {
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  post([&] {
    task();
    std::lock_guard<std::mutex> lock(mu);
    finished = true;
    cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return finished; });
}

void Worker::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) break;  // stopping, and everything has run
    Task task = std::move(queue_.front());
    queue_.pop_front();
    running_task_ = true;
    lock.unlock();
    task();
    lock.lock();
    running_task_ = false;
    if (queue_.empty()) idle_.notify_all();
  }
  idle_.notify_all();
}

}  // namespace loader
}  // namespace ddph
