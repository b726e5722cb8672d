#include "tool/train/train_rank.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "core/kernels/cast.h"
#include "tool/output_file.h"
#include "tool/ranks/auto_choices.h"
#include "tool/ranks/buckets.h"
#include "tool/ranks/job_file.h"
#include "tool/ranks/session.h"
#include "tool/train/bucket_trace.h"
#include "tool/train/data.h"
#include "tool/train/model.h"
#include "tool/train/report.h"

namespace ddph::tool {
namespace {

constexpr double kPi = 3.14159265358979323846;

// Model and task sizes: tiny enough for plain loops, hard enough (spirals are
// not linearly separable) that the accuracy curve shows real learning.
// --hidden widens the two hidden layers, e.g. so that the H x H weight is a
// matrix worth compressing (powersgd).
std::vector<int> layers(int hidden) {
  return {2, hidden, hidden, 3};
}
constexpr int kClasses = 3;
constexpr int kTrainPerClass = 1000;
constexpr int kTestPerClass = 300;
constexpr double kNoise = 0.15;

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// One step's gradient exchange, DDP style: each layer's gradients are copied
// into their bucket as backward finishes the layer, and buckets are
// submitted in index order as soon as all of their parameters are in.
class Reducer {
 public:
  // dtype: of the buckets. needs: what the hook takes through params[].data.
  Reducer(std::vector<Param>& params, int64_t cap_bytes, Session& session, ddph::DType dtype,
          HookNeeds needs, BucketTrace& trace)
      : params_(params), session_(session), needs_(needs), trace_(trace) {
    std::vector<int64_t> numels;
    std::vector<const std::vector<int64_t>*> shapes;
    for (const auto& p : params) {
      numels.push_back(p.numel());
      shapes.push_back(&p.shape);
    }
    auto plans = plan_buckets(numels, cap_bytes);
    owner_.assign(params.size(), {0, 0});
    for (size_t b = 0; b < plans.size(); ++b) {
      for (size_t k = 0; k < plans[b].slots.size(); ++k)
        owner_[plans[b].slots[k].param] = {static_cast<int>(b), plans[b].slots[k].offset};
      buckets_.push_back(std::make_unique<GradBucket>(b, std::move(plans[b]), shapes, dtype));
    }
    if (needs.params) {
      std::vector<float*> tensors;
      for (auto& p : params) tensors.push_back(needs.grads_there ? p.grad.data() : p.value.data());
      for (auto& b : buckets_) b->share_param_data(tensors);
    }
  }

  size_t num_buckets() const { return buckets_.size(); }

  void begin_step(uint64_t step) {
    step_ = step;
    next_ = 0;
    pending_.clear();
    for (const auto& b : buckets_) pending_.push_back(static_cast<int>(b->plan().slots.size()));
  }

  void layer_done(int layer) {
    for (size_t p = 0; p < params_.size(); ++p) {
      if (params_[p].layer != layer) continue;
      auto [b, offset] = owner_[p];
      GradBucket& bucket = *buckets_[b];
      const size_t elem = ddph::dtype_size(bucket.dtype());
      // To the bucket's dtype, as a mixed-precision backward would produce it.
      ddph::cast_into(ddph::DType::F32, params_[p].grad.data(), bucket.dtype(),
                      static_cast<char*>(bucket.raw()) + offset * elem, params_[p].grad.size());
      --pending_[b];
    }
    while (next_ < buckets_.size() && pending_[next_] == 0) {
      trace_.submitted(step_, static_cast<uint32_t>(next_));
      session_.submit(buckets_[next_]->bucket(step_, next_ + 1 == buckets_.size()));
      ++next_;
    }
  }

  // Waits for the hooks, then hands the reduced gradients back to the
  // params (upcast to fp32), unless the hook wrote them there itself.
  void finish_step() {
    session_.flush();
    if (needs_.grads_there) return;
    for (size_t p = 0; p < params_.size(); ++p) {
      auto [b, offset] = owner_[p];
      GradBucket& bucket = *buckets_[b];
      const size_t elem = ddph::dtype_size(bucket.dtype());
      ddph::cast_into(bucket.dtype(), static_cast<const char*>(bucket.raw()) + offset * elem,
                      ddph::DType::F32, params_[p].grad.data(), params_[p].grad.size());
    }
  }

