#include "loader/session/check_ahead.h"

#include <utility>

#include "core/base/error.h"

namespace ddph {
namespace loader {
CheckAhead::CheckAhead(ddph_comm_t* control, AutoCheckPolicy policy)
    : control_(control), policy_(policy), thread_([this] { loop(); }) {}

CheckAhead::~CheckAhead() {
  stop();
  thread_.join();
}

uint64_t CheckAhead::submitted(const BucketFingerprint& fp, uint64_t bytes, bool is_last) {
  batch_.add(fp, bytes);
  if (!batch_.due(policy_, bytes, is_last)) return 0;
  const uint64_t ticket = next_ticket_++;
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(Job{ticket, std::move(batch_)});
  }
  batch_ = PendingBatch();
  wake_.notify_one();
  return ticket;
}

void CheckAhead::await(uint64_t ticket) {
  if (ticket == 0) return;
  std::unique_lock<std::mutex> lock(mu_);
  finished_cv_.wait(lock, [&] { return finished_ >= ticket || stopping_; });
  auto failed = verdicts_.find(ticket);
  if (failed == verdicts_.end()) return;
  const Verdict v = std::move(failed->second);
  verdicts_.erase(failed);
  throw Error(v.code, v.message);
}

void CheckAhead::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  finished_cv_.notify_all();
}

void CheckAhead::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    wake_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
    if (stopping_) return;
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    Verdict v;
    try {
      bool out_of_step = false;  // auto has no hook calls to meet
      compare_batch(control_, job.batch, BucketCheck::kAuto, policy_.batch_buckets, &out_of_step);
    } catch (const Error& e) {
      v = Verdict{e.code(), e.what()};
    } catch (const std::exception& e) {
      v = Verdict{DDPH_INTERNAL, std::string("bucket check: ") + e.what()};
    }
    lock.lock();
    if (v.code != DDPH_OK) verdicts_[job.ticket] = std::move(v);
    finished_ = job.ticket;
    finished_cv_.notify_all();
  }
}

}  // namespace loader
}  // namespace ddph
