#include "tool/train/bucket_trace.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "tool/ranks/auto_choices.h"
#include "tool/ranks/session.h"

namespace ddph::tool {
namespace {

constexpr int kFields = 8;       // a span's: BucketTrace::Span::row()
constexpr int kPhaseFields = 8;  // a phase's: BucketTrace::Phase::row()

// ddph_phase_t's names; a newer plugin's phase shows by number.
std::string phase_name(int32_t phase) {
  static const char* const kNames[] = {"compress", "collective", "decompress", "optimizer_step"};
  if (phase >= 0 && phase < 4) return kNames[phase];
  return "phase " + std::to_string(phase);
}

// Each rank's rows (Item::row()), as many as the longest rank's list, in
// one allreduce: every rank fills its own rows, the rest zero.
template <class Item>
std::vector<double> gather_rows(Session& session, int rank, int world,
                                const std::vector<Item>& mine, size_t* rows) {
  constexpr size_t fields = kFields;
  double longest = static_cast<double>(mine.size());
  session.allreduce(&longest, 1, DDPH_MAX);
  *rows = static_cast<size_t>(longest);
  std::vector<double> table(static_cast<size_t>(world) * *rows * fields, 0.0);
  for (size_t i = 0; i < mine.size(); ++i) {
    const auto row = mine[i].row();
    std::copy(row.begin(), row.end(), &table[(static_cast<size_t>(rank) * *rows + i) * fields]);
  }
  if (!table.empty()) session.allreduce(table.data(), int64_t(table.size()), DDPH_SUM);
  return table;
}

}  // namespace

BucketTrace::Row BucketTrace::Span::row() const {
  return {double(step),   double(bucket),        submit_us,     queue_us, hook_us,
          ok ? 1.0 : 2.0, double(candidate) + 1, double(reason)};
}

BucketTrace::Row BucketTrace::Phase::row() const {
  return {double(step), double(bucket), double(phase) + 1, start_us, dur_us, 0, 0, 0};
}

void BucketTrace::submitted(uint64_t step, uint32_t bucket) {
  if (on_) submitted_.insert({step, bucket});
}

void BucketTrace::completed(const std::vector<ddph_bucket_metrics_t>& records) {
  if (!on_) return;
  for (const auto& r : records) {
    auto it = submitted_.find({r.step, r.bucket});  // one of the trainer's buckets
    if (it == submitted_.end()) continue;
    // The loader's own clock reading (ABI 1.7), the one its phase spans
    // share: the hook span starts when the worker took the bucket up.
    const double start_us = double(r.start_ns) / 1e3;
    spans_.push_back({r.step, r.bucket, start_us - r.queue_seconds * 1e6, r.queue_seconds * 1e6,
                      r.hook_seconds * 1e6, r.ok != 0, r.candidate, r.choice_reason});
    completed_.insert(*it);
    submitted_.erase(it);
  }
  match_phases();
}

void BucketTrace::phases(const std::vector<ddph_span_t>& spans) {
  if (!on_) return;
  for (const auto& p : spans)
    waiting_.push_back(
        {p.step, p.bucket, p.phase, double(p.start_ns) / 1e3, double(p.end_ns - p.start_ns) / 1e3});
  match_phases();
}

void BucketTrace::match_phases() {
  std::vector<Phase> still;
  for (const Phase& p : waiting_) {
    if (completed_.count({p.step, p.bucket}))
      phases_.push_back(p);
    else if (submitted_.count({p.step, p.bucket}))
      still.push_back(p);  // its bucket's record comes later
    // else: a bucket that is not the trainer's
  }
  waiting_.swap(still);
}

std::string BucketTrace::gather_json(Session& session, int rank, int world, const std::string& hook,
                                     const std::vector<std::string>& candidates) const {
  size_t rows = 0, phase_rows = 0;
  const std::vector<double> table = gather_rows(session, rank, world, spans_, &rows);
  const std::vector<double> phase_table = gather_rows(session, rank, world, phases_, &phase_rows);
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
      nlohmann::json args = {{"step", step}, {"bucket", bucket}, {"ok", row[5] == 1}};
      // An auto hook's bucket is named after the candidate that ran it.
      std::string name = hook;
      if (row[6] > 0) {
        ddph_bucket_metrics_t choice{};
        choice.candidate = int32_t(row[6]) - 1;
        choice.choice_reason = int32_t(row[7]);
        name = candidate_name(choice, candidates);
        args["candidate"] = name;
        args["reason"] = choice_reason_name(choice.choice_reason);
      }
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
      events.push_back({{"name", name},
                        {"cat", "ddph"},
                        {"ph", "X"},
                        {"pid", r},
                        {"tid", lane},
                        {"ts", submit + row[3]},
                        {"dur", row[4]},
                        {"args", args}});
    }
    // The phases nest in their bucket's hook span: same lane, inside its time.
    for (size_t i = 0; i < phase_rows; ++i) {
      const double* row = &phase_table[(static_cast<size_t>(r) * phase_rows + i) * kPhaseFields];
      if (row[2] == 0) continue;
      const auto step = static_cast<uint64_t>(row[0]);
      const auto bucket = static_cast<uint64_t>(row[1]);
      events.push_back({{"name", phase_name(static_cast<int32_t>(row[2]) - 1)},
                        {"cat", "ddph.phase"},
                        {"ph", "X"},
                        {"pid", r},
                        {"tid", "bucket " + std::to_string(bucket)},
                        {"ts", row[3] - start},
                        {"dur", row[4]},
                        {"args", {{"step", step}, {"bucket", bucket}}}});
    }
  }
  nlohmann::json trace = {{"traceEvents", events},
                          {"displayTimeUnit", "ms"},
                          {"otherData", {{"hook", hook}, {"world", world}}}};
  return trace.dump() + "\n";
}

}  // namespace ddph::tool
