#include "loader/tool/train/bucket_trace.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "loader/tool/ranks/session.h"

namespace ddph::tool {
namespace {

// Microseconds on the machine's monotonic clock, which every process of one
// machine shares: the ranks of a local launch line up in the trace.
double now_us() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

constexpr int kFields = 6;  // step, bucket, submit, queue, hook, ok

}  // namespace

void BucketTrace::submitted(uint64_t step, uint32_t bucket) {
  if (on_) submit_us_[{step, bucket}] = now_us();
}

void BucketTrace::completed(const std::vector<ddph_bucket_metrics_t>& records) {
  if (!on_) return;
  for (const auto& r : records) {
    auto it = submit_us_.find({r.step, r.bucket});
    if (it == submit_us_.end()) continue;  // not one of the trainer's buckets
    spans_.push_back(
        {r.step, r.bucket, it->second, r.queue_seconds * 1e6, r.hook_seconds * 1e6, r.ok != 0});
    submit_us_.erase(it);
  }
}

std::string BucketTrace::gather_json(Session& session, int rank, int world,
                                     const std::string& hook) const {
  // Every rank's spans in one allreduce: each fills its own rows of a table
  // as long as the longest rank's list, the rest zero.
  double longest = static_cast<double>(spans_.size());
  session.allreduce(&longest, 1, DDPH_MAX);
  const size_t rows = static_cast<size_t>(longest);
  std::vector<double> table(static_cast<size_t>(world) * rows * kFields, 0.0);
  for (size_t i = 0; i < spans_.size(); ++i) {
    double* row = &table[(static_cast<size_t>(rank) * rows + i) * kFields];
    const Span& s = spans_[i];
    row[0] = double(s.step);
    row[1] = double(s.bucket);
    row[2] = s.submit_us;
    row[3] = s.queue_us;
    row[4] = s.hook_us;
    row[5] = s.ok ? 1 : 2;  // 0: an empty row
  }
  if (!table.empty()) session.allreduce(table.data(), int64_t(table.size()), DDPH_SUM);
  if (rank != 0) return "";

  double start = 0;
  bool first = true;
  for (size_t i = 0; i < table.size(); i += kFields)
    if (table[i + 5] != 0) {
      start = first ? table[i + 2] : std::min(start, table[i + 2]);
      first = false;
    }
  nlohmann::json events = nlohmann::json::array();
  for (int r = 0; r < world; ++r) {
    events.push_back({{"name", "process_name"},
                      {"ph", "M"},
                      {"pid", r},
                      {"args", {{"name", "rank " + std::to_string(r)}}}});
    for (size_t i = 0; i < rows; ++i) {
      const double* row = &table[(static_cast<size_t>(r) * rows + i) * kFields];
      if (row[5] == 0) continue;
      const auto step = static_cast<uint64_t>(row[0]);
      const auto bucket = static_cast<uint64_t>(row[1]);
      const nlohmann::json args = {{"step", step}, {"bucket", bucket}, {"ok", row[5] == 1}};
      const std::string lane = "bucket " + std::to_string(bucket);
      const double submit = row[2] - start;
      events.push_back({{"name", "queue"},
                        {"cat", "ddph"},
                        {"ph", "X"},
                        {"pid", r},
                        {"tid", lane},
                        {"ts", submit},
                        {"dur", row[3]},
                        {"args", args}});
      events.push_back({{"name", hook},
                        {"cat", "ddph"},
                        {"ph", "X"},
                        {"pid", r},
                        {"tid", lane},
                        {"ts", submit + row[3]},
                        {"dur", row[4]},
                        {"args", args}});
    }
  }
  nlohmann::json trace = {{"traceEvents", events},
                          {"displayTimeUnit", "ms"},
                          {"otherData", {{"hook", hook}, {"world", world}}}};
  return trace.dump() + "\n";
}

}  // namespace ddph::tool
