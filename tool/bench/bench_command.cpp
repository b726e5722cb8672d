// `ddph bench`: times hooks on N local ranks over the config's communicator,
// next to the communicator's own fp32 allreduce of the same buffer.
//
// Each timed iteration is a pair, [barrier; t0; submit one bucket; flush;
// t1; barrier] then the same around the baseline allreduce (paired.h); a
// rank's time counts only as the slowest rank's (a collective is done when
// its last rank is). The figures reported are the medians over iterations
// and the median of the per-pair ratios. This file: the options, the
// launch of the ranks and each rank's loop over the configs; rows.h names
// and prints the rows.
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "tool/bench/measure.h"
#include "tool/bench/options.h"
#include "tool/bench/overlap.h"
#include "tool/bench/paired.h"
#include "tool/bench/params.h"
#include "tool/bench/rows.h"
#include "tool/cli.h"
#include "tool/commands.h"
#include "tool/lab/net_lab.h"
#include "tool/ranks/job_file.h"
#include "tool/ranks/launchers.h"

namespace ddph::tool {
namespace {

const char kDescription[] =
    "Runs N local ranks (default 2) over a temporary file store and times each\n"
    "config's hook on one bucket of SIZE (default 25MiB) of fp32, median of K iterations\n"
    "(default 10) of the slowest rank, beside the raw fp32 allreduce of the same\n"
    "buffer on the config's own communicator (Gloo, MPI...). Each hook iteration is\n"
    "followed by one of the allreduce, so that a burst of load hits both; the ratio is\n"
    "the median of these pairs' ratios. Rows are named by hook, and configs of one hook\n"
    "by their file's name too; sizes are in MiB (2^20 bytes). --json prints one object\n"
    "per config per line, with each pair's start and time (\"pairs\"). A powersgd\n"
    "config that will compress nothing is named before the run, with what to\n"
    "pass instead. --matrix tiles the bucket with ROWS x COLS\n"
    "parameter views (and a 1-D rest), as hooks that factor matrices (powersgd)\n"
    "need; by default the bucket is one flat parameter.\n"
    "--dtype: the bucket's dtype (bf16/f16 for mixed_precision); the baseline stays\n"
    "fp32. Hooks that take the parameters get a tensor per parameter view.\n"
    "--overlap N: a step of N buckets, each submitted after MS (default 5) of simulated\n"
    "backward, as DDP overlaps them, against the whole backward followed by every\n"
    "bucket; reports the share of the reduction hidden. hook_then_optimizer configs:\n"
    "the step with the hook against the inner hook's alone, and what it adds against\n"
    "an optimizer pass alone; reports the share of the optimizer step hidden.\n"
    "--machines M: the ranks as M simulated machines (consecutive ranks, DDPH_HOSTNAME\n"
    "set per machine, which hooks that group by host read); also reports the bytes\n"
    "sent between machines per bucket, all ranks together.\n"
    "--device cuda: the bucket and the baseline in GPU memory (rank r on GPU r modulo\n"
    "the GPU count), on a stream of their own; each time includes waiting for it.\n"
    "--link RATE[,LATENCY] (e.g. 1gbit, 10gbit, 100mbit): each rank in its own network\n"
    "namespace with one card of that rate (see `ddph lab --help`); also reports each\n"
    "time against its wire bound, the bytes a rank sends at that rate, and how busy\n"
    "the machine's cores were (JSON: cores_busy, always), which tells a hook that\n"
    "waits for the wire from one that waits for a core.";

// What CLI11 cannot check alone: the values that need parsing, and the
// flags that exclude each other. Throws std::invalid_argument.
void finish_options(BenchOptions& o) {
  o.configs.insert(o.configs.end(), o.config_args.begin(), o.config_args.end());
  if (o.configs.empty())
    throw std::invalid_argument("no config given (ddph bench --config FILE.yaml)");
  o.bucket_bytes = parse_size(o.bucket_size, "--bucket-size");
  if (o.bucket_bytes < 4) throw std::invalid_argument("--bucket-size must be at least 4B");
  const ddph::DType dtype = parse_bucket_dtype(o.dtype, "--dtype");
  if (!o.matrix.empty()) {
    parse_matrix(o.matrix, &o.matrix_rows, &o.matrix_cols);
    // A matrix larger than the bucket tiles nothing: the bench would time one
    // flat parameter while the user asked for matrices.
    const int64_t elements = o.bucket_bytes / int64_t(ddph::dtype_size(dtype));
    if (o.matrix_rows * o.matrix_cols > elements)
      throw std::invalid_argument(
          "--matrix " + o.matrix + " is " + std::to_string(o.matrix_rows * o.matrix_cols) +
          " elements, more than the --bucket-size " + o.bucket_size + " bucket holds (" +
          std::to_string(elements) + " " + o.dtype + " elements)");
  }
  if (!o.link_text.empty()) o.link = parse_link(o.link_text);
  if (o.device == "cuda" && o.overlap_buckets > 0)
    throw std::invalid_argument("--device cuda does not combine with --overlap");
  if (o.machines > 0 && o.world % o.machines != 0)
    throw std::invalid_argument("--machines " + std::to_string(o.machines) +
                                " does not divide --world " + std::to_string(o.world));
}

int run_rank(const BenchOptions& o, std::vector<Row> rows, const std::string& dir, int rank) {
  const int64_t numel = bucket_numel(o);
  size_t width = 4;
  for (const Row& row : rows) width = std::max(width, row.name.size());
  // Here, not in the launcher: reading the hooks' options loads their
  // plugins (powersgd's OpenBLAS starts threads), and the launcher must
  // fork its ranks, and make a --link lab, with no thread yet.
  if (rank == 0) warn_before_the_run(o, rows);
  if (rank == 0 && !o.json && o.overlap_buckets == 0) print_header(width);
  if (o.machines > 0) simulate_machine(rank, o.world, o.machines);
  for (size_t c = 0; c < o.configs.size(); ++c) {
    // A store directory per config: each session is its own rendezvous.
    std::string url = "file://" + dir + "/c" + std::to_string(c);
    try {
      if (o.overlap_buckets > 0) {
        OverlapOptions ov;
        ov.world = o.world;
        ov.buckets = o.overlap_buckets;
        ov.backward_ms = o.backward_ms;
        ov.iters = o.iters;
        ov.warmup = o.warmup;
        ov.json = o.json;
        const std::string work = dir + "/c" + std::to_string(c) + "/rank" + std::to_string(rank);
        if (mkdir(work.c_str(), 0700) != 0) throw std::runtime_error("cannot make " + work);
        OverlapResult r = bench_overlap(ov, o.configs[c], work, url, rank, numel);
        if (rank == 0) print_overlap(ov, o.configs[c], rows[c].label, rows[c].name, numel, r);
        continue;
      }
      Result r = bench_config(o, o.configs[c], url, rank, numel);
      const int64_t elem = int64_t(ddph::dtype_size(parse_bucket_dtype(o.dtype, "--dtype")));
      if (rank == 0) print_result(o, o.configs[c], rows[c], width, numel * elem, r);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ddph bench: rank %d: %s: %s\n", rank, o.configs[c].c_str(), e.what());
      return 1;
    }
  }
  return 0;
}

// Before any rank starts, everything that can refuse the run: the options,
// each config's hook chain (its rows), an MPI launcher's placement and the
// stores' directories, one per config. Throws std::exception.
std::vector<Row> prepare(BenchOptions& o, LauncherPlacement* mpi,
                         std::unique_ptr<ScratchDir>* scratch) {
  finish_options(o);
  std::vector<std::string> labels;
  for (const std::string& config : o.configs) labels.push_back(hook_label(config));
  std::vector<Row> rows;
  const std::vector<std::string> names = row_names(o.configs, labels);
  for (size_t c = 0; c < o.configs.size(); ++c) rows.push_back(Row{labels[c], names[c]});
  *mpi = mpi_launcher_placement(o.configs, o.link.rate_bits_per_s > 0);
  if (mpi->found) o.world = mpi->world;
  // The stores' directory goes with the launch, however it ends (ScratchDir).
  *scratch = std::make_unique<ScratchDir>("ddph-bench");
  for (size_t c = 0; c < o.configs.size(); ++c) {
    std::string sub = (*scratch)->path() + "/c" + std::to_string(c);
    if (mkdir(sub.c_str(), 0700) != 0) throw std::runtime_error("cannot make " + sub);
  }
  return rows;
}

int run_bench(BenchOptions& o) {
  LauncherPlacement mpi;
  std::unique_ptr<ScratchDir> scratch;
  std::vector<Row> rows;
  try {
    rows = prepare(o, &mpi, &scratch);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddph bench: %s\n", e.what());
    return kExitUsage;
  }
  const std::string dir = scratch->path();
  if (mpi.found) return run_rank(o, rows, dir, mpi.rank);
  std::unique_ptr<NetLab> lab;
  if (o.link.rate_bits_per_s > 0 && !(lab = open_lab("ddph bench", o.world, o.link)))
    return kLabUnavailable;
  // Forked, not exec'd: no thread exists yet in this process, and the
  // children need nothing but the parsed options.
  std::vector<RankExit> exits = run_local_ranks(
      o.world,
      [&](int r) {
        if (lab && !lab->enter(r)) return 1;
        return run_rank(o, rows, dir, r);
      },
      o.timeout_s, 10.0);
  scratch->remove();
  end_if_stopped("ddph bench");
  return report_ranks("ddph bench", exits) ? kExitOk : kExitFailed;
}

}  // namespace

void add_bench_command(CLI::App& root, int* exit_code) {
  auto o = std::make_shared<BenchOptions>();
  CLI::App* cmd = add_command(root, "bench", "time hooks on N local ranks beside the raw allreduce",
                              kDescription, o, run_bench, exit_code);
  add_config_files(cmd, "configs", &o->config_args, "YAML job files (the same as --config)",
                   &o->configs, "a YAML job file (repeatable)");
  add_whole(cmd, "--world", &o->world, "local ranks", "N", 1, 256);
  cmd->add_option("--bucket-size", o->bucket_size, "the bucket, e.g. 25MiB, 512KiB")
      ->type_name("SIZE")
      ->capture_default_str();
  add_whole(cmd, "--iters", &o->iters, "timed iterations", "K", 1, 1000000);
  add_whole(cmd, "--warmup", &o->warmup, "untimed iterations first", "W", 0, 1000000);
  add_real(cmd, "--timeout", &o->timeout_s, "seconds before the ranks are killed", "SECONDS", 1.0,
           1e6);
  cmd->add_option("--matrix", o->matrix, "tile the bucket with ROWS x COLS parameter views")
      ->type_name("ROWSxCOLS")
      ->check(non_empty());
  cmd->add_option("--dtype", o->dtype, "the bucket's dtype")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}))
      ->capture_default_str();
  cmd->add_option("--overlap", o->overlap_buckets, "a step of N buckets overlapped with backward")
      ->type_name("N")
      ->check(whole_in(1, 4096));
  add_real(cmd, "--backward-ms", &o->backward_ms, "simulated backward before each bucket", "MS",
           0.0, 1e5);
  cmd->add_option("--device", o->device, "where the bucket lives")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  cmd->add_option("--machines", o->machines, "the ranks as M simulated machines")
      ->type_name("M")
      ->check(whole_in(1, 256));
  cmd->add_option("--link", o->link_text, "each rank on its own link, e.g. 1gbit,50us")
      ->type_name("RATE[,LATENCY]")
      ->check(non_empty());
}

}  // namespace ddph::tool
