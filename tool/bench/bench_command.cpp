// `ddph bench`: times hooks on N local ranks over the config's communicator,
// next to the communicator's own fp32 allreduce of the same buffer.
//
// Each timed iteration is [barrier; t0; submit one bucket; flush; t1;
// barrier]; a rank's time counts only as the slowest rank's (a collective is
// done when its last rank is), and the figure reported is the median over
// iterations.
// Hook and baseline iterations alternate, so drift in the machine's load
// hits both alike.
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/kernels/cast.h"
#include "tool/bench/device.h"
#include "tool/bench/measure.h"
#include "tool/bench/overlap.h"
#include "tool/bench/params.h"
#include "tool/bench/preflight.h"
#include "tool/cli.h"
#include "tool/commands.h"
#include "tool/json_line.h"
#include "tool/lab/net_lab.h"
#include "tool/ranks/buckets.h"
#include "tool/ranks/job_file.h"
#include "tool/ranks/launchers.h"
#include "tool/ranks/session.h"

namespace ddph::tool {
namespace {

struct BenchOptions {
  std::vector<std::string> configs;
  std::vector<std::string> config_args;  // positional, the same as --config
  int world = 2;
  std::string bucket_size = "25MiB";  // PyTorch DDP's default bucket_cap_mb
  int64_t bucket_bytes = 0;           // bucket_size, parsed
  int iters = 10;
  int warmup = 2;
  bool json = false;
  double timeout_s = 600;
  std::string matrix;                        // --matrix ROWSxCOLS
  int64_t matrix_rows = 0, matrix_cols = 0;  // --matrix; 0: one flat parameter
  std::string dtype = "f32";                 // of the bucket (--dtype)
  int overlap_buckets = 0;                   // --overlap N; 0: the plain bench
  double backward_ms = 5;                    // --backward-ms, with --overlap
  int machines = 0;                          // --machines M; 0: no simulated machines
  std::string device = "cpu";                // --device: where the bucket lives
  std::string link_text;                     // --link
  LinkSpec link;                             // --link; rate 0: plain loopback
};

const char kDescription[] =
    "Runs N local ranks (default 2) over a temporary file store and times each\n"
    "config's hook on one bucket of SIZE (default 25MiB) of fp32, median of K iterations\n"
    "(default 10) of the slowest rank, beside the raw fp32 allreduce of the same\n"
    "buffer on the config's own communicator (Gloo, MPI...). Rows are named by\n"
    "hook, and configs of one hook by their file's name too; sizes are in MiB\n"
    "(2^20 bytes). --json prints one object per config per line. A powersgd\n"
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

struct Result {
  double median_s = 0;
  double baseline_s = 0;
  double wire_bytes_per_rank = 0;
  double baseline_wire_bytes_per_rank = 0;
  // What the hook was handed and what it gave to collectives, summed over
  // the timed iterations on this rank (ddph_stats_t's bytes_in/bytes_out).
  uint64_t bytes_in = 0, bytes_out = 0;
  double cross_machine_bytes = -1;  // per bucket, all ranks; -1: not measured
  // Share of the machine's cores busy while the hook (the baseline) ran,
  // the mean of every rank's view; -1: not measured.
  double busy = -1, baseline_busy = -1;
  // After the run, the largest rank's: the bytes of its saved hook state
  // (an optimizer's state, a zero hook's shard), and the peak resident
  // memory of its process so far (every config benched before included).
  double state_bytes = 0, peak_rss_bytes = 0;
};

// A config's row: its hook chain (hook_label), the name the text table
// gives it (row_names) and whether a warning before the run already said
// that it will compress nothing (warn_before_the_run).
struct Row {
  std::string label, name;
  bool warned = false;
};

// "configs/quantization_rs8.yaml" -> "quantization_rs8".
std::string config_stem(const std::string& path) {
  std::string base = path.substr(path.find_last_of('/') + 1);
  const size_t dot = base.find_last_of('.');
  if (dot != std::string::npos && dot > 0) base.resize(dot);
  return base;
}

// Each config's row name: its hook chain, and where configs share a chain
// (two option sets of one hook), the config file's stem after it, e.g.
// "quantization/per_channel (quantization_rs8)"; the path as given when
// the stems are alike too, and "#N" when even the paths are.
std::vector<std::string> row_names(const std::vector<std::string>& configs,
                                   const std::vector<std::string>& labels) {
  auto shared = [&](size_t i, auto key) {
    for (size_t j = 0; j < configs.size(); ++j)
      if (j != i && labels[j] == labels[i] && key(j) == key(i)) return true;
    return false;
  };
  auto always = [](size_t) { return 0; };
  auto stem = [&](size_t k) { return config_stem(configs[k]); };
  auto path = [&](size_t k) { return configs[k]; };
  std::vector<std::string> names;
  for (size_t i = 0; i < configs.size(); ++i) {
    if (!shared(i, always)) {
      names.push_back(labels[i]);
    } else if (!shared(i, stem)) {
      names.push_back(labels[i] + " (" + stem(i) + ")");
    } else {
      std::string name = labels[i] + " (" + configs[i] + ")";
      if (shared(i, path)) {
        int n = 1;
        for (size_t j = 0; j < i; ++j) n += labels[j] == labels[i] && configs[j] == configs[i];
        name += " #" + std::to_string(n);
      }
      names.push_back(name);
    }
  }
  return names;
}

void print_header(size_t label_width) {
  std::printf("%-*s %5s %11s %11s %15s %6s %12s\n", static_cast<int>(label_width), "hook", "world",
              "bucket", "median", "raw allreduce", "ratio", "wire/rank");
}

// Hooks whose point is to send fewer bytes than they are handed.
bool meant_to_compress(const std::string& label) {
  return label.find("quantization/") != std::string::npos ||
         label.find("powersgd/") != std::string::npos ||
         label.find("_compress") != std::string::npos;
}

// A compressing hook that sent every byte it was handed measured the
// uncompressed path: say so, with the usual reasons, rather than let the
// figure pass for the hook's.
void warn_if_nothing_compressed(const BenchOptions& o, const Row& row, const Result& r) {
  if (row.warned || !meant_to_compress(row.label) || r.bytes_in == 0 || r.bytes_out < r.bytes_in)
    return;
  std::fprintf(stderr,
               "ddph bench: warning: %s compressed nothing in the timed iterations (it gave "
               "collectives %" PRIu64 " of the %" PRIu64
               " bytes it was handed): for powersgd, a flat bucket has no matrix to factor "
               "(pass --matrix ROWSxCOLS) and steps before start_iter are plain allreduce "
               "(--warmup %d + --iters %d steps ran); for quantization, buckets under "
               "min_bytes go uncompressed\n",
               row.name.c_str(), r.bytes_out, r.bytes_in, o.warmup, o.iters);
}

// The bucket's elements: o.bucket_bytes of fp32, whatever --dtype.
int64_t bucket_numel(const BenchOptions& o) {
  return std::max<int64_t>(1, o.bucket_bytes / 4 * 4 / 4);
}

// On rank 0 before any config runs: a powersgd config whose timed
// iterations will send the bucket whole is named with the reason and what
// to pass instead, so that the user can stop the run rather than read a
// plain allreduce's figure as PowerSGD's. Marks the rows it warned about. A
// config that cannot be loaded is left to its session, which names the
// problem.
void warn_before_the_run(const BenchOptions& o, const std::vector<std::string>& configs,
                         std::vector<Row>& rows) {
  if (o.overlap_buckets > 0) return;
  BenchShape shape;
  shape.numel = bucket_numel(o);
  shape.bucket_bytes =
      shape.numel * int64_t(ddph::dtype_size(parse_bucket_dtype(o.dtype, "--dtype")));
  shape.matrix_rows = o.matrix_rows;
  shape.matrix_cols = o.matrix_cols;
  shape.warmup = o.warmup;
  shape.iters = o.iters;
  for (size_t c = 0; c < configs.size(); ++c) {
    if (rows[c].label.find("powersgd/") == std::string::npos) continue;
    std::vector<CompressionForecast> forecasts;
    try {
      forecasts = forecast_compression(configs[c], shape);
    } catch (const std::exception&) {
      continue;
    }
    for (const CompressionForecast& f : forecasts) {
      std::fprintf(stderr, "ddph bench: warning: %s will compress %s: %s\n", rows[c].name.c_str(),
                   f.nothing ? "nothing in the timed iterations" : "in only some timed iterations",
                   f.why.c_str());
      rows[c].warned = rows[c].warned || f.nothing;
    }
  }
  std::fflush(stderr);
}

void print_result(const BenchOptions& o, const std::string& config, const Row& row,
                  size_t label_width, int64_t bucket_bytes, const Result& r) {
  warn_if_nothing_compressed(o, row, r);
  const std::string& label = row.label;
  double ratio = r.baseline_s > 0 ? r.median_s / r.baseline_s : 0;
  if (o.json) {
    // "config" tells apart two configs of one hook with different options.
    Json j = {{"hook", label},
              {"config", config},
              {"world", o.world},
              {"bucket_bytes", bucket_bytes},
              {"median_s", r.median_s},
              {"baseline_allreduce_median_s", r.baseline_s},
              {"wire_bytes_per_rank", json_number(std::round(r.wire_bytes_per_rank))},
              {"ratio_to_baseline", ratio},
              {"iters", o.iters},
              {"hook_bytes_in", r.bytes_in},
              {"hook_bytes_out", r.bytes_out},
              {"state_bytes_per_rank", json_number(std::round(r.state_bytes))},
              {"peak_rss_bytes", json_number(std::round(r.peak_rss_bytes))}};
    if (r.busy >= 0) {
      j["cores_busy"] = r.busy;
      j["baseline_cores_busy"] = r.baseline_busy;
    }
    if (o.machines > 0) {
      j["machines"] = o.machines;
      j["bytes_between_machines"] = json_number(std::round(r.cross_machine_bytes));
    }
    if (o.link.rate_bits_per_s > 0) {
      j["link"] = o.link.text;
      j["link_bits_per_s"] = json_number(o.link.rate_bits_per_s);
      j["wire_bound_s"] = wire_seconds(o.link, r.wire_bytes_per_rank);
      j["baseline_wire_bound_s"] = wire_seconds(o.link, r.baseline_wire_bytes_per_rank);
    }
    print_json_line(j);
  } else {
    std::printf("%-*s %5d %11s %8.3f ms %12.3f ms %6.2f %12s\n", static_cast<int>(label_width),
                row.name.c_str(), o.world, format_mib(double(bucket_bytes)).c_str(),
                r.median_s * 1e3, r.baseline_s * 1e3, ratio,
                format_mib(r.wire_bytes_per_rank).c_str());
    if (r.state_bytes > 0)
      std::printf("%-*s   hook state %s per rank, peak resident memory %s (largest rank)\n",
                  static_cast<int>(label_width), "", format_mib(r.state_bytes).c_str(),
                  format_mib(r.peak_rss_bytes, 1).c_str());
    if (o.machines > 0)
      std::printf("%-*s   %d machines: %s between machines per bucket (all ranks)\n",
                  static_cast<int>(label_width), "", o.machines,
                  format_mib(r.cross_machine_bytes).c_str());
    if (o.link.rate_bits_per_s > 0) {
      const double hook_bound = wire_seconds(o.link, r.wire_bytes_per_rank);
      const double base_bound = wire_seconds(o.link, r.baseline_wire_bytes_per_rank);
      std::printf("%-*s   at %s: wire bound %.3f ms (%.2fx), raw allreduce's %.3f ms (%.2fx)\n",
                  static_cast<int>(label_width), "", o.link.text.c_str(), hook_bound * 1e3,
                  hook_bound > 0 ? r.median_s / hook_bound : 0.0, base_bound * 1e3,
                  base_bound > 0 ? r.baseline_s / base_bound : 0.0);
      if (r.busy >= 0)
        std::printf("%-*s   cores busy: %.0f%% during the hook, %.0f%% during the raw allreduce\n",
                    static_cast<int>(label_width), "", 100 * r.busy, 100 * r.baseline_busy);
    }
  }
  std::fflush(stdout);
}

// Deterministic values in [-1, 1), different per rank so a reduction has
// something to do, and small enough that fp16 neither overflows nor
// flushes to zero.
void fill(std::vector<float>& v, int rank) {
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u + static_cast<uint32_t>(rank) * 40503u;
    v[i] = static_cast<float>((h >> 8) % 2000) / 1000.0f - 1.0f;
  }
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
  fill(pristine, rank);
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

