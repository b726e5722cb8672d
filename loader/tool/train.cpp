// `ddph train`: the main job. Data-parallel training of a small MLP, with the
// gradients bucketed the way PyTorch DDP buckets them and reduced through
// the hook the job file names.
//
// Without --rank the command is a local launcher: it makes a file store and
// runs --world copies of itself as separate processes, each given --rank.
// With --rank it is one rank of a job, which is also how a multi-machine
// job starts it.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/kernels/cast.h"
#include "loader/job_id.h"
#include "loader/tool/bench_label.h"
#include "loader/tool/commands.h"
#include "loader/tool/hook_needs.h"
#include "loader/tool/mpi_launcher.h"
#include "loader/tool/net_lab.h"
#include "loader/tool/train_buckets.h"
#include "loader/tool/train_flags.h"
#include "loader/tool/train_launch.h"
#include "loader/tool/train_model.h"
#include "loader/tool/train_session.h"

namespace ddph_tool {
namespace {

constexpr double kPi = 3.14159265358979323846;

using ddph_train::Dataset;
using ddph_train::GradBucket;
using ddph_train::Mlp;

struct TrainOptions {
  std::string config;
  int world = 2;
  int rank = -1;  // -1: launch all ranks locally
  std::string rendezvous;
  std::string job;  // --job: the session's job id ("" leaves it to YAML/environment)
  int steps = 1000;
  int64_t bucket_kb = 4;  // small enough that the 2-64-64-3 model makes 3 buckets
  int log_every = 100;
  uint64_t seed = 1;
  int batch = 32;  // per rank
  double lr = 0.1;
  double momentum = 0.9;
  double timeout_s = 300;
  int hidden = 64;  // width of both hidden layers
  // Of the gradient buckets (--dtype); parameters and optimizer stay f32.
  std::string dtype = "f32";
  // Local SGD leaves ranks with different parameters; this averages them
  // once after the last step, as a local-SGD run is finished in practice.
  bool final_average = false;
  LinkSpec link;  // --link; rate 0: plain loopback
  bool help = false;
};

const char kUsage[] =
    "usage: ddph train --config FILE.yaml [--world N] [--steps S] [--bucket-kb B]\n"
    "                  [--log-every K] [--seed X] [--batch B] [--lr LR] [--momentum M]\n"
    "                  [--hidden H] [--dtype f32|bf16|f16] [--final-average]\n"
    "                  [--timeout SECONDS] [--job ID] [--rank R --rendezvous URL]\n"
    "                  [--link RATE[,LATENCY]]\n"
    "Trains a 2-H-H-3 ReLU MLP (H = 64 by default) on 3-class spirals, data-parallel\n"
    "over N ranks\n"
    "(default 2 local processes over a temporary file store), reducing gradients\n"
    "through the config's hook. With --rank it runs only that rank of a job.\n"
    "--dtype: gradients travel in bf16/f16 buckets while parameters stay fp32\n"
    "(mixed precision). A hook that takes the parameters (hook_then_optimizer)\n"
    "steps them itself, with its own optimizer options, instead of --lr/--momentum.\n"
    "--final-average: average the parameters over the ranks after the last step\n"
    "(local SGD, where the ranks' parameters drift apart between averages).\n"
    "At the end the ranks' parameters must be bit-identical, else it exits 3; with a\n"
    "hook that averages parameters (model_averaging) it prints how far apart they are.\n"
    "A config with comm.backend mpi under mpirun runs one rank per process, rank\n"
    "and world from the launcher (--world is then ignored).\n"
    "--job ID: the job id every store key lives under (it overrides comm.job).\n"
    "Without it, a local launch gives its ranks a fresh one (DDPH_JOB_ID) unless\n"
    "the YAML or the environment names one.\n"
    "--link RATE[,LATENCY] (e.g. 1gbit, 100mbit): the local ranks each in its own\n"
    "network namespace with one card of that rate (see `ddph lab --help`).\n";

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

TrainOptions parse(int argc, char** argv) {
  TrainOptions o;
  Flags f(argc, argv);
  bool rank_given = false;
  while (f.next()) {
    if (f.is("--help") || f.is("-h"))
      return o.help = true, o;
    else if (f.is("--config"))
      o.config = f.value();
    else if (f.is("--world"))
      o.world = static_cast<int>(f.int_value(1, 1024));
    else if (f.is("--rank"))
      o.rank = static_cast<int>(f.int_value(0, 1023)), rank_given = true;
    else if (f.is("--rendezvous"))
      o.rendezvous = f.value();
    else if (f.is("--job"))
      o.job = f.value();
    else if (f.is("--steps"))
      o.steps = static_cast<int>(f.int_value(1, 100000000));
    else if (f.is("--bucket-kb"))
      o.bucket_kb = f.int_value(0, 1 << 30);
    else if (f.is("--log-every"))
      o.log_every = static_cast<int>(f.int_value(1, 100000000));
    else if (f.is("--seed"))
      o.seed = static_cast<uint64_t>(f.int_value(0, INT64_MAX));
    else if (f.is("--batch"))
      o.batch = static_cast<int>(f.int_value(1, 1 << 20));
    else if (f.is("--lr"))
      o.lr = f.double_value(0, 100);
    else if (f.is("--momentum"))
      o.momentum = f.double_value(0, 1);
    else if (f.is("--timeout"))
      o.timeout_s = f.double_value(1, 1e6);
    else if (f.is("--hidden"))
      o.hidden = static_cast<int>(f.int_value(1, 1 << 14));
    else if (f.is("--dtype"))
      o.dtype = f.value(), parse_bucket_dtype(o.dtype, "--dtype");
    else if (f.is("--link"))
      o.link = parse_link(f.value());
    else if (f.is("--final-average"))
      o.final_average = true;
    else
      throw std::invalid_argument("unknown flag " + f.name());
  }
  if (o.config.empty()) throw std::invalid_argument("--config is required");
  if (rank_given && o.rank >= o.world)
    throw std::invalid_argument("--rank " + std::to_string(o.rank) + " is not below --world " +
                                std::to_string(o.world));
  if (!rank_given && !o.rendezvous.empty())
    throw std::invalid_argument("--rendezvous goes with --rank (a local launch makes its own)");
  return o;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// One step's gradient exchange, DDP style: each layer's gradients are copied
// into their bucket as backward finishes the layer, and buckets are
// submitted in index order as soon as all of their parameters are in.
class Reducer {
 public:
  // dtype: of the buckets. needs: what the hook takes through params[].data.
  Reducer(std::vector<ddph_train::Param>& params, int64_t cap_bytes, Session& session,
          ddph::DType dtype, HookNeeds needs)
      : params_(params), session_(session), needs_(needs) {
    std::vector<int64_t> numels;
    std::vector<const std::vector<int64_t>*> shapes;
    for (const auto& p : params) {
      numels.push_back(p.numel());
      shapes.push_back(&p.shape);
    }
    auto plans = ddph_train::plan_buckets(numels, cap_bytes);
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
  std::vector<ddph_train::Param>& params_;
  Session& session_;
  HookNeeds needs_;
  std::vector<std::unique_ptr<GradBucket>> buckets_;
  std::vector<std::pair<int, int64_t>> owner_;  // param -> (bucket, offset)
  std::vector<int> pending_;
  size_t next_ = 0;
  uint64_t step_ = 0;
};

std::string mb(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f MB", bytes / 1e6);
  return buf;
}

// How far the ranks' parameters are apart: the largest |p - mean over the
// ranks| of any parameter value, over the largest |mean|. Collective.
double replica_drift(Session& session, const std::vector<ddph_train::Param>& params) {
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

int run_rank(const TrainOptions& o) {
  const bool lead = o.rank == 0;
  Session session(o.config, o.rank, o.world, o.rendezvous, o.job);
  std::string label = hook_label(o.config);

  Dataset train = ddph_train::make_spirals(kClasses, kTrainPerClass, kNoise, o.seed);
  Dataset test = ddph_train::make_spirals(kClasses, kTestPerClass, kNoise, o.seed + 1000003);
  std::vector<int> shard;  // this rank's slice of the training set
  for (int i = o.rank; i < train.size(); i += o.world) shard.push_back(i);

  // The same seed on every rank: identical starting parameters, as DDP
  // ensures by broadcasting rank 0's module at construction.
  Mlp model(layers(o.hidden), o.seed * 7919 + 17);
  ddph_train::Sgd sgd(o.lr, o.momentum);
  const HookNeeds needs = hook_needs(o.config);
  Reducer reducer(model.params(), o.bucket_kb * 1024, session,
                  parse_bucket_dtype(o.dtype, "--dtype"), needs);
  ddph_train::Rng sampler(o.seed ^ (0x5851f42d4c957f2dull * (o.rank + 1)));

  if (lead) {
    std::printf(
        "ddph train: %s on %d rank%s, %d steps, batch %d per rank, %zu bucket%s of <= %" PRId64
        " KB (%" PRId64 " params)\n",
        label.c_str(), o.world, o.world == 1 ? "" : "s", o.steps, o.batch, reducer.num_buckets(),
        reducer.num_buckets() == 1 ? "" : "s", o.bucket_kb, [&] {
          int64_t n = 0;
          for (const auto& p : model.params()) n += p.numel();
          return n;
        }());
    if (o.dtype != "f32")
      std::printf("gradient buckets in %s, parameters in f32\n", o.dtype.c_str());
    if (needs.steps_optimizer())
      std::printf("the hook steps the optimizer (its own options; --lr/--momentum unused)\n");
    std::fflush(stdout);
  }

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
    uint64_t sent = session.stats().wire_bytes;  // before our own allreduce adds to it
    double totals[3] = {loss_sum, correct_sum, count};
    session.allreduce(totals, 3, DDPH_SUM);
    last_loss = totals[0] / totals[2];
    if (lead) {
      last_acc = model.accuracy(test);
      std::printf(
          "step %6d  loss %.4f  train-acc %5.1f%%  test-acc %5.1f%%  ms/step %.3f  sent %s\n",
          step + 1, last_loss, 100.0 * totals[1] / totals[2], 100.0 * last_acc,
          step_ms / steps_in_interval, mb(sent).c_str());
      std::fflush(stdout);
    }
    loss_sum = correct_sum = count = step_ms = 0;
    steps_in_interval = 0;
  }

  if (o.final_average)
    for (auto& p : model.params()) session.allreduce(p.value.data(), p.numel(), DDPH_AVG);

  // Every rank publishes its parameter hash; equal hashes mean the hook gave
  // every rank the same averaged gradients, step after step.
  uint64_t hash = ddph_train::hash_params(model.params());
  std::vector<int64_t> hashes(o.world);
  int64_t mine = static_cast<int64_t>(hash);
  session.allgather(&mine, 1, hashes.data());
  bool same = true;
  for (int64_t h : hashes) same = same && h == mine;
  // A hook that writes the parameters (model averaging, local SGD) keeps the
  // replicas together by averaging them every few steps: between averages
  // they differ by design, so their distance is reported, not an error.
  const bool drift_expected = needs.averages_parameters();
  const double drift = !same && drift_expected ? replica_drift(session, model.params()) : 0;
  if (lead) {
    ddph_stats_t st = session.stats();
    std::printf(
        "summary: %d steps in %.2f s (%.3f ms/step), final loss %.4f, test accuracy %.1f%% "
        "(chance %.1f%%), %s sent per rank, %" PRIu64 " buckets reduced\n",
        o.steps, total_ms / 1000, total_ms / o.steps, last_loss, 100.0 * last_acc, 100.0 / kClasses,
        mb(st.wire_bytes).c_str(), st.buckets);
    std::printf("train-set loss %.6f (whole training set, final parameters)\n",
                model.mean_loss(train));
    if (same) {
      std::printf("parameters bit-identical on all %d ranks: fnv1a %016" PRIx64 "\n", o.world,
                  hash);
    } else if (drift_expected) {
      std::printf(
          "parameters differ across ranks, as the replicas of a parameter-averaging hook do "
          "between averages: largest distance from their mean %.3g of the largest parameter "
          "(--final-average averages them after the last step)\n",
          drift);
    } else {
      std::printf("parameters DIFFER across ranks:");
      for (int r = 0; r < o.world; ++r)
        std::printf(" rank %d %016" PRIx64, r, static_cast<uint64_t>(hashes[r]));
      std::printf("\n");
    }
    std::fflush(stdout);
  }
  if (!same && !drift_expected) {
    std::fprintf(stderr, "ddph train: rank %d: parameters differ from another rank's\n", o.rank);
    return 3;
  }
  return 0;
}

// A double as text that parses back to the same double.
std::string exact(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

int launch_local(const TrainOptions& o) {
  if (access(o.config.c_str(), R_OK) != 0) {
    std::fprintf(stderr, "ddph train: cannot read config %s\n", o.config.c_str());
    return 2;
  }
  std::string dir = make_temp_dir("ddph-train");
  std::string url = "file://" + dir;
  // The ranks of this launch are one job; a fresh id keeps it apart from any
  // other, unless the YAML (comm.job, which wins over the environment) or
  // the caller's environment names one.
  const char* env_job = std::getenv("DDPH_JOB_ID");
  if (o.job.empty() && (env_job == nullptr || *env_job == '\0'))
    setenv("DDPH_JOB_ID", ddph::loader::new_job_id().c_str(), 1);
  // The real path as argv[0], as a shell would pass it: code that locates
  // files beside the executable (the plugin directory) may read it.
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  std::string exe = n > 0 ? std::string(self, n) : std::string("ddph");
  std::unique_ptr<NetLab> lab;
  if (o.link.rate_bits_per_s > 0 && !(lab = open_lab("ddph train", o.world, o.link))) {
    remove_tree(dir);
    return kLabUnavailable;
  }
  auto body = [&](int r) {
    if (lab && !lab->enter(r)) return 1;
    // exec rather than run in the forked copy: each rank then is exactly the
    // process a multi-machine launch starts, with nothing inherited.
    std::vector<std::string> args = {exe,
                                     "train",
                                     "--config",
                                     o.config,
                                     "--world",
                                     std::to_string(o.world),
                                     "--rank",
                                     std::to_string(r),
                                     "--rendezvous",
                                     url,
                                     "--steps",
                                     std::to_string(o.steps),
                                     "--bucket-kb",
                                     std::to_string(o.bucket_kb),
                                     "--log-every",
                                     std::to_string(o.log_every),
                                     "--seed",
                                     std::to_string(o.seed),
                                     "--batch",
                                     std::to_string(o.batch),
                                     "--lr",
                                     exact(o.lr),
                                     "--momentum",
                                     exact(o.momentum),
                                     "--hidden",
                                     std::to_string(o.hidden),
                                     "--dtype",
                                     o.dtype};
    if (o.final_average) args.push_back("--final-average");
    if (!o.job.empty()) args.insert(args.end(), {"--job", o.job});
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv("/proc/self/exe", argv.data());
    std::perror("ddph train: exec /proc/self/exe");
    return 127;
  };
  std::vector<RankExit> exits = run_local_ranks(o.world, body, o.timeout_s, 10.0);
  remove_tree(dir);
  return report_ranks("ddph train", exits) ? 0 : 1;
}

}  // namespace

int cmd_train(int argc, char** argv) {
  TrainOptions o;
  try {
    o = parse(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddph train: %s\n%s", e.what(), kUsage);
    return 2;
  }
  if (o.help) return std::printf("%s", kUsage), 0;
  if (o.rank >= 0 && o.link.rate_bits_per_s > 0) {
    std::fprintf(stderr,
                 "ddph train: --link starts the local ranks itself; it does not combine "
                 "with --rank\n");
    return 2;
  }
  if (o.rank < 0) {
    // An MPI job under mpirun: this process is one rank, placed by the launcher.
    LauncherPlacement mpi;
    try {
      mpi = mpi_launcher_placement(o.config);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ddph train: %s\n", e.what());
      return 2;
    }
    if (!mpi.found) return launch_local(o);
    if (o.link.rate_bits_per_s > 0) {
      std::fprintf(stderr,
                   "ddph train: --link runs local ranks; under an MPI launcher shape "
                   "the links outside (see docs/lab.md)\n");
      return 2;
    }
    o.rank = mpi.rank;
    o.world = mpi.world;
  }
  try {
    return run_rank(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddph train: rank %d: %s\n", o.rank, e.what());
    return 1;
  }
}

}  // namespace ddph_tool
