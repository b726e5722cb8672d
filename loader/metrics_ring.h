// The figures of a session's completed buckets, kept for the host to take
// (ddph_session_take_metrics): the latest `capacity` records, oldest first.
// Storage grows by doubling up to capacity and is then reused, so a warm
// session allocates nothing per bucket. [thread-safe]
#pragma once

#include <ddph/ddph.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace ddph {
namespace loader {

// How many records a session keeps (the ABI's figure).
constexpr size_t kMetricsKept = 65536;

class MetricsRing {
 public:
  explicit MetricsRing(size_t capacity = kMetricsKept) : capacity_(capacity) {}

  // Appends r, dropping the oldest record when capacity records are kept.
  void push(const ddph_bucket_metrics_t& r);
  // Moves the oldest record into *out; false when there is none.
  bool take(ddph_bucket_metrics_t* out);
  // Records dropped because nobody took them in time.
  uint64_t dropped() const;

 private:
  void grow();  // with mu_ held

  const size_t capacity_;
  mutable std::mutex mu_;
  std::vector<ddph_bucket_metrics_t> slots_;
  size_t head_ = 0;  // the oldest record
  size_t count_ = 0;
  uint64_t dropped_ = 0;
};

}  // namespace loader
}  // namespace ddph
