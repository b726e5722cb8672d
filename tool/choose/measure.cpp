#include "tool/choose/measure.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>

#include "loader/auto/chooser.h"
#include "tool/bench/params.h"
#include "tool/ranks/buckets.h"
#include "tool/ranks/session.h"

namespace ddph::tool {
namespace {

// Sums of a (size, candidate)'s settled hook times on this rank. A bucket's
// first settle_steps in a row on a candidate are not timed, as the chooser
// does not time them (PowerSGD's first steps, first allocations).
struct Timings {
  Timings(size_t sizes, const std::vector<uint64_t>& settle_steps)
      : candidates(settle_steps.size()),
        settle(settle_steps),
        sum(sizes * candidates),
        count(sizes * candidates),
        last(sizes, -1),
        run(sizes, 0) {}
  void add(const ddph_bucket_metrics_t& r) {
    const size_t s = r.bucket;
    if (s >= last.size() || r.candidate < 0 || size_t(r.candidate) >= candidates) return;
    run[s] = last[s] == r.candidate ? run[s] + 1 : 1;
    last[s] = r.candidate;
    if (run[s] <= settle[size_t(r.candidate)]) return;
    sum[s * candidates + size_t(r.candidate)] += r.hook_seconds;
    ++count[s * candidates + size_t(r.candidate)];
  }
  size_t candidates;
  std::vector<uint64_t> settle;
  std::vector<double> sum, count;
  std::vector<int> last;
  std::vector<uint64_t> run;
};

}  // namespace

ChooseResult measure_choice(const ChooseOptions& o, const std::string& config,
                            const std::string& url, int rank,
                            const std::vector<uint64_t>& settle_steps) {
  const size_t candidates = settle_steps.size();
  Session s(config, rank, o.world, url);
  const size_t n = o.bucket_bytes.size();
  std::vector<std::unique_ptr<BenchParams>> params;
  std::vector<std::unique_ptr<GradBucket>> buckets;
  std::vector<std::vector<float>> pristine(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t numel = std::max<int64_t>(1, o.bucket_bytes[i] / 4);
    params.push_back(std::make_unique<BenchParams>(numel, o.matrix_rows, o.matrix_cols));
    buckets.push_back(
        std::make_unique<GradBucket>(i, params[i]->plan(), params[i]->shapes(), ddph::DType::F32));
    pristine[i].resize(size_t(numel));
    fill_gradients(pristine[i], rank);
  }
  Timings timings(n, settle_steps);
  ChooseResult result;
  std::vector<ddph_bucket_metrics_t> last(n);
  bool explored = false;
  for (int step = 0; step < o.max_steps; ++step) {
    for (size_t i = 0; i < n; ++i) {
      std::memcpy(buckets[i]->data(), pristine[i].data(), pristine[i].size() * sizeof(float));
      s.submit(buckets[i]->bucket(uint64_t(step), i + 1 == n));
    }
    s.flush();
    bool fastest = true;
    for (const ddph_bucket_metrics_t& r : s.take_metrics()) {
      timings.add(r);
      if (r.bucket < n) last[r.bucket] = r;
      explored = explored || r.choice_reason == DDPH_CHOICE_EXPLORE;
      fastest = fastest && r.choice_reason == DDPH_CHOICE_FASTEST;
    }
    result.steps = step + 1;
    // Every rank sees the same reasons (the chooser's decisions are
    // agreed); the MIN keeps the ranks in step even so.
    double done = explored && fastest ? 1 : 0;
    s.allreduce(&done, 1, DDPH_MIN);
    if (done > 0) {
      result.settled = true;
      break;
    }
  }
  // Each rank's means, then the shortest over the ranks, as the chooser
  // compares them (the others add their wait for the last rank to arrive).
  constexpr double kNotTimed = std::numeric_limits<double>::max();
  std::vector<double> means(n * candidates, kNotTimed);
  for (size_t k = 0; k < means.size(); ++k)
    if (timings.count[k] > 0) means[k] = timings.sum[k] / timings.count[k];
  if (!means.empty()) s.allreduce(means.data(), int64_t(means.size()), DDPH_MIN);
  for (double& m : means)
    if (m == kNotTimed) m = 0;
  for (size_t i = 0; i < n; ++i) {
    SizeChoice c;
    c.bytes = o.bucket_bytes[i];
    c.candidate = last[i].candidate;
    c.reason = last[i].choice_reason;
    c.seconds.assign(means.begin() + long(i * candidates),
                     means.begin() + long((i + 1) * candidates));
    result.sizes.push_back(std::move(c));
  }
  return result;
}

}  // namespace ddph::tool
