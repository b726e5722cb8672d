// `ddph choose`: from a short measurement of the link, the job file that
// `hook: {family: auto}` would settle on (docs/auto.md). Local ranks, as
// `ddph bench` launches them (forked, over a temporary file store, each on
// its own shaped link with --link), or with --rank one rank per machine,
// run an auto session on synthetic buckets of each --bucket-size until the
// chooser has explored and every bucket runs its fastest candidate; rank
// 0 prints the chosen candidate's hook as YAML (measure.h runs a rank,
// answer.h prints).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "loader/auto/candidates.h"
#include "tool/bench/params.h"
#include "tool/choose/answer.h"
#include "tool/choose/measure.h"
#include "tool/choose/options.h"
#include "tool/cli.h"
#include "tool/commands.h"
#include "tool/lab/net_lab.h"
#include "tool/output_file.h"
#include "tool/ranks/auto_choices.h"
#include "tool/ranks/launchers.h"

namespace ddph::tool {
namespace {

const char kDescription[] =
    "Runs N local ranks (default 2) over a temporary file store with\n"
    "`hook: {family: auto, name: auto}` on synthetic fp32 buckets, one of each\n"
    "--bucket-size per step (default 25MiB, DDP's bucket; repeat the flag or give a\n"
    "comma list for several), until the chooser has timed its candidates and every\n"
    "bucket runs its fastest (or --steps), then prints the job file it would choose:\n"
    "`comm:` and the chosen candidate's `hook:` with its options, `rules:` by size\n"
    "where sizes choose differently, and a comment per size with each candidate's\n"
    "mean hook time (the shortest of the ranks', of its settled steps).\n"
    "--candidates: the auto hook's candidates option (allreduce, fp16, bf16, q8,\n"
    "q4ef, powersgd4, or family/hook). --link RATE[,LATENCY]: each rank on its own\n"
    "shaped link (see `ddph lab --help`). --matrix ROWSxCOLS tiles each bucket with\n"
    "matrices, as a model's layers give PowerSGD; by default a bucket is one flat\n"
    "gradient. --json: the choice as one JSON line. --rank R --rendezvous URL: run\n"
    "only rank R, one command per machine as with `ddph train --rank`, so that the\n"
    "ranks measure the network between the machines (DDPH_JOB_ID keeps concurrent\n"
    "jobs apart); rank 0 prints. Exits 3 when the chooser had not settled by --steps.";

// What CLI11 cannot check alone. Throws std::invalid_argument naming the flag.
void finish_options(ChooseOptions& o) {
  o.bucket_bytes.clear();
  for (const std::string& size : o.bucket_sizes) {
    const int64_t bytes = parse_size(size, "--bucket-size");
    if (bytes < 4) throw std::invalid_argument("--bucket-size must be at least 4B, not " + size);
    if (std::find(o.bucket_bytes.begin(), o.bucket_bytes.end(), bytes) != o.bucket_bytes.end())
      throw std::invalid_argument("--bucket-size " + size + " is given twice");
    o.bucket_bytes.push_back(bytes);
  }
  if (o.bucket_bytes.size() > loader::kMaxSlots)
    throw std::invalid_argument("--bucket-size: " + std::to_string(o.bucket_bytes.size()) +
                                " sizes; the chooser tells at most " +
                                std::to_string(loader::kMaxSlots) + " buckets of a step apart");
  std::sort(o.bucket_bytes.begin(), o.bucket_bytes.end());
  if (!o.matrix.empty()) {
    parse_matrix(o.matrix, &o.matrix_rows, &o.matrix_cols);
    if (o.matrix_rows * o.matrix_cols > o.bucket_bytes.front() / 4)
      throw std::invalid_argument("--matrix " + o.matrix + " is more than the smallest " +
                                  "--bucket-size " + format_size(o.bucket_bytes.front()) +
                                  " holds (" + std::to_string(o.bucket_bytes.front() / 4) +
                                  " fp32 elements)");
  }
  if (!o.link_text.empty()) o.link = parse_link(o.link_text);
  check_rank_flags(o.rank, o.world, o.rendezvous, o.link.rate_bits_per_s > 0, true);
}

// The candidates the measuring job's auto hook has, read as the loader
// reads them: a bad --candidates is refused here, naming the flag.
std::vector<loader::CandidateSpec> candidates_of(const std::string& job_path,
                                                 const ChooseOptions& o) {
  try {
    return auto_candidates(job_path);
  } catch (const std::exception& e) {
    // The loader's lines name the measuring job's file and key; the user
    // wrote the flag: "candidates[1]: unknown candidate 'x': ...".
    std::string text = e.what(), out;
    for (size_t at = text.find("hook.options."); at != std::string::npos;
         at = text.find("hook.options.", at)) {
      at += std::string("hook.options.").size();
      const size_t end = text.find('\n', at);
      out += (out.empty() ? "" : "; ") + text.substr(at, end - at);
    }
    throw std::invalid_argument("--candidates " + o.candidates + ": " + (out.empty() ? text : out));
  }
}

// One rank: measures with the others, rank 0 prints the answer; the rank's
// exit code.
int choose_rank(const ChooseOptions& o, const std::string& job, const std::string& url, int r,
                const std::vector<loader::CandidateSpec>& specs) {
  try {
    std::vector<uint64_t> settle;
    for (const auto& spec : specs) settle.push_back(spec.info.settle_steps);
    const ChooseResult result = measure_choice(o, job, url, r, settle);
    if (r == 0) {
      if (o.json)
        print_choice_json(o, specs, result);
      else
        std::printf("%s", choice_yaml(o, specs, result).c_str());
      std::fflush(stdout);
    }
    if (!result.settled) {
      if (r == 0)
        std::fprintf(stderr,
                     "ddph choose: the chooser had not settled after --steps %d: the "
                     "answer is its choice of the last step; pass a larger --steps\n",
                     o.max_steps);
      return kExitPartial;
    }
    return kExitOk;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddph choose: rank %d: %s\n", r, e.what());
    return kExitFailed;
  }
}

int run_choose(ChooseOptions& o) {
  std::unique_ptr<ScratchDir> scratch;
  std::string job;
  std::vector<loader::CandidateSpec> specs;
  try {
    finish_options(o);
    scratch = std::make_unique<ScratchDir>("ddph-choose");
    job = scratch->path() + "/auto.yaml";
    write_output_file(job, measuring_job(o), "the measuring job");
    specs = candidates_of(job, o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddph choose: %s\n", e.what());
    return kExitUsage;
  }
  if (o.rank >= 0) {
    const int code = choose_rank(o, job, o.rendezvous, o.rank, specs);
    scratch->remove();
    return code;
  }
  const std::string url = "file://" + scratch->path();
  std::unique_ptr<NetLab> lab;
  if (o.link.rate_bits_per_s > 0 && !(lab = open_lab("ddph choose", o.world, o.link)))
    return kLabUnavailable;
  // Forked, not exec'd, as bench's ranks: no thread exists yet here.
  std::vector<RankExit> exits = run_local_ranks(
      o.world,
      [&](int r) {
        if (lab && !lab->enter(r)) return kExitFailed;
        return choose_rank(o, job, url, r, specs);
      },
      o.timeout_s, 10.0);
  scratch->remove();
  end_if_stopped("ddph choose");
  bool partial = true;
  for (const RankExit& e : exits) partial = partial && e.exited && e.code == kExitPartial;
  if (partial) return kExitPartial;
  return report_ranks("ddph choose", exits) ? kExitOk : kExitFailed;
}

}  // namespace

void add_choose_command(CLI::App& root, int* exit_code) {
  auto o = std::make_shared<ChooseOptions>();
  CLI::App* cmd =
      add_command(root, "choose", "measure the link and print the hook an auto hook would choose",
                  kDescription, o, run_choose, exit_code);
  add_whole(cmd, "--world", &o->world, "ranks (all local unless --rank)", "N", 2, 256);
  add_rank_flags(cmd, &o->rank, &o->rendezvous, "run only this rank of the job (one per machine)",
                 255);
  cmd->add_option("--bucket-size", o->bucket_sizes, "a bucket size, e.g. 25MiB (repeatable)")
      ->type_name("SIZE")
      ->delimiter(',')
      ->check(non_empty())
      ->capture_default_str();
  cmd->add_option("--candidates", o->candidates,
                  "the candidates, e.g. allreduce,fp16,q8 (default: the auto hook's)")
      ->type_name("LIST")
      ->check(non_empty());
  add_whole(cmd, "--steps", &o->max_steps, "at most this many steps", "S", 1, 1000000);
  add_real(cmd, "--timeout", &o->timeout_s, "seconds before the local ranks are killed", "SECONDS",
           1.0, 1e6);
  cmd->add_option("--matrix", o->matrix, "tile each bucket with ROWS x COLS parameter views")
      ->type_name("ROWSxCOLS")
      ->check(non_empty());
  cmd->add_option("--link", o->link_text, "each rank on its own link, e.g. 1gbit,50us")
      ->type_name("RATE[,LATENCY]")
      ->check(non_empty());
}

}  // namespace ddph::tool
