// ddph train --trace FILE.json: every rank's buckets as a Chrome trace (the
// Trace Event Format that chrome://tracing and Perfetto open). Each bucket
// is two spans on its rank's lane for its index: its wait behind earlier
// buckets ("queue": from the trainer's submit to the session's worker
// taking it) and its hook (named after the hook, to its completion), from
// the session's per-bucket metrics. The hook's own phases (compression,
// collectives, decompression, an optimizer step) are not measured apart.
#pragma once

#include <ddph/ddph.h>

#include <chrono>
#include <cstdint>
#include <map>
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

  // Collective (every rank calls it): gathers the ranks' spans onto rank
  // 0, which gets the trace's JSON text; the others get "".
  std::string gather_json(Session& session, int rank, int world, const std::string& hook) const;

 private:
  struct Span {
    uint64_t step;
    uint32_t bucket;
    double submit_us, queue_us, hook_us;
    bool ok;
  };
  bool on_;
  std::map<std::pair<uint64_t, uint32_t>, double> submit_us_;  // waiting for their record
  std::vector<Span> spans_;
};

}  // namespace ddph::tool
