// A bucket as it enters the session: validated once (check_bucket), its
// fingerprint and size computed once, and deep-copied so that the caller's
// structs may go away once submit returns (the memory they point to stays
// borrowed until done). Everything after submit (the bucket checks, the
// choice of chain, the records) reads these instead of the bucket again.
#pragma once

#include <ddph/ddph.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "loader/agreement/rank_agreement.h"
#include "loader/auto/chooser.h"
#include "loader/session/span_registry.h"

namespace ddph {
namespace loader {

struct PendingBucket {
  // Throws DDPH_INVALID_ARGUMENT (or DDPH_UNSUPPORTED) naming the field of
  // a malformed bucket, before anything is copied.
  PendingBucket(const ddph_bucket_t* b, ddph_done_fn done, void* user);
  PendingBucket(const PendingBucket&) = delete;
  PendingBucket& operator=(const PendingBucket&) = delete;

  ddph_bucket_t bucket{};
  BucketFingerprint fingerprint;  // what the ranks compare
  uint64_t bytes = 0;             // the buffer's size
  ddph_done_fn done = nullptr;
  void* user = nullptr;
  uint64_t ticket = 0;  // the bucket check's, to await before the hook; 0: none
  // For its metrics record: when it was submitted, its step and its index
  // in that step (counted by the session, in submission order).
  std::chrono::steady_clock::time_point submitted;
  uint64_t metrics_step = 0;
  uint32_t metrics_bucket = 0;
  // Where the hooks' spans of it go (ABI 1.7), from the worker's start of
  // it; registered by its ddph_bucket_t while the hooks run it.
  RunningBucket running;
  std::unique_ptr<BucketRegistration> registration;
  uint64_t started_ns = 0;  // when the worker took it up, on the spans' clock
  // An auto hook's choice for it (candidate -1: a fixed chain ran it).
  Pick auto_pick{-1, DDPH_CHOICE_FIXED, false, 0};

 private:
  const int64_t* copy(const int64_t* values, int32_t n);

  int64_t buffer_shape_ = 0, buffer_stride_ = 1;
  std::vector<ddph_param_t> params_;
  std::vector<int64_t> param_ids_;
  std::vector<std::vector<int64_t>> shapes_;  // params' view shapes, then data shapes/strides
};

// Calls the host's done for `pending` with `error` (owned by the host from
// then on), marking this thread as in a done of `session` meanwhile.
void call_done(const PendingBucket& pending, ddph_error_t* error, const void* session);
// Whether this thread runs a done callback of `session`: flush, save_state
// and load_state from there would wait for themselves.
bool in_done_of(const void* session);

}  // namespace loader
}  // namespace ddph
