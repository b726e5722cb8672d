// Not a test: the small-allreduce figures of docs/benchmarks.md.
//
//   ddph_bench_small_allreduce allreduce [--world 2] [--sizes 64,1024,...]
//       [--calls 2000] [--reps 5] [--op sum|avg|max|min] [--impl ddph|gloo]
//     Ranks (forked here) run --calls back-to-back allreduces of each size
//     on comm_gloo (or, with --impl gloo, gloo::allreduce on a context of
//     its own), --reps times; rank 0 prints the median time per call.
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
  Connect c;
  c.rank = rank;
  c.world = world;
  c.rendezvous = file_url(dir + "/store");
  c.timeout_ms = 60000;
  Err err;
  ddph_comm_t* comm = connect(c, &err);
  DDPH_CHILD_CHECK(comm != nullptr, "rank %d: %s", rank, err.text().c_str());
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
  CLI11_PARSE(app, argc, argv);
  auto res = ddph_test::run_ranks(
      a.world,
      [&](int rank, int world, const std::string& dir) {
        return a.impl == "gloo" ? run_gloo(a, rank, world, dir) : run_ddph(a, rank, world, dir);
      },
      600.0);
  if (!ddph_test::all_passed(res)) {
    std::fprintf(stderr, "%s\n", ddph_test::describe(res).c_str());
    return 1;
  }
  return 0;
}
