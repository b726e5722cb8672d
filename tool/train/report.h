// What `ddph train` prints on rank 0 (text, or JSON objects one per line
// with --json) and the CSV it writes with --metrics.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "ddph/ddph.h"
#include "tool/output_file.h"

namespace ddph::tool {

struct TrainHeader {
  std::string hook;
  int world = 0, steps = 0, batch = 0;
  size_t buckets = 0;
  int64_t bucket_bytes = 0, params = 0;
  std::string dtype;
  bool hook_steps_optimizer = false;
};

// One logged step: its figures averaged over the steps since the last one.
struct TrainProgress {
  int step = 0;  // 1-based, as printed
  double loss = 0, train_accuracy = 0, test_accuracy = 0, ms_per_step = 0;
  uint64_t wire_bytes_total = 0;  // this rank's bytes on the wire since the start
  // Per step over the interval, from the session's stats and metrics.
  double bytes_in = 0, bytes_out = 0, wire_bytes = 0, hook_seconds = 0;
  double wall_seconds = 0;  // the steps' time so far (evaluation left out)
  // An auto hook's choices for the buckets of the logged step, as
  // "q8:fastest;allreduce:fastest" (auto_choices.h); "" for a fixed hook.
  std::string choices;
};

struct TrainSummary {
  int steps = 0, world = 0;
  double seconds = 0, final_loss = 0, test_accuracy = 0, chance = 0, train_set_loss = 0;
  uint64_t wire_bytes = 0, buckets = 0;
  bool identical = false, drift_expected = false;
  // The loss or some parameter is not finite: identical is then false.
  bool diverged = false;
  uint64_t non_finite_parameters = 0;  // values, over all ranks
  double drift = 0;
  uint64_t hash = 0;
  std::vector<uint64_t> hashes;  // every rank's, when they differ
};

class TrainReport {
 public:
  // metrics_path: "" for none; otherwise the CSV is created now with its
  // header (throws std::runtime_error naming the path if it cannot be, or
  // the header cannot be written).
  TrainReport(bool json, const std::string& metrics_path);
  ~TrainReport();
  // What the launcher runs before any rank starts: creates metrics_path with
  // the header and closes it, so that a missing folder or a full disk is
  // said before the ranks connect. Throws as the constructor.
  static void check_metrics_path(const std::string& metrics_path);
  TrainReport(const TrainReport&) = delete;
  TrainReport& operator=(const TrainReport&) = delete;

  void header(const TrainHeader& h);
  void progress(const TrainProgress& p);
  void summary(const TrainSummary& s);
  // Closes the CSV, checked (throws as OutputFile::close).
  void close_metrics();

 private:
  bool json_;
  std::string hook_;                 // the CSV's hook column, from header()
  std::unique_ptr<OutputFile> csv_;  // every row written and flushed, checked
};

// The CSV's columns, in order (docs/metrics.md; ddphooks.MetricsWriter
// writes the same).
extern const char kMetricsCsvHeader[];

}  // namespace ddph::tool
