#include "tool/bench/paired.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "core/kernels/cast.h"
#include "tool/bench/device.h"
#include "tool/bench/measure.h"
#include "tool/bench/params.h"
#include "tool/ranks/auto_choices.h"
#include "tool/ranks/buckets.h"
#include "tool/ranks/job_file.h"
#include "tool/ranks/session.h"

namespace ddph::tool {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// One half of a pair as the ranks ran it: its start and end on this rank,
// the machine's busy ticks and the communicator's wire bytes across it.
struct Half {
  Clock::time_point t0, t1;
  CpuTicks c0, c1;
  uint64_t wire0 = 0, wire1 = 0;
};

// Times run(), which the caller puts between two barriers: ranks done
// early must not refill their buffer while the slowest one is still timed
// (that memcpy would steal its CPU).
template <class Run>
Half timed(Session& s, Run run) {
  Half h;
  h.wire0 = s.stats().wire_bytes;
  h.c0 = cpu_ticks();
  h.t0 = Clock::now();
  run();
  h.t1 = Clock::now();
  h.c1 = cpu_ticks();
  h.wire1 = s.stats().wire_bytes;
  return h;
}

// An auto hook's choices of the timed iterations: the session's steps from
// `first` on (every iteration is one step of one bucket), counted.
std::vector<std::pair<std::string, int>> timed_choices(Session& s, const std::string& config,
                                                       uint64_t first) {
  std::vector<std::pair<std::string, int>> out;
  const std::vector<std::string> names = candidate_names(auto_candidates(config));
  for (const ddph_bucket_metrics_t& m : s.take_metrics()) {
    const std::string text = choice_text(m, names);
    if (m.step < first || text.empty()) continue;
    auto it = std::find_if(out.begin(), out.end(), [&](const auto& c) { return c.first == text; });
    if (it == out.end())
      out.emplace_back(text, 1);
    else
      ++it->second;
  }
  return out;
}

}  // namespace

double pair_ratio(const std::vector<TimedPair>& pairs) {
  std::vector<double> ratios;
  for (const TimedPair& p : pairs)
    if (p.baseline_s > 0) ratios.push_back(p.hook_s / p.baseline_s);
  return ratios.empty() ? 0 : median(ratios);
}

