// Where a phase a hook reports (ddph_host_t.span, ABI 1.7) goes: the span
// ring of the session bucket it belongs to. The host table is one for every
// session, so the bucket is found from the calling thread (the worker that
// runs it) or, on a thread of the hook's own, from the ddph_bucket_t the
// outermost hook was handed.
#pragma once

#include <ddph/ddph.h>

#include <cstdint>

#include "loader/session/metrics_ring.h"

namespace ddph {
namespace loader {

// A session bucket being run: spans reported for it go to `ring` with its
// step and index in the metrics' numbering.
struct RunningBucket {
  SpanRing* ring = nullptr;
  uint64_t step = 0;
  uint32_t bucket = 0;
  const ddph_bucket_t* handed = nullptr;  // what the outermost hook gets
};

// While alive, spans reported with `b.handed` are b's, from any thread.
// Registered from the worker before the hook runs; gone once the bucket is
// finished (before the host's done), so a span after that is dropped.
class BucketRegistration {
 public:
  explicit BucketRegistration(const RunningBucket& b);
  ~BucketRegistration();
  BucketRegistration(const BucketRegistration&) = delete;
  BucketRegistration& operator=(const BucketRegistration&) = delete;

 private:
  RunningBucket bucket_;
};

// While alive, spans reported on this thread are b's, whatever bucket they
// name: the worker's run_bucket call, including a wrapper's inner hooks on
// buckets of their own making. Nests (restores the outer one).
class ThreadBucket {
 public:
  explicit ThreadBucket(const RunningBucket* b);
  ~ThreadBucket();
  ThreadBucket(const ThreadBucket&) = delete;
  ThreadBucket& operator=(const ThreadBucket&) = delete;

 private:
  const RunningBucket* outer_;
};

// ddph_host_t.span.
void record_span(const struct ddph_bucket* bucket, ddph_phase_t phase, uint64_t start_ns,
                 uint64_t end_ns);

}  // namespace loader
}  // namespace ddph