  // times[0..K) the hook, times[K..2K) the baseline: one MAX allreduce at the end.
  std::vector<double> times(2 * o.iters);
  ddph_stats_t timed_start{};
  double wire = 0, base_wire = 0, cross = 0;
  BusyShare busy, base_busy;
  uint64_t step = 0;
  auto now = [] { return std::chrono::steady_clock::now(); };
  auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  for (int it = -o.warmup; it < o.iters; ++it, ++step) {
    if (gpu)
      gpu->upload(pristine_bucket, bucket_bytes);
    else
      std::memcpy(bucket.raw(), pristine_bucket, bucket_bytes);
    s.barrier();
    if (it == 0) timed_start = s.stats();
    uint64_t wire0 = s.stats().wire_bytes;
    const double cross0 =
        o.machines > 0 ? bytes_to_other_machines(s.comm(), rank, o.world, o.machines) : 0;
    const CpuTicks c0 = cpu_ticks();
    auto t0 = now();
    if (gpu) {
      const ddph_bucket_t on_gpu = gpu->onto(*bucket.bucket(step, true));
      s.submit(&on_gpu);
      s.flush();
      gpu->wait();  // done means enqueued: the time is the GPU's
    } else {
      s.submit(bucket.bucket(step, true));
      s.flush();
    }
    auto t1 = now();
    const CpuTicks c1 = cpu_ticks();
    uint64_t wire1 = s.stats().wire_bytes;
    // Ranks done early must not refill their buffer while the slowest one
    // is still being timed: that memcpy would steal its CPU.
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
    const uint64_t base_wire0 = s.stats().wire_bytes;
    const CpuTicks c2 = cpu_ticks();
    auto t2 = now();
    if (gpu)
      gpu->allreduce(s.comm(), numel);
    else
      s.allreduce(baseline.data(), numel, DDPH_SUM);
    auto t3 = now();
    const CpuTicks c3 = cpu_ticks();
    const uint64_t base_wire1 = s.stats().wire_bytes;
    s.barrier();
    if (it < 0) continue;
    times[it] = secs(t0, t1);
    times[o.iters + it] = secs(t2, t3);
    busy.add(c0, c1);
    base_busy.add(c2, c3);
    wire += static_cast<double>(wire1 - wire0);
    base_wire += static_cast<double>(base_wire1 - base_wire0);
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
  r.median_s = median(std::vector<double>(times.begin(), times.begin() + o.iters));
  r.baseline_s = median(std::vector<double>(times.begin() + o.iters, times.end()));
  r.wire_bytes_per_rank = wire / (static_cast<double>(o.world) * o.iters);
  r.baseline_wire_bytes_per_rank = base_wire / (static_cast<double>(o.world) * o.iters);
  const ddph_stats_t end = s.stats();
  r.bytes_in = end.bytes_in - timed_start.bytes_in;
  r.bytes_out = end.bytes_out - timed_start.bytes_out;
  if (o.machines > 0) r.cross_machine_bytes = cross < 0 ? -1 : cross / o.iters;
  return r;
}

int run_rank(const BenchOptions& o, std::vector<Row> rows, const std::string& dir, int rank) {
  const int64_t numel = bucket_numel(o);
  size_t width = 4;
  for (const Row& row : rows) width = std::max(width, row.name.size());
  // Here, not in the launcher: reading the hooks' options loads their
  // plugins (powersgd's OpenBLAS starts threads), and the launcher must
  // fork its ranks, and make a --link lab, with no thread yet.
  if (rank == 0) warn_before_the_run(o, o.configs, rows);
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

int run_bench(BenchOptions& o) {
  try {
    finish_options(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddph bench: %s\n", e.what());
    return kExitUsage;
  }
  std::vector<std::string> labels;
  for (const std::string& config : o.configs) {
    try {
      labels.push_back(hook_label(config));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ddph bench: %s\n", e.what());
      return 2;
    }
  }
  std::vector<Row> rows;
  const std::vector<std::string> names = row_names(o.configs, labels);
  for (size_t c = 0; c < o.configs.size(); ++c) rows.push_back(Row{labels[c], names[c]});
  // MPI jobs under mpirun: this process is one rank, placed by the launcher.
  LauncherPlacement mpi;
  try {
    for (size_t c = 0; c < o.configs.size(); ++c) {
      LauncherPlacement p = mpi_launcher_placement(o.configs[c]);
      if (c > 0 && p.found != mpi.found)
        throw std::runtime_error(
            "under an MPI launcher every --config must use comm.backend mpi, or none (" +
            o.configs[c] + " differs from " + o.configs[0] + ")");
      mpi = p;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddph bench: %s\n", e.what());
    return 2;
  }
  if (mpi.found) o.world = mpi.world;
  if (mpi.found && o.link.rate_bits_per_s > 0) {
    std::fprintf(stderr,
                 "ddph bench: --link runs local ranks; under an MPI launcher shape the "
                 "links outside (see docs/lab.md)\n");
    return 2;
  }
  // The stores' directory goes with the launch, however it ends (ScratchDir).
  std::unique_ptr<ScratchDir> scratch;
  std::string dir;
  try {
    scratch = std::make_unique<ScratchDir>("ddph-bench");
    dir = scratch->path();
    for (size_t c = 0; c < o.configs.size(); ++c) {
      std::string sub = dir + "/c" + std::to_string(c);
      if (mkdir(sub.c_str(), 0700) != 0) throw std::runtime_error("cannot make " + sub);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddph bench: %s\n", e.what());
    return 2;
  }
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
  CLI::App* cmd =
      add_command(root, "bench", "time hooks on N local ranks beside the raw allreduce", &o->json);
  cmd->footer(kDescription);
  cmd->add_option("configs", o->config_args, "YAML job files (the same as --config)")
      ->type_name("FILE.yaml")
      ->check(non_empty());
  cmd->add_option("--config", o->configs, "a YAML job file (repeatable)")
      ->type_name("FILE.yaml")
      ->check(non_empty());
  cmd->add_option("--world", o->world, "local ranks")
      ->type_name("N")
      ->check(whole_in(1, 256))
      ->capture_default_str();
  cmd->add_option("--bucket-size", o->bucket_size, "the bucket, e.g. 25MiB, 512KiB")
      ->type_name("SIZE")
      ->capture_default_str();
  cmd->add_option("--iters", o->iters, "timed iterations")
      ->type_name("K")
      ->check(whole_in(1, 1000000))
      ->capture_default_str();
  cmd->add_option("--warmup", o->warmup, "untimed iterations first")
      ->type_name("W")
      ->check(whole_in(0, 1000000))
      ->capture_default_str();
  cmd->add_option("--timeout", o->timeout_s, "seconds before the ranks are killed")
      ->type_name("SECONDS")
      ->check(real_in(1.0, 1e6))
      ->capture_default_str();
  cmd->add_option("--matrix", o->matrix, "tile the bucket with ROWS x COLS parameter views")
      ->type_name("ROWSxCOLS")
      ->check(non_empty());
  cmd->add_option("--dtype", o->dtype, "the bucket's dtype")
      ->check(CLI::IsMember({"f32", "bf16", "f16"}))
      ->capture_default_str();
  cmd->add_option("--overlap", o->overlap_buckets, "a step of N buckets overlapped with backward")
      ->type_name("N")
      ->check(whole_in(1, 4096));
  cmd->add_option("--backward-ms", o->backward_ms, "simulated backward before each bucket")
      ->type_name("MS")
      ->check(real_in(0.0, 1e5))
      ->capture_default_str();
  cmd->add_option("--device", o->device, "where the bucket lives")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  cmd->add_option("--machines", o->machines, "the ranks as M simulated machines")
      ->type_name("M")
      ->check(whole_in(1, 256));
  cmd->add_option("--link", o->link_text, "each rank on its own link, e.g. 1gbit,50us")
      ->type_name("RATE[,LATENCY]")
      ->check(non_empty());
  cmd->callback([o, exit_code] { *exit_code = run_bench(*o); });
}

}  // namespace ddph::tool