Result bench_config(const BenchOptions& o, const std::string& config, const std::string& url,
                    int rank, int64_t numel) {
  const ddph::DType dtype = parse_bucket_dtype(o.dtype, "--dtype");
  // --device cuda: the bucket, and then the fp32 baseline, in GPU memory.
  // Made before the session, so a missing GPU stops every rank alike.
  std::unique_ptr<CudaBucketMemory> gpu;
  if (o.device == "cuda") {
    if (hook_needs(config).params)
      throw std::runtime_error(
          "--device cuda: hooks that take the parameters are benched on host buckets only");
    gpu = std::make_unique<CudaBucketMemory>(size_t(numel) * sizeof(float), rank);
  }
  Session s(config, rank, o.world, url);
  const BenchParams params(numel, o.matrix_rows, o.matrix_cols);
  GradBucket bucket(0, params.plan(), params.shapes(), dtype);
  // A hook that takes the parameters (or writes fp32 gradients there) gets
  // one float tensor per view; its values do not matter to the timing.
  std::vector<std::vector<float>> lent;
  if (hook_needs(config).params) {
    std::vector<float*> tensors;
    for (const BucketSlot& slot : params.plan().slots)
      lent.emplace_back(static_cast<size_t>(slot.numel), 0.f);
    for (auto& t : lent) tensors.push_back(t.data());
    bucket.share_param_data(tensors);
  }
  std::vector<float> pristine(numel), baseline(numel);
  fill_gradients(pristine, rank);
  const size_t bucket_bytes = static_cast<size_t>(numel) * ddph::dtype_size(dtype);
  // An fp32 bucket is refilled from `pristine` itself: a second copy would
  // cost every rank another GiB at --bucket-size 1GiB.
  std::vector<char> converted;
  const void* pristine_bucket = pristine.data();
  if (dtype != ddph::DType::F32) {
    converted.resize(bucket_bytes);
    ddph::cast_into(ddph::DType::F32, pristine.data(), dtype, converted.data(), numel);
    pristine_bucket = converted.data();
  }

  // times[2i] the hook's pair i, times[2i+1] its baseline: one MAX allreduce at the end.
  std::vector<double> times(2 * o.iters);
  std::vector<TimedPair> pairs(o.iters);
  ddph_stats_t timed_start{};
  Clock::time_point first{};
  double wire = 0, base_wire = 0, cross = 0;
  BusyShare busy, base_busy;
  uint64_t step = 0;
  for (int it = -o.warmup; it < o.iters; ++it, ++step) {
    if (gpu)
      gpu->upload(pristine_bucket, bucket_bytes);
    else
      std::memcpy(bucket.raw(), pristine_bucket, bucket_bytes);
    s.barrier();
    if (it == 0) timed_start = s.stats();
    const double cross0 =
        o.machines > 0 ? bytes_to_other_machines(s.comm(), rank, o.world, o.machines) : 0;
    const Half hook = timed(s, [&] {
      if (gpu) {
        const ddph_bucket_t on_gpu = gpu->onto(*bucket.bucket(step, true));
        s.submit(&on_gpu);
        s.flush();
        gpu->wait();  // done means enqueued: the time is the GPU's
      } else {
        s.submit(bucket.bucket(step, true));
        s.flush();
      }
    });
    s.barrier();
    // After the barrier: the bucket's last bytes have left (a barrier's own
    // few bytes count too).
    const double cross1 =
        o.machines > 0 ? bytes_to_other_machines(s.comm(), rank, o.world, o.machines) : 0;

    if (gpu)
      gpu->upload(pristine.data(), size_t(numel) * sizeof(float));
    else
      std::memcpy(baseline.data(), pristine.data(), numel * sizeof(float));
    s.barrier();
    const Half base = timed(s, [&] {
      if (gpu)
        gpu->allreduce(s.comm(), numel);
      else
        s.allreduce(baseline.data(), numel, DDPH_SUM);
    });
    s.barrier();
    if (it < 0) continue;
    if (it == 0) first = hook.t0;
    times[2 * it] = seconds(hook.t0, hook.t1);
    times[2 * it + 1] = seconds(base.t0, base.t1);
    pairs[it].hook_start_s = seconds(first, hook.t0);
    pairs[it].baseline_start_s = seconds(first, base.t0);
    busy.add(hook.c0, hook.c1);
    base_busy.add(base.c0, base.c1);
    wire += static_cast<double>(hook.wire1 - hook.wire0);
    base_wire += static_cast<double>(base.wire1 - base.wire0);
    // A rank that cannot count per peer drives the sum over ranks negative,
    // which reads as "not measured".
    cross += cross0 < 0 || cross1 < 0 ? -1e300 : cross1 - cross0;
  }
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  double memory[2] = {double(s.state_bytes()), double(usage.ru_maxrss) * 1024};
  s.allreduce(memory, 2, DDPH_MAX);
  s.allreduce(times.data(), static_cast<int64_t>(times.size()), DDPH_MAX);
  s.allreduce(&wire, 1, DDPH_SUM);
  s.allreduce(&base_wire, 1, DDPH_SUM);
  if (o.machines > 0) s.allreduce(&cross, 1, DDPH_SUM);
  // Every rank's window sees the whole machine; summing the ticks of all
  // windows averages the ranks' views.
  double ticks[4] = {busy.busy, busy.total, base_busy.busy, base_busy.total};
  s.allreduce(ticks, 4, DDPH_SUM);
  Result r;
  if (ticks[1] > 0 && ticks[3] > 0) {
    r.busy = ticks[0] / ticks[1];
    r.baseline_busy = ticks[2] / ticks[3];
  }
  r.state_bytes = memory[0];
  r.peak_rss_bytes = memory[1];
  std::vector<double> hook_times, base_times;
  for (int it = 0; it < o.iters; ++it) {
    pairs[it].hook_s = times[2 * it];
    pairs[it].baseline_s = times[2 * it + 1];
    hook_times.push_back(pairs[it].hook_s);
    base_times.push_back(pairs[it].baseline_s);
  }
  r.median_s = median(hook_times);
  r.baseline_s = median(base_times);
  r.ratio = pair_ratio(pairs);
  r.pairs = std::move(pairs);
  r.wire_bytes_per_rank = wire / (static_cast<double>(o.world) * o.iters);
  r.baseline_wire_bytes_per_rank = base_wire / (static_cast<double>(o.world) * o.iters);
  const ddph_stats_t end = s.stats();
  r.bytes_in = end.bytes_in - timed_start.bytes_in;
  r.bytes_out = end.bytes_out - timed_start.bytes_out;
  if (o.machines > 0) r.cross_machine_bytes = cross < 0 ? -1 : cross / o.iters;
  r.choices = timed_choices(s, config, uint64_t(o.warmup));
  return r;
}

}  // namespace ddph::tool
