#include "loader/session/span_registry.h"

#include <algorithm>
#include <mutex>
#include <vector>

namespace ddph {
namespace loader {
namespace {

thread_local const RunningBucket* t_bucket = nullptr;

// The buckets of every session that may be named by pointer: few at a time
// (one per session, plus its pipelined buckets in flight).
std::mutex& registry_mu() {
  static std::mutex mu;
  return mu;
}
std::vector<RunningBucket>& registry() {
  static std::vector<RunningBucket> r;
  return r;
}

void push(const RunningBucket& b, ddph_phase_t phase, uint64_t start_ns, uint64_t end_ns) {
  ddph_span_t s{};
  s.struct_size = sizeof s;
  s.step = b.step;
  s.bucket = b.bucket;
  s.phase = static_cast<int32_t>(phase);
  s.start_ns = start_ns;
  s.end_ns = std::max(start_ns, end_ns);
  b.ring->push(s);
}

}  // namespace

BucketRegistration::BucketRegistration(const RunningBucket& b) : bucket_(b) {
  std::lock_guard<std::mutex> lock(registry_mu());
  try {
    registry().push_back(b);
  } catch (...) {
    // Out of memory: a step thread's spans of this bucket are dropped.
  }
}

BucketRegistration::~BucketRegistration() {
  std::lock_guard<std::mutex> lock(registry_mu());
  auto& r = registry();
  for (auto it = r.begin(); it != r.end(); ++it)
    if (it->handed == bucket_.handed && it->ring == bucket_.ring) {
      r.erase(it);
      return;
    }
}

ThreadBucket::ThreadBucket(const RunningBucket* b) : outer_(t_bucket) {
  t_bucket = b;
}
ThreadBucket::~ThreadBucket() {
  t_bucket = outer_;
}

void record_span(const struct ddph_bucket* bucket, ddph_phase_t phase, uint64_t start_ns,
                 uint64_t end_ns) {
  // Called by plugins through the C table: nothing may escape. The ring
  // allocates only while it grows; without memory the span is dropped.
  try {
    if (t_bucket != nullptr) return push(*t_bucket, phase, start_ns, end_ns);
    if (bucket == nullptr) return;
    std::lock_guard<std::mutex> lock(registry_mu());
    for (const RunningBucket& b : registry())
      if (b.handed == bucket) return push(b, phase, start_ns, end_ns);
  } catch (...) {
  }
}

}  // namespace loader
}  // namespace ddph
