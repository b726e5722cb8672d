// `ddph train`: the main job (one rank's work is in train/train_rank.h).
//
// Without --rank the command is a local launcher: it makes a file store and
// runs --world copies of itself as separate processes, each given --rank.
// With --rank it is one rank of a job, which is also how a multi-machine
// job starts it.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "loader/job/job_id.h"
#include "tool/cli.h"
#include "tool/commands.h"
#include "tool/lab/net_lab.h"
#include "tool/output_file.h"
#include "tool/ranks/job_file.h"
#include "tool/ranks/launchers.h"
#include "tool/train/report.h"
#include "tool/train/train_rank.h"

namespace ddph::tool {
namespace {

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
    "A training that diverges (its loss or a parameter NaN or infinite) exits 4.\n"
    "A config with comm.backend mpi under mpirun runs one rank per process, rank\n"
    "and world from the launcher (--world is then ignored).\n"
    "--job ID: the job id every store key lives under (it overrides comm.job).\n"
    "Without it, a local launch gives its ranks a fresh one (DDPH_JOB_ID) unless\n"
    "the YAML or the environment names one.\n"
    "--metrics FILE.csv: rank 0 writes one row per logged step (docs/metrics.md);\n"
    "`python3 -m ddphooks.plot FILE.csv -o FILE.png` draws it.\n"
    "--json: the progress lines and the summary as JSON objects, one per line.";

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
  check_rank_flags(rank_given ? o.rank : -1, o.world, o.rendezvous, o.link.rate_bits_per_s > 0,
                   false);
}

// A double as text that parses back to the same double.
std::string exact(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// The launcher's exit code: 0 when every rank succeeded; when every rank
// ended the same documented way (a diverged training, replicas that differ),
// that code, so that a script tells them apart from a failure; else 1.
int launch_exit_code(const std::vector<RankExit>& exits) {
  if (report_ranks("ddph train", exits)) return kExitOk;
  const int code = exits.front().code;
  for (const RankExit& e : exits)
    if (!e.exited || e.code != code || (code != kExitDiverged && code != kExitPartial))
      return kExitFailed;
  return code;
}

int launch_local(const TrainOptions& o) {
  if (access(o.config.c_str(), R_OK) != 0) {
    std::fprintf(stderr, "ddph train: cannot read config %s\n", o.config.c_str());
    return 2;
  }
  // Said here, before any rank starts, rather than by every rank.
  struct stat config_stat;
  if (stat(o.config.c_str(), &config_stat) == 0 && S_ISDIR(config_stat.st_mode)) {
    std::fprintf(stderr, "ddph train: --config %s is a directory, not a config file\n",
                 o.config.c_str());
    return kExitUsage;
  }
  // Before any rank starts: a --metrics file that cannot be written (a
  // missing folder, a full disk) is said now, not after the ranks connected.
  try {
    TrainReport::check_metrics_path(o.metrics);
    if (!o.trace.empty()) OutputFile(o.trace, "--trace").close();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddph train: %s\n", e.what());
    return kExitUsage;
  }
  // The store's directory goes with the launch, however it ends (ScratchDir).
  std::unique_ptr<ScratchDir> scratch;
  try {
    scratch = std::make_unique<ScratchDir>("ddph-train");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddph train: %s\n", e.what());
    return kExitFailed;
  }
  const std::string url = "file://" + scratch->path();
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
  if (o.link.rate_bits_per_s > 0 && !(lab = open_lab("ddph train", o.world, o.link)))
    return kLabUnavailable;
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
    if (!o.trace.empty()) args.insert(args.end(), {"--trace", o.trace});
    if (!o.job.empty()) args.insert(args.end(), {"--job", o.job});
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv("/proc/self/exe", argv.data());
    std::perror("ddph train: exec /proc/self/exe");
    return 127;
  };
  std::vector<RankExit> exits = run_local_ranks(o.world, body, o.timeout_s, 10.0);
  scratch->remove();
  end_if_stopped("ddph train");
  return launch_exit_code(exits);
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
      mpi = mpi_launcher_placement({o.config}, o.link.rate_bits_per_s > 0);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ddph train: %s\n", e.what());
      return kExitUsage;
    }
    if (!mpi.found) return launch_local(o);
    o.rank = mpi.rank;
    o.world = mpi.world;
  }
  try {
    return train_rank(o);
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
  add_config_files(cmd, "config_file", &o->config_arg, "the YAML job file (the same as --config)",
                   &o->config, "the YAML job file");
  add_whole(cmd, "--world", &o->world, "ranks", "N", 1, 1024);
  CLI::Option* rank =
      add_rank_flags(cmd, &o->rank, &o->rendezvous, "run only this rank of the job", 1023);
  cmd->add_option("--job", o->job, "the job id (overrides comm.job)")
      ->type_name("ID")
      ->check(non_empty());
  add_whole(cmd, "--steps", &o->steps, "training steps", "S", 1, 100000000);
  cmd->add_option("--bucket-size", o->bucket_size, "gradient bucket cap, e.g. 4KiB, 25MiB")
      ->type_name("SIZE")
      ->capture_default_str();
  add_whole(cmd, "--log-every", &o->log_every, "print every K steps", "K", 1, 100000000);
  add_whole(cmd, "--seed", &o->seed, "data, model and sampling seed", "", 0, UINT64_MAX);
  add_whole(cmd, "--batch", &o->batch, "examples per rank per step", "", 1, 1 << 20);
  add_real(cmd, "--lr", &o->lr, "learning rate (cosine-annealed)", "", 0.0, 100.0);
  add_real(cmd, "--momentum", &o->momentum, "SGD momentum", "", 0.0, 1.0);
  add_whole(cmd, "--hidden", &o->hidden, "width of both hidden layers", "H", 1, 1 << 14);
  cmd->add_option("--dtype", o->dtype, "the gradient buckets' dtype")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}))
      ->capture_default_str();
  cmd->add_flag("--final-average", o->final_average,
                "average the parameters over the ranks after the last step");
  add_real(cmd, "--timeout", &o->timeout_s, "seconds before the local ranks are killed", "SECONDS",
           1.0, 1e6);
  cmd->add_option("--link", o->link_text, "each local rank on its own link, e.g. 1gbit")
      ->type_name("RATE[,LATENCY]")
      ->check(non_empty());
  cmd->add_option("--metrics", o->metrics, "write per-step figures to a CSV file (rank 0)")
      ->type_name("FILE.csv")
      ->check(non_empty());
  cmd->add_option("--trace", o->trace,
                  "write every rank's buckets (queue, hook and phase spans) as a Chrome trace")
      ->type_name("FILE.json")
      ->check(non_empty());
  cmd->callback([o, rank, exit_code] { *exit_code = run_train(*o, rank->count() > 0); });
}

}  // namespace ddph::tool
