// ddph train --trace FILE.json: every rank's buckets as a Chrome trace (the
// Trace Event Format that chrome://tracing and Perfetto open). Each bucket
// is two spans on its rank's lane for its index: its wait behind earlier
// buckets ("queue": from the session's submit to its worker taking it)
// and its hook (named after the hook, or for an auto hook after the
// candidate that ran it, with the reason in its args, to its completion), from
// the session's per-bucket metrics. Inside the hook span, nested on the
// same lane, the phases the hooks reported (ABI 1.7: compress, collective,
// decompress, optimizer_step), at the times they ran.
#pragma once

#include <ddph/ddph.h>

#include <array>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace ddph::tool {

class Session;

class BucketTrace {
 public:
  // on: false records nothing (no --trace).
  explicit BucketTrace(bool on) : on_(on) {}
  bool on() const { return on_; }

  // The trainer handed bucket `bucket` (its index within the step, in
  // submission order) of `step` to the session.
  void submitted(uint64_t step, uint32_t bucket);
  // The session's metrics records of completed buckets.
  void completed(const std::vector<ddph_bucket_metrics_t>& records);
  // The session's phase spans (ddph_session_take_spans). Those of a bucket
  // not completed yet wait for its record.
  void phases(const std::vector<ddph_span_t>& spans);

  // Collective (every rank calls it): gathers the ranks' spans onto rank
  // 0, which gets the trace's JSON text; the others get "". candidates: an
  // auto hook's candidate names (auto_choices.h), empty for a fixed hook.
  std::string gather_json(Session& session, int rank, int world, const std::string& hook,
                          const std::vector<std::string>& candidates) const;

 private:
  // A span or phase as the ranks exchange it: eight numbers, all zero for a
  // row a rank does not fill.
  using Row = std::array<double, 8>;
  struct Span {
    uint64_t step;
    uint32_t bucket;
    // On the machine's monotonic clock (the loader's readings, ABI 1.7),
    // which every process of one machine shares: a local launch's ranks line up.
    double submit_us, queue_us, hook_us;
    bool ok;
    int32_t candidate, reason;  // ABI 1.10; candidate -1: a fixed hook
    // step, bucket, submit, queue, hook, ok (1; 2: failed), candidate + 1, reason
    Row row() const;
  };
  struct Phase {
    uint64_t step;
    uint32_t bucket;
    int32_t phase;
    double start_us, dur_us;  // start on the monotonic clock, as submit_us
    Row row() const;          // step, bucket, phase + 1, start, duration, 0, 0, 0
  };
  // Moves the waiting phases of completed buckets into phases_.
  void match_phases();

  bool on_;
  std::set<std::pair<uint64_t, uint32_t>> submitted_;  // waiting for their record
  std::vector<Span> spans_;
  std::set<std::pair<uint64_t, uint32_t>> completed_;
  std::vector<Phase> waiting_, phases_;
};

}  // namespace ddph::tool
