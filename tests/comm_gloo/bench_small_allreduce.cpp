// Not a test: the small-allreduce figures of docs/benchmarks.md.
//
//   ddph_bench_small_allreduce allreduce [--world 2] [--sizes 64,1024,...]
//       [--calls 2000] [--reps 5] [--op sum|avg|max|min] [--impl ddph|gloo]
//     Ranks (forked here) run --calls back-to-back allreduces of each size
//     on comm_gloo (or, with --impl gloo, gloo::allreduce on a context of
//     its own), --reps times; rank 0 prints the median time per call.
//
//   ddph_bench_small_allreduce metrics [--world 2] [--sizes ...] [--calls 2000]
//       [--reps 5]
//     The cost of a session's per-bucket metrics on comm_gloo: its wire
//     count (bytes_sent, one TCP_INFO read per peer socket), read twice per
//     bucket, against an allreduce of each size. Reps of --calls reads and
//     reps of --calls allreduces alternate, so that the machine's load hits
//     both; rank 0 prints the medians and their ratio.
#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tests/comm_gloo/harness.h"
#include "tests/support/multiprocess.h"

namespace {

using Clock = std::chrono::steady_clock;

double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Args {
  int world = 2;
  std::vector<int64_t> sizes = {64, 1024, 4096, 16384, 65536, 262144};
  int calls = 2000;
  int reps = 5;
  std::string op = "sum";
  std::string impl = "ddph";
};

ddph_reduce_op_t parse_op(const std::string& op) {
  if (op == "avg") return DDPH_AVG;
  if (op == "max") return DDPH_MAX;
  if (op == "min") return DDPH_MIN;
  return DDPH_SUM;
}

int run_ddph(const Args& a, int rank, int world, const std::string& dir) {
  using namespace comm_gloo_test;
  ddph_comm_t* comm = must_connect(rank, world, dir, 60000);
  if (comm == nullptr) return 1;
  for (int64_t bytes : a.sizes) {
    Tensor t(kF32, bytes / 4);
    for (int64_t i = 0; i < bytes / 4; ++i) t.as<float>()[i] = 1.0f;
    std::vector<double> per_call;
    for (int rep = 0; rep < a.reps + 1; ++rep) {
      CHILD_OK(comm->barrier(comm->ctx));
      const Clock::time_point t0 = Clock::now();
      for (int i = 0; i < a.calls; ++i)
        CHILD_OK(comm->allreduce(comm->ctx, t.dl(), t.dl(), parse_op(a.op), nullptr));
      if (rep > 0) per_call.push_back(us_since(t0) / a.calls);  // rep 0 warms up
    }
    if (rank == 0) {
      std::printf("ddph allreduce %s, world %d, %8lld B: median %.1f us per call (reps:",
                  a.op.c_str(), world, (long long)bytes, median(per_call));
      for (double d : per_call) std::printf(" %.1f", d);
      std::printf(")\n");
      std::fflush(stdout);
    }
  }
  comm->destroy(comm->ctx);
  return 0;
}

int run_metrics(const Args& a, int rank, int world, const std::string& dir) {
  using namespace comm_gloo_test;
  ddph_comm_t* comm = must_connect(rank, world, dir, 60000);
  if (comm == nullptr) return 1;
  DDPH_CHILD_CHECK(comm->bytes_sent != nullptr, "rank %d: comm_gloo counts no wire bytes", rank);
  for (int64_t bytes : a.sizes) {
    Tensor t(kF32, bytes / 4);
    for (int64_t i = 0; i < bytes / 4; ++i) t.as<float>()[i] = 1.0f;
    std::vector<double> read_us, allreduce_us;
    uint64_t sink = 0;
    for (int rep = 0; rep < a.reps + 1; ++rep) {
      Clock::time_point t0 = Clock::now();
      for (int i = 0; i < a.calls; ++i) sink += comm->bytes_sent(comm->ctx);
      const double read = us_since(t0) / a.calls;
      CHILD_OK(comm->barrier(comm->ctx));
      t0 = Clock::now();
      for (int i = 0; i < a.calls; ++i)
        CHILD_OK(comm->allreduce(comm->ctx, t.dl(), t.dl(), DDPH_SUM, nullptr));
      if (rep == 0) continue;  // rep 0 warms up
      read_us.push_back(read);
      allreduce_us.push_back(us_since(t0) / a.calls);
    }
    if (rank == 0) {
      // A bucket's record reads the count before and after it (loader/session.cpp).
      const double per_bucket = 2 * median(read_us), op = median(allreduce_us);
      std::printf(
          "world %d, %8lld B: wire count read %.2f us, per bucket (2 reads) %.2f us, "
          "allreduce %.1f us: %.2f%% of the allreduce (reads:",
          world, (long long)bytes, median(read_us), per_bucket, op, 100 * per_bucket / op);
      for (double d : read_us) std::printf(" %.2f", d);
      std::printf(") [%llu]\n", (unsigned long long)(sink & 1));
      std::fflush(stdout);
    }
  }
  comm->destroy(comm->ctx);
  return 0;
}

int run_gloo(const Args& a, int rank, int world, const std::string& dir) {
  const std::string path = dir + "/gloo";
  mkdir(path.c_str(), 0700);
  ::gloo::rendezvous::FileStore store(path);
  auto context = std::make_shared<::gloo::rendezvous::Context>(rank, world);
  auto device = ::gloo::transport::tcp::CreateDevice("127.0.0.1");
  context->connectFullMesh(store, device);
  uint32_t tag = 0;
  for (int64_t bytes : a.sizes) {
    std::vector<float> data(size_t(bytes / 4), 1.0f);
    std::vector<double> per_call;
    for (int rep = 0; rep < a.reps + 1; ++rep) {
      const Clock::time_point t0 = Clock::now();
      for (int i = 0; i < a.calls; ++i) {
        ::gloo::AllreduceOptions opts(context);
        opts.setOutput<float>(data.data(), data.size());
        opts.setReduceFunction(
            static_cast<void (*)(void*, const void*, const void*, size_t)>(&::gloo::sum<float>));
        opts.setTag(tag++);
        ::gloo::allreduce(opts);
      }
      if (rep > 0) per_call.push_back(us_since(t0) / a.calls);
    }
    if (rank == 0) {
      std::printf("gloo::allreduce sum, world %d, %8lld B: median %.1f us per call\n", world,
                  (long long)bytes, median(per_call));
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app("The small-allreduce figures of docs/benchmarks.md (see the source's header)");
  CLI::App* mode = app.add_subcommand("allreduce", "back-to-back allreduces of each size");
  app.require_subcommand(1);
  mode->add_option("--world", a.world)->check(CLI::Range(1, 64))->capture_default_str();
  mode->add_option("--sizes", a.sizes, "bytes, comma-separated")->delimiter(',');
  mode->add_option("--calls", a.calls)->check(CLI::Range(1, 100000000))->capture_default_str();
  mode->add_option("--reps", a.reps)->check(CLI::Range(1, 1000))->capture_default_str();
  mode->add_option("--op", a.op)->check(CLI::IsMember({"sum", "avg", "max", "min"}));
  mode->add_option("--impl", a.impl)->check(CLI::IsMember({"ddph", "gloo"}));
  CLI::App* metrics = app.add_subcommand("metrics", "the wire count a bucket's metrics read");
  metrics->add_option("--world", a.world)->check(CLI::Range(1, 64))->capture_default_str();
  metrics->add_option("--sizes", a.sizes, "bytes, comma-separated")->delimiter(',');
  metrics->add_option("--calls", a.calls)->check(CLI::Range(1, 100000000))->capture_default_str();
  metrics->add_option("--reps", a.reps)->check(CLI::Range(1, 1000))->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  auto res = ddph_test::run_ranks(
      a.world,
      [&](int rank, int world, const std::string& dir) {
        if (metrics->parsed()) return run_metrics(a, rank, world, dir);
        return a.impl == "gloo" ? run_gloo(a, rank, world, dir) : run_ddph(a, rank, world, dir);
      },
      600.0);
  if (!ddph_test::all_passed(res)) {
    std::fprintf(stderr, "%s\n", ddph_test::describe(res).c_str());
    return 1;
  }
  return 0;
}
