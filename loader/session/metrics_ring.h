// The records of a session's completed buckets and of their phases, kept
// for the host to take (ddph_session_take_metrics, ddph_session_take_spans):
// the latest `capacity` records, oldest first. Storage grows by doubling up
// to capacity and is then reused, so a warm session allocates nothing per
// bucket. [thread-safe]
#pragma once

#include <ddph/ddph.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace ddph {
namespace loader {

// How many records a session keeps (the ABI's figures).
constexpr size_t kMetricsKept = 65536;
constexpr size_t kSpansKept = 262144;  // four phases a bucket for as many buckets

template <class Record>
class RecordRing {
 public:
  explicit RecordRing(size_t capacity) : capacity_(capacity) {}

  // Appends r, dropping the oldest record when capacity records are kept.
  void push(const Record& r) {
    if (capacity_ == 0) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (count_ == slots_.size() && slots_.size() < capacity_) grow();
    if (count_ == slots_.size()) {  // full at capacity: the oldest goes
      head_ = (head_ + 1) % slots_.size();
      --count_;
      ++dropped_;
    }
    slots_[(head_ + count_) % slots_.size()] = r;
    ++count_;
  }
  // Moves the oldest record into *out; false when there is none.
  bool take(Record* out) {
    std::lock_guard<std::mutex> lock(mu_);
    if (count_ == 0) return false;
    *out = slots_[head_];
    head_ = (head_ + 1) % slots_.size();
    --count_;
    return true;
  }
  // Records dropped because nobody took them in time.
  uint64_t dropped() const {
    std::lock_guard<std::mutex> lock(mu_);
    return dropped_;
  }

 private:
  void grow() {  // with mu_ held
    // Unrolled into the new storage so that the oldest record comes first.
    std::vector<Record> bigger;
    const size_t size = std::min(capacity_, std::max<size_t>(64, 2 * slots_.size()));
    bigger.reserve(size);
    for (size_t i = 0; i < count_; ++i) bigger.push_back(slots_[(head_ + i) % slots_.size()]);
    bigger.resize(size);
    slots_.swap(bigger);
    head_ = 0;
  }

  const size_t capacity_;
  mutable std::mutex mu_;
  std::vector<Record> slots_;
  size_t head_ = 0;  // the oldest record
  size_t count_ = 0;
  uint64_t dropped_ = 0;
};

class MetricsRing : public RecordRing<ddph_bucket_metrics_t> {
 public:
  explicit MetricsRing(size_t capacity = kMetricsKept) : RecordRing(capacity) {}
};

class SpanRing : public RecordRing<ddph_span_t> {
 public:
  explicit SpanRing(size_t capacity = kSpansKept) : RecordRing(capacity) {}
};

}  // namespace loader
}  // namespace ddph
