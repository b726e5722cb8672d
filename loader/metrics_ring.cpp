#include "loader/metrics_ring.h"

#include <algorithm>

namespace ddph {
namespace loader {

void MetricsRing::grow() {
  // Unrolled into the new storage so that the oldest record comes first.
  std::vector<ddph_bucket_metrics_t> bigger;
  const size_t size = std::min(capacity_, std::max<size_t>(64, 2 * slots_.size()));
  bigger.reserve(size);
  for (size_t i = 0; i < count_; ++i) bigger.push_back(slots_[(head_ + i) % slots_.size()]);
  bigger.resize(size);
  slots_.swap(bigger);
  head_ = 0;
}

void MetricsRing::push(const ddph_bucket_metrics_t& r) {
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

bool MetricsRing::take(ddph_bucket_metrics_t* out) {
  std::lock_guard<std::mutex> lock(mu_);
  if (count_ == 0) return false;
  *out = slots_[head_];
  head_ = (head_ + 1) % slots_.size();
  --count_;
  return true;
}

uint64_t MetricsRing::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

}  // namespace loader
}  // namespace ddph
