// A test family, fixture_pipelined, for the session's handling of
// DDPH_HOOK_PIPELINED (ABI 1.6). Its hooks complete every bucket on a
// thread of their own after delay_ms, in the order they were run, and
// write into the bucket what the test cannot see from outside:
//   buffer[0]  how many earlier buckets were not done yet when run() began
//   buffer[1]  the bucket's number in run() order
//   buffer[2]  1 once the completion thread has finished with it
//   buffer[3]  the bucket's params_checked (ABI 1.8), in buckets of 4 or more
// "pipelined" carries the flag; "serial" is the same hook without it, which
// the session must keep waiting for.
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "core/base/options.h"
#include "core/base/plugin.h"
#include "core/base/tensor.h"
#include "core/hook/hook.h"

namespace ddph {
namespace {

template <uint32_t Flags>
class DelayedHook : public Hook {
 public:
  static constexpr uint32_t kFlags = Flags;

  explicit DelayedHook(const ddph_hook_init_t& init) {
    const Options o(init.options, init.num_options);
    delay_ = std::chrono::milliseconds(o.get_int("delay_ms"));
    fail_run_ = o.get_int("fail_run");
    fail_code_ = ddph_code_t(o.get_int("fail_code"));
  }

  // Completes what is queued, then joins.
  ~DelayedHook() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  void run(const ddph_bucket_t& bucket, DType dtype, const Completion& done) override {
    DDPH_CHECK(dtype == DType::F32 && bucket.buffer.shape[0] >= 3, DDPH_INVALID_ARGUMENT,
               "fixture_pipelined: wants float32 buckets of 3 elements or more");
    float* data = static_cast<float*>(data_ptr(bucket.buffer));
    count_in(uint64_t(bucket.buffer.shape[0]) * sizeof(float));
    std::lock_guard<std::mutex> lock(mu_);
    data[0] = float(not_done_);
    data[1] = float(runs_);
    if (bucket.buffer.shape[0] >= 4) data[3] = float(params_checked(bucket));
    ++not_done_;
    queue_.push_back(Job{data, runs_ == fail_run_, done});
    ++runs_;
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
    wake_.notify_one();
  }

  // Refused while a bucket is in flight: the host must wait for the dones.
  void save_state(ddph_write_fn write, void* sink) override {
    std::lock_guard<std::mutex> lock(mu_);
    DDPH_CHECK(not_done_ == 0, DDPH_INTERNAL,
               "fixture_pipelined: save_state while " << not_done_ << " buckets are in flight");
    write(sink, &completed_, sizeof completed_);
  }
  void load_state(const void* bytes, size_t n) override {
    std::lock_guard<std::mutex> lock(mu_);
    DDPH_CHECK(not_done_ == 0, DDPH_INTERNAL,
               "fixture_pipelined: load_state while " << not_done_ << " buckets are in flight");
    DDPH_CHECK(n == sizeof completed_, DDPH_INVALID_ARGUMENT, "fixture_pipelined: bad blob");
    std::memcpy(&completed_, bytes, n);
  }

 private:
  struct Job {
    float* data;
    bool fail;
    Completion done;
  };

  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      Job job = queue_.front();
      queue_.pop_front();
      lock.unlock();
      std::this_thread::sleep_for(delay_);
      job.data[2] = 1.0f;
      lock.lock();
      // Before done: the host may start the next bucket as soon as it has it.
      --not_done_;
      ++completed_;
      lock.unlock();
      if (job.fail)
        job.done.fail(Error(fail_code_, "fixture_pipelined: failing as told"));
      else
        job.done.ok();
      lock.lock();
    }
  }

  std::chrono::milliseconds delay_{0};
  int64_t fail_run_ = -1;
  ddph_code_t fail_code_ = DDPH_COMM_FAILURE;
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Job> queue_;
  int64_t not_done_ = 0, runs_ = 0;
  uint64_t completed_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

const ddph_option_spec_t kSpecs[] = {
    spec_int("delay_ms", "20", "how long each bucket takes, on the hook's thread", 0, 10000),
    spec_int("fail_run", "-1", "the bucket (in run order) that completes with fail_code", -1, 1e9),
    spec_int("fail_code", "5", "the ddph_code_t of that failure", 1, 9),
};

const ddph_hook_t& pipelined_hook() {
  static const ddph_hook_t table = hook_table<DelayedHook<DDPH_HOOK_PIPELINED>>(
      "pipelined", "completes each bucket later, in order, on its own thread (PIPELINED)", kSpecs,
      3, /*keeps_state=*/true);
  return table;
}

const ddph_hook_t& serial_hook() {
  static const ddph_hook_t table = hook_table<DelayedHook<0>>(
      "serial", "the same without DDPH_HOOK_PIPELINED", kSpecs, 3, /*keeps_state=*/true);
  return table;
}

const ddph_hook_t* const kHooks[] = {&pipelined_hook(), &serial_hook()};

}  // namespace
}  // namespace ddph

DDPH_DEFINE_PLUGIN("fixture_pipelined", "0.1-fixture", ddph::kHooks, 2, nullptr, 0)
