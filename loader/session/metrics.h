// A session's figures: the byte counters ddph_session_stats reads, and the
// per-bucket records and hook phases the host takes
// (ddph_session_take_metrics, ddph_session_take_spans; docs/metrics.md).
#pragma once

#include <ddph/ddph.h>

#include <cstdint>

#include "loader/session/chains.h"
#include "loader/session/metrics_ring.h"
#include "loader/session/pending_bucket.h"

namespace ddph {
namespace loader {

struct Counters {
  uint64_t bytes_in = 0, bytes_out = 0, wire_bytes = 0;
  // What was counted since `before`, field by field.
  Counters since(const Counters& before) const;
};

// The sources ddph_session_stats reads: bytes in as the chain's outermost
// hook saw them, bytes out as the chain sent them, comm's wire (NULL: 0).
// strict: a hook's stats() error is thrown (ddph_session_stats); else its
// bytes read as 0 (a bucket's record).
Counters read_counters(const HookChain& chain, ddph_comm_t* comm, bool strict);

// What one finished bucket's record says besides the bucket itself.
struct BucketOutcome {
  bool ran = false;  // else a broken session ran nothing: no bytes
  bool ok = false;
  Counters bytes;
  double queue_seconds = 0, hook_seconds = 0;
};

class SessionMetrics {
 public:
  // Numbers a bucket in its step, in submission order (under the session's
  // submit lock), and points its spans here.
  void number(PendingBucket& pending);
  void record(const PendingBucket& pending, const BucketOutcome& outcome);
  // The oldest record (span) not taken yet into *out, up to its
  // struct_size; false when there is none.
  bool take_metrics(ddph_bucket_metrics_t* out);
  bool take_spans(ddph_span_t* out);

 private:
  MetricsRing metrics_;
  SpanRing spans_;
  uint64_t next_step_ = 0;
  uint32_t next_bucket_ = 0;
};

}  // namespace loader
}  // namespace ddph
