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
#include "loader/tool/cli.h"
#include "loader/tool/commands.h"
#include "loader/tool/hook_needs.h"
#include "loader/tool/mpi_launcher.h"
#include "loader/tool/net_lab.h"
#include "loader/tool/train_buckets.h"
#include "loader/tool/train_launch.h"
#include "loader/tool/train_model.h"
#include "loader/tool/train_report.h"
#include "loader/tool/train_session.h"

namespace ddph_tool {
namespace {

constexpr double kPi = 3.14159265358979323846;

using ddph_train::Dataset;
using ddph_train::GradBucket;
using ddph_train::Mlp;

struct TrainOptions {
  std::string config;
  std::string config_arg;  // positional, the same as --config
  int world = 2;
  int rank = -1;  // -1: launch all ranks locally
  std::string rendezvous;
  std::string job;  // --job: the session's job id ("" leaves it to YAML/environment)
  int steps = 1000;
  // Small enough that the 2-64-64-3 model makes 3 buckets.
  std::string bucket_size = "4KiB";
  int64_t bucket_bytes = 0;  // bucket_size, parsed
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
  std::string link_text;  // --link
  LinkSpec link;          // --link; rate 0: plain loopback
  std::string metrics;    // --metrics FILE.csv: one row per logged step (rank 0)
  bool json = false;
};

const char kDescription[] =
    "Trains a 2-H-H-3 ReLU MLP (H = 64 by default) on 3-class spirals, data-parallel\n"
    "over N ranks (default 2 local processes over a temporary file store), reducing\n"
    "gradients through the config's hook. With --rank it runs only that rank of a job.\n"
    "--dtype: gradients travel in bf16/f16 buckets while parameters stay fp32\n"
    "(mixed precision). A hook that takes the parameters (hook_then_optimizer)\n"
    "steps them itself, with its own optimizer options, instead of --lr/--momentum.\n"
    "At the end the ranks' parameters must be bit-identical, else it exits 3; with a\n"
    "hook that averages parameters (local SGD, model averaging) it prints how far\n"
    "apart they are and exits 0 (--final-average averages them after the last step).\n"
    "A config with comm.backend mpi under mpirun runs one rank per process, rank\n"
    "and world from the launcher (--world is then ignored).\n"
    "--job ID: the job id every store key lives under (it overrides comm.job).\n"
    "Without it, a local launch gives its ranks a fresh one (DDPH_JOB_ID) unless\n"
    "the YAML or the environment names one.\n"
    "--metrics FILE.csv: rank 0 writes one row per logged step (docs/metrics.md);\n"
    "`python3 -m ddphooks.plot FILE.csv -o FILE.png` draws it.\n"
    "--json: the progress lines and the summary as JSON objects, one per line.";

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

// What CLI11 cannot check alone: the values that need parsing, and the
// flags that go together. Throws std::invalid_argument.
void finish_options(TrainOptions& o, bool rank_given) {
  if (o.config.empty()) o.config = o.config_arg;
  if (o.config.empty())
    throw std::invalid_argument("no config given (ddph train --config FILE.yaml)");
  if (!o.config_arg.empty() && o.config_arg != o.config)
    throw std::invalid_argument("two configs given (" + o.config + " and " + o.config_arg + ")");
  o.bucket_bytes = parse_size(o.bucket_size, "--bucket-size");
  parse_bucket_dtype(o.dtype, "--dtype");
  if (!o.link_text.empty()) o.link = parse_link(o.link_text);
  if (rank_given && o.rank >= o.world)
    throw std::invalid_argument("--rank " + std::to_string(o.rank) + " is not below --world " +
                                std::to_string(o.world));
  if (!rank_given && !o.rendezvous.empty())
    throw std::invalid_argument("--rendezvous goes with --rank (a local launch makes its own)");
  if (rank_given && o.link.rate_bits_per_s > 0)
    throw std::invalid_argument(
        "--link starts the local ranks itself; it does not combine "
        "with --rank");
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
  Reducer reducer(model.params(), o.bucket_bytes, session, parse_bucket_dtype(o.dtype, "--dtype"),
                  needs);
  ddph_train::Rng sampler(o.seed ^ (0x5851f42d4c957f2dull * (o.rank + 1)));

  // Only rank 0 reports; the others write no file.
  TrainReport report(o.json, lead ? o.metrics : std::string());
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
    double totals[3] = {loss_sum, correct_sum, count};
    session.allreduce(totals, 3, DDPH_SUM);
    last_loss = totals[0] / totals[2];
    if (lead) {
      last_acc = model.accuracy(test);
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
      p.hook_seconds = session.take_hook_seconds() / steps_in_interval;
      report.progress(p);
    }
    interval_start = session.stats();
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
    const ddph_stats_t st = session.stats();
    TrainSummary sum;
    sum.steps = o.steps;
    sum.world = o.world;
    sum.seconds = total_ms / 1000;
    sum.final_loss = last_loss;
    sum.test_accuracy = last_acc;
    sum.chance = 1.0 / kClasses;
    sum.train_set_loss = model.mean_loss(train);
    sum.wire_bytes = st.wire_bytes;
    sum.buckets = st.buckets;
    sum.identical = same;
    sum.drift_expected = drift_expected;
    sum.drift = drift;
    sum.hash = hash;
    if (!same)
      for (int64_t h : hashes) sum.hashes.push_back(static_cast<uint64_t>(h));
    report.summary(sum);
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
                                     "--bucket-size",
                                     o.bucket_size,
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
    if (o.json) args.push_back("--json");
    if (!o.metrics.empty()) args.insert(args.end(), {"--metrics", o.metrics});
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

int run_train(TrainOptions& o, bool rank_given) {
  try {
    finish_options(o, rank_given);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddph train: %s\n", e.what());
    return kExitUsage;
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
    return kExitFailed;
  }
}

}  // namespace

void add_train_command(CLI::App& root, int* exit_code) {
  auto o = std::make_shared<TrainOptions>();
  CLI::App* cmd = add_command(root, "train", "run the data-parallel training demo job", &o->json);
  cmd->footer(kDescription);
  cmd->add_option("config_file", o->config_arg, "the YAML job file (the same as --config)")
      ->type_name("FILE.yaml");
  cmd->add_option("--config", o->config, "the YAML job file")->type_name("FILE.yaml");
  cmd->add_option("--world", o->world, "ranks")
      ->type_name("N")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  CLI::Option* rank = cmd->add_option("--rank", o->rank, "run only this rank of the job")
                          ->type_name("R")
                          ->check(CLI::Range(0, 1023));
  cmd->add_option("--rendezvous", o->rendezvous, "with --rank: the job's rendezvous URL")
      ->type_name("URL");
  cmd->add_option("--job", o->job, "the job id (overrides comm.job)")->type_name("ID");
  cmd->add_option("--steps", o->steps, "training steps")
      ->type_name("S")
      ->check(CLI::Range(1, 100000000))
      ->capture_default_str();
  cmd->add_option("--bucket-size", o->bucket_size, "gradient bucket cap, e.g. 4KiB, 25MiB")
      ->type_name("SIZE")
      ->capture_default_str();
  cmd->add_option("--log-every", o->log_every, "print every K steps")
      ->type_name("K")
      ->check(CLI::Range(1, 100000000))
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "data, model and sampling seed")->capture_default_str();
  cmd->add_option("--batch", o->batch, "examples per rank per step")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--lr", o->lr, "learning rate (cosine-annealed)")
      ->check(CLI::Range(0.0, 100.0))
      ->capture_default_str();
  cmd->add_option("--momentum", o->momentum, "SGD momentum")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  cmd->add_option("--hidden", o->hidden, "width of both hidden layers")
      ->type_name("H")
      ->check(CLI::Range(1, 1 << 14))
      ->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "the gradient buckets' dtype")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}))
      ->capture_default_str();
  cmd->add_flag("--final-average", o->final_average,
                "average the parameters over the ranks after the last step");
  cmd->add_option("--timeout", o->timeout_s, "seconds before the local ranks are killed")
      ->type_name("SECONDS")
      ->check(CLI::Range(1.0, 1e6))
      ->capture_default_str();
  cmd->add_option("--link", o->link_text, "each local rank on its own link, e.g. 1gbit")
      ->type_name("RATE[,LATENCY]");
  cmd->add_option("--metrics", o->metrics, "write per-step figures to a CSV file (rank 0)")
      ->type_name("FILE.csv");
  cmd->callback([o, rank, exit_code] { *exit_code = run_train(*o, rank->count() > 0); });
}

}  // namespace ddph_tool
