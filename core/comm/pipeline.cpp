#include "core/comm/pipeline.h"

#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include "core/base/phase_span.h"

namespace ddph {
namespace {

// What the two threads share: how far each got, and whether to stop.
class Progress {
 public:
  void computed(size_t n) { set(computed_, n); }
  void transferred(size_t n) { set(transferred_, n); }
  void fail(std::exception_ptr e) {
    std::lock_guard<std::mutex> lock(m_);
    if (!error_) error_ = e;
    stop_ = true;
    cv_.notify_all();
  }
  // Wait until at least n slices are computed (transferred); false when
  // the pipeline stopped instead.
  bool wait_computed(size_t n) { return wait(computed_, n); }
  bool wait_transferred(size_t n) { return wait(transferred_, n); }
  std::exception_ptr error() {
    std::lock_guard<std::mutex> lock(m_);
    return error_;
  }

 private:
  void set(size_t& field, size_t n) {
    std::lock_guard<std::mutex> lock(m_);
    field = n;
    cv_.notify_all();
  }
  bool wait(const size_t& field, size_t n) {
    std::unique_lock<std::mutex> lock(m_);
    cv_.wait(lock, [&] { return stop_ || field >= n; });
    return !stop_;
  }

  std::mutex m_;
  std::condition_variable cv_;
  size_t computed_ = 0, transferred_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

void helper(size_t count, const PipelineStages& s, Progress& p) {
  try {
    for (size_t i = 0; i < count; ++i) {
      if (s.before) s.before(i);
      p.computed(i + 1);
      // Slice i is computed and slice i - 1 is on the wire or done: use it.
      if (i == 0) continue;
      if (!p.wait_transferred(i)) return;
      if (s.after) s.after(i - 1);
    }
    if (!p.wait_transferred(count)) return;
    if (s.after) s.after(count - 1);
  } catch (...) {
    p.fail(std::current_exception());
  }
}

}  // namespace

void run_pipelined(size_t count, const PipelineStages& s) {
  if (count == 0) return;
  if (count == 1) {
    if (s.before) s.before(0);
    s.transfer(0);
    if (s.after) s.after(0);
    return;
  }
  Progress p;
  // The helper's phases (compress, decompress) are reported from here once
  // it is joined: the loader knows the bucket by this thread only.
  DeferredSpans helper_spans;
  std::thread side([&] {
    DeferredSpans::Collect collect(helper_spans);
    helper(count, s, p);
  });
  for (size_t i = 0; i < count; ++i) {
    if (!p.wait_computed(i + 1)) break;
    try {
      s.transfer(i);
    } catch (...) {
      p.fail(std::current_exception());
      break;
    }
    p.transferred(i + 1);
  }
  side.join();
  helper_spans.report();
  if (std::exception_ptr e = p.error()) std::rethrow_exception(e);
}

void run_beside(const std::function<void()>& compute, const std::function<void()>& transfer) {
  std::exception_ptr computed;
  DeferredSpans helper_spans;  // as run_pipelined's
  std::thread side([&] {
    DeferredSpans::Collect collect(helper_spans);
    try {
      compute();
    } catch (...) {
      computed = std::current_exception();
    }
  });
  std::exception_ptr transferred;
  try {
    transfer();
  } catch (...) {
    transferred = std::current_exception();
  }
  side.join();
  helper_spans.report();
  if (transferred) std::rethrow_exception(transferred);
  if (computed) std::rethrow_exception(computed);
}

}  // namespace ddph
