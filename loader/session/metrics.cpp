#include "loader/session/metrics.h"

#include <algorithm>
#include <cstring>

#include "core/base/error.h"

namespace ddph {
namespace loader {
namespace {

// The fields this loader knows, up to the caller's struct_size; a newer
// caller's extra fields are left alone, its struct_size kept.
template <class Record>
void copy_out(const Record& r, Record* out) {
  const size_t caller_size = out->struct_size;
  std::memcpy(out, &r, std::min(caller_size, sizeof r));
  out->struct_size = caller_size;
}

}  // namespace

Counters Counters::since(const Counters& before) const {
  Counters c;
  c.bytes_in = bytes_in - before.bytes_in;
  c.bytes_out = bytes_out - before.bytes_out;
  c.wire_bytes = wire_bytes - before.wire_bytes;
  return c;
}

Counters read_counters(const HookChain& chain, ddph_comm_t* comm, bool strict) {
  Counters c;
  auto read = [strict](const ddph_hook_ref_t& ref, ddph_stats_t* out) {
    *out = ddph_stats_t{};
    out->struct_size = sizeof *out;
    if (ref.hook->stats == nullptr) return false;
    ddph_error_t* e = ref.hook->stats(ref.state, out);
    if (e == nullptr) return true;
    if (strict) DDPH_CALL(e);  // ddph_session_stats reports the hook's error
    ddph_error_free(e);        // a bucket's record: its bytes read as 0
    return false;
  };
  ddph_stats_t hs;
  if (read(chain.outer(), &hs)) {
    c.bytes_in = hs.bytes_in;
    c.bytes_out = hs.bytes_out;
  }
  // The larger of the two: a wrapper's count includes its inner's
  // (take_inner_bytes_out) plus what it sent itself, or is the wrapper's
  // own alone, and a wrapper such as zero's reduce_scatter may send instead
  // of its inner.
  if (read(chain.inner(), &hs)) c.bytes_out = std::max(c.bytes_out, hs.bytes_out);
  if (comm != nullptr && comm->bytes_sent != nullptr) c.wire_bytes = comm->bytes_sent(comm->ctx);
  return c;
}

void SessionMetrics::number(PendingBucket& pending) {
  pending.metrics_step = next_step_;
  pending.metrics_bucket = next_bucket_++;
  if (pending.bucket.is_last) {
    ++next_step_;
    next_bucket_ = 0;
  }
  pending.running =
      RunningBucket{&spans_, pending.metrics_step, pending.metrics_bucket, &pending.bucket};
}

void SessionMetrics::record(const PendingBucket& pending, const BucketOutcome& outcome) {
  ddph_bucket_metrics_t r{};
  r.struct_size = sizeof r;
  r.step = pending.metrics_step;
  r.bucket = pending.metrics_bucket;
  r.is_last = pending.bucket.is_last ? 1 : 0;
  if (outcome.ran) {
    r.bytes_in = outcome.bytes.bytes_in;
    r.bytes_out = outcome.bytes.bytes_out;
    r.wire_bytes = outcome.bytes.wire_bytes;
  }
  r.queue_seconds = outcome.queue_seconds;
  r.hook_seconds = outcome.hook_seconds;
  r.candidate = pending.auto_pick.candidate;
  r.choice_reason = pending.auto_pick.reason;
  r.ok = outcome.ok ? 1 : 0;
  r.start_ns = pending.started_ns;
  metrics_.push(r);
}

bool SessionMetrics::take_metrics(ddph_bucket_metrics_t* out) {
  ddph_bucket_metrics_t r;
  if (!metrics_.take(&r)) return false;
  copy_out(r, out);
  return true;
}

bool SessionMetrics::take_spans(ddph_span_t* out) {
  ddph_span_t r;
  if (!spans_.take(&r)) return false;
  copy_out(r, out);
  return true;
}

}  // namespace loader
}  // namespace ddph