 private:
  std::vector<Param>& params_;
  Session& session_;
  HookNeeds needs_;
  BucketTrace& trace_;
  std::vector<std::unique_ptr<GradBucket>> buckets_;
  std::vector<std::pair<int, int64_t>> owner_;  // param -> (bucket, offset)
  std::vector<int> pending_;
  size_t next_ = 0;
  uint64_t step_ = 0;
};

// How far the ranks' parameters are apart: the largest |p - mean over the
// ranks| of any parameter value, over the largest |mean|. Collective.
double replica_drift(Session& session, const std::vector<Param>& params) {
  double worst[2] = {0, 0};  // largest distance from the mean, largest |mean|
  for (const auto& p : params) {
    std::vector<float> mean = p.value;
    session.allreduce(mean.data(), p.numel(), DDPH_AVG);
    for (int64_t i = 0; i < p.numel(); ++i) {
      worst[0] = std::max(worst[0], std::fabs(double(p.value[i]) - mean[i]));
      worst[1] = std::max(worst[1], std::fabs(double(mean[i])));
    }
  }
  session.allreduce(worst, 2, DDPH_MAX);
  return worst[1] > 0 ? worst[0] / worst[1] : worst[0];
}

// How many of this rank's parameter values are not finite, summed over the
// ranks, so that every rank agrees on whether the training diverged.
// Collective.
double non_finite_parameters(Session& session, const std::vector<Param>& params) {
  double bad = 0;
  for (const auto& p : params)
    for (float v : p.value) bad += std::isfinite(v) ? 0 : 1;
  session.allreduce(&bad, 1, DDPH_SUM);
  return bad;
}

// Rank r's share of d: rows r, r + world, ... Every rank scores its share
// and the counts are summed, so that no rank waits in a collective while
// another evaluates alone: rank 0 scoring the whole set by itself outlasted
// comm.timeout at a wide --hidden (16384: a DDPH_TIMEOUT in the final
// allgather after 78 s with timeout 30s).
Dataset share_of(const Dataset& d, int rank, int world) {
  Dataset s;
  s.dim = d.dim;
  s.classes = d.classes;
  for (int i = rank; i < d.size(); i += world) {
    s.x.insert(s.x.end(), d.x.begin() + int64_t(i) * d.dim, d.x.begin() + int64_t(i + 1) * d.dim);
    s.y.push_back(d.y[i]);
  }
  return s;
}

}  // namespace

int train_rank(const TrainOptions& o) {
  const bool lead = o.rank == 0;
  // Only rank 0 reports; the others write no file. Made before the session,
  // so that a --metrics file that cannot be written stops rank 0 before it
  // connects.
  TrainReport report(o.json, lead ? o.metrics : std::string());
  Session session(o.config, o.rank, o.world, o.rendezvous, o.job);
  std::string label = hook_label(o.config);
  // An auto hook's candidates, which its buckets' records index.
  const std::vector<std::string> candidates = candidate_names(auto_candidates(o.config));

  Dataset train = make_spirals(kClasses, kTrainPerClass, kNoise, o.seed);
  Dataset test = make_spirals(kClasses, kTestPerClass, kNoise, o.seed + 1000003);
  std::vector<int> shard;  // this rank's slice of the training set
  for (int i = o.rank; i < train.size(); i += o.world) shard.push_back(i);
  const Dataset test_share = share_of(test, o.rank, o.world);

  // The same seed on every rank: identical starting parameters, as DDP
  // ensures by broadcasting rank 0's module at construction.
  Mlp model(layers(o.hidden), o.seed * 7919 + 17);
  Sgd sgd(o.lr, o.momentum);
  const HookNeeds needs = hook_needs(o.config);
  BucketTrace trace(!o.trace.empty());
  Reducer reducer(model.params(), o.bucket_bytes, session, parse_bucket_dtype(o.dtype, "--dtype"),
                  needs, trace);
  Rng sampler(o.seed ^ (0x5851f42d4c957f2dull * (o.rank + 1)));

  if (lead) {
    TrainHeader h;
    h.hook = label;
    h.world = o.world;
    h.steps = o.steps;
    h.batch = o.batch;
    h.buckets = reducer.num_buckets();
    h.bucket_bytes = o.bucket_bytes;
    for (const auto& p : model.params()) h.params += p.numel();
    h.dtype = o.dtype;
    h.hook_steps_optimizer = needs.steps_optimizer();
    report.header(h);
  }
  ddph_stats_t interval_start = session.stats();

  std::vector<float> x(static_cast<size_t>(o.batch) * train.dim);
  std::vector<int> y(o.batch);
  double loss_sum = 0, correct_sum = 0, count = 0, step_ms = 0;
  int steps_in_interval = 0;
  double last_loss = 0, last_acc = 0, total_ms = 0;
  for (int step = 0; step < o.steps; ++step) {
    auto t0 = std::chrono::steady_clock::now();
    for (int n = 0; n < o.batch; ++n) {
      int i = shard[sampler.below(shard.size())];
      for (int d = 0; d < train.dim; ++d) x[n * train.dim + d] = train.x[i * train.dim + d];
      y[n] = train.y[i];
    }
    model.forward(x.data(), o.batch);
    int correct = 0;
    double loss = model.loss(y.data(), &correct);
    reducer.begin_step(step);
    model.backward(y.data(), [&](int layer) { reducer.layer_done(layer); });
    reducer.finish_step();
    // Cosine annealing to zero: the run settles at its end, so the final loss
    // compares hooks rather than where the last noisy steps happened to land.
    sgd.set_lr(o.lr * 0.5 * (1.0 + std::cos(kPi * step / o.steps)));
    if (!needs.steps_optimizer()) sgd.step(model.params());  // else the hook did, per bucket
    double ms = ms_since(t0);
    step_ms += ms;
    total_ms += ms;
    ++steps_in_interval;
    loss_sum += loss * o.batch;
    correct_sum += correct;
    count += o.batch;

    bool log = step == 0 || (step + 1) % o.log_every == 0 || step + 1 == o.steps;
    if (!log) continue;
    // Before our own allreduce adds to the counts.
    const ddph_stats_t now = session.stats();
    // Every rank takes its records when tracing (rank 0's hook time too).
    double hook_seconds = 0;
    std::string choices;
    if (trace.on() || lead) {
      const std::vector<ddph_bucket_metrics_t> records = session.take_metrics();
      for (const auto& r : records) hook_seconds += r.hook_seconds;
      choices = last_step_choices(records, candidates);
      trace.completed(records);
      if (trace.on()) trace.phases(session.take_spans());
    }
    // Test accuracy: this rank's share of the test set, scored with its
    // own replica (all the same unless the hook averages parameters).
    const double test_right = std::round(model.accuracy(test_share) * test_share.size());
    double totals[5] = {loss_sum, correct_sum, count, test_right, double(test_share.size())};
    session.allreduce(totals, 5, DDPH_SUM);
    last_loss = totals[0] / totals[2];
    last_acc = totals[3] / totals[4];
    if (lead) {
      TrainProgress p;
      p.step = step + 1;
      p.loss = last_loss;
      p.train_accuracy = totals[1] / totals[2];
      p.test_accuracy = last_acc;
      p.ms_per_step = step_ms / steps_in_interval;
      p.wire_bytes_total = now.wire_bytes;
      p.bytes_in = double(now.bytes_in - interval_start.bytes_in) / steps_in_interval;
      p.bytes_out = double(now.bytes_out - interval_start.bytes_out) / steps_in_interval;
      p.wire_bytes = double(now.wire_bytes - interval_start.wire_bytes) / steps_in_interval;
      p.hook_seconds = hook_seconds / steps_in_interval;
      p.wall_seconds = total_ms / 1000;
      p.choices = choices;
      report.progress(p);
    }
    interval_start = session.stats();
    loss_sum = correct_sum = count = step_ms = 0;
    steps_in_interval = 0;
  }

  if (o.final_average)
    for (auto& p : model.params()) session.allreduce(p.value.data(), p.numel(), DDPH_AVG);
  if (trace.on()) {
    const std::string json = trace.gather_json(session, o.rank, o.world, label, candidates);
    if (lead) write_output_file(o.trace, json, "--trace");
  }

  // A diverged training (NaN or infinite loss or parameters: a learning rate
  // far too large) is a failure, not a result: equal hashes of NaN parameters
  // prove nothing. last_loss is the same on every rank (allreduced).
  const double bad_params = non_finite_parameters(session, model.params());
  const bool diverged = bad_params > 0 || !std::isfinite(last_loss);
  // Every rank publishes its parameter hash; equal hashes mean the hook gave
  // every rank the same averaged gradients, step after step.
  uint64_t hash = hash_params(model.params());
  std::vector<int64_t> hashes(o.world);
  int64_t mine = static_cast<int64_t>(hash);
  session.allgather(&mine, 1, hashes.data());
  bool same = !diverged;
  for (int64_t h : hashes) same = same && h == mine;
  // A hook that writes the parameters (model averaging, local SGD) keeps the
  // replicas together by averaging them every few steps: between averages
  // they differ by design, so their distance is reported, not an error.
  const bool drift_expected = needs.averages_parameters();
  const double drift =
      !same && !diverged && drift_expected ? replica_drift(session, model.params()) : 0;
  if (lead) {
    const ddph_stats_t st = session.stats();
    TrainSummary sum;
    sum.steps = o.steps;
    sum.world = o.world;
    sum.seconds = total_ms / 1000;
    sum.final_loss = last_loss;
    sum.test_accuracy = last_acc;
    sum.chance = 1.0 / kClasses;
    // After the last collective, so no rank waits for it; not computed for
    // a diverged training (NaN parameters give a NaN loss): the other ranks
    // exit at once, and the launcher ends a rank that outlives a failed peer
    // by long, as a wide model's pass over the training set would.
    sum.train_set_loss = diverged ? std::nan("") : model.mean_loss(train);
    sum.wire_bytes = st.wire_bytes;
    sum.buckets = st.buckets;
    sum.identical = same;
    sum.diverged = diverged;
    sum.non_finite_parameters = static_cast<uint64_t>(bad_params);
    sum.drift_expected = drift_expected;
    sum.drift = drift;
    sum.hash = hash;
    if (!same && !diverged)
      for (int64_t h : hashes) sum.hashes.push_back(static_cast<uint64_t>(h));
    report.summary(sum);
    report.close_metrics();
  }
  if (diverged) {
    std::fprintf(stderr,
                 "ddph train: rank %d: training diverged: final loss %g, %.0f parameter values "
                 "not finite over the ranks (try a smaller --lr)\n",
                 o.rank, last_loss, bad_params);
    return kExitDiverged;
  }
  if (!same && !drift_expected) {
    std::fprintf(stderr, "ddph train: rank %d: parameters differ from another rank's\n", o.rank);
    return 3;
  }
  return 0;
}

}  // namespace ddph::tool
