// One rank of `ddph train`: data-parallel training of a small MLP, with the
// gradients bucketed the way PyTorch DDP buckets them and reduced through
// the hook the job file names.
#pragma once

#include <cstdint>
#include <string>

#include "tool/lab/net_lab.h"

namespace ddph::tool {

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
  std::string trace;      // --trace FILE.json: every rank's buckets (rank 0 writes)
  bool json = false;
};

// The exit code of a training that diverged: its loss or a parameter is not
// finite (NaN or infinite) on some rank at the end (docs/cli.md).
constexpr int kExitDiverged = 4;

// Opens the session as o.rank of o.world, trains, reports on rank 0, and
// compares the ranks' parameters at the end. Returns the process exit code:
// 0; kExitDiverged when the training diverged (every rank returns it); or 3
// when the replicas differ although the hook should keep them equal.
// Throws std::exception subclasses for every failure.
int train_rank(const TrainOptions& o);

}  // namespace ddph::tool
