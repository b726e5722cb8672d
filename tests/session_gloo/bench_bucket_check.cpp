// Not a test: the figures behind comm.bucket_check in docs/benchmarks.md.
//
//   ddph_bench_bucket_check many [--world 2] [--buckets 10000] [--bytes 1024]
//       [--steps 4] [--hook noop|allreduce] [--check auto|strict|off]
//     Ranks over Gloo (forked here) submit --buckets float32 buckets of
//     --bytes each per step, the last one is_last, then flush; prints each
//     step's time on rank 0 (the first step meets every layout for the
//     first time); with allreduce, then the time of as many raw Gloo
//     allreduces of one bucket.
//
//   ddph_bench_bucket_check cost [--world 2] [--iters 40] [--sizes 4096,...]
//     The check's cost inside a session (runs of 64 KB allreduce buckets
//     that each end a step, queued, with comm.bucket_check auto against
//     off, alternating);
//     then, for each bucket size, the median time of one bucket through
//     default/allreduce (barrier, submit, flush; bucket_check off), and the
//     check's cost as a share of it.
#include <ddph/ddph.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tests/support/multiprocess.h"
#include "tests/support/session_ranks.h"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

struct Args {
  std::string mode;
  int world = 2;
  int buckets = 10000;
  int64_t bytes = 1024;
  int steps = 4;
  int iters = 40;
  std::string hook = "noop";
  std::string check;  // empty: the key is left out
  std::vector<int64_t> sizes = {4096, 65536, 262144, 1 << 20, 4 << 20, 16 << 20};
};

std::string yaml(const std::string& hook, const std::string& check) {
  std::string comm = "comm: {backend: gloo, timeout: 60s";
  if (!check.empty()) comm += ", bucket_check: " + check;
  return comm + "}\nhook: " + hook + "\n";
}

std::string hook_yaml(const std::string& name) {
  return name == "noop" ? "{family: debugging, name: noop}" : "{family: default, name: allreduce}";
}

void barrier(ddph_session_t* s) {
  ddph_comm_t* c = ddph_session_comm(s);
  if (ddph_error_t* e = c->barrier(c->ctx)) {
    std::fprintf(stderr, "barrier: %s\n", ddph_error_message(e));
    std::exit(1);
  }
}

void count_error(void* user, ddph_error_t* e) {
  if (e != nullptr) {
    ++*static_cast<int*>(user);
    std::fprintf(stderr, "bucket: %s\n", ddph_error_message(e));
    ddph_error_free(e);
  }
}

int run_many(const Args& a, int rank, int world, const std::string& dir) {
  ddph_session_t* s = ddph_test::open_session(yaml(hook_yaml(a.hook), a.check), rank, world, dir);
  if (s == nullptr) return 1;
  const size_t n = size_t(a.bytes / 4);
  std::vector<std::vector<float>> data(size_t(a.buckets), std::vector<float>(n, 1.0f));
  std::vector<ddph_test::FloatBucket> buckets;
  buckets.reserve(data.size());
  for (int i = 0; i < a.buckets; ++i)
    buckets.emplace_back(data[size_t(i)], i, 0, i + 1 == a.buckets);
  int errors = 0;
  for (int step = 0; step < a.steps; ++step) {
    barrier(s);
    const Clock::time_point t0 = Clock::now();
    for (ddph_test::FloatBucket& b : buckets) {
      b.bucket.step = uint64_t(step);
      if (ddph_error_t* e = ddph_session_submit(s, &b.bucket, count_error, &errors)) {
        std::fprintf(stderr, "submit: %s\n", ddph_error_message(e));
        return 1;
      }
    }
    ddph_error_free(ddph_session_flush(s));
    const double ms = ms_since(t0);
    if (rank == 0)
      std::printf(
          "hook %s check %s world %d: step %d, %d buckets of %lld B: %.1f ms (%.1f us per "
          "bucket)\n",
          a.hook.c_str(), a.check.empty() ? "(default)" : a.check.c_str(), world, step, a.buckets,
          (long long)a.bytes, ms, 1000.0 * ms / a.buckets);
  }
  // The same number of raw allreduces of one bucket on the session's
  // communicator: what Gloo alone takes, without the session and the hook.
  if (a.hook == "allreduce") {
    ddph_comm_t* c = ddph_session_comm(s);
    barrier(s);
    const Clock::time_point t0 = Clock::now();
    for (ddph_test::FloatBucket& b : buckets)
      if (ddph_error_t* e =
              c->allreduce(c->ctx, &b.bucket.buffer, &b.bucket.buffer, DDPH_SUM, nullptr)) {
        std::fprintf(stderr, "allreduce: %s\n", ddph_error_message(e));
        return 1;
      }
    const double ms = ms_since(t0);
    if (rank == 0)
      std::printf("raw Gloo allreduce, %d calls of %lld B: %.1f ms (%.1f us per call)\n", a.buckets,
                  (long long)a.bytes, ms, 1000.0 * ms / a.buckets);
  }
  ddph_session_close(s);
  return errors == 0 ? 0 : 1;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Times one bucket through s: submit, flush.
double time_bucket(ddph_session_t* s, ddph_test::FloatBucket& b) {
  const Clock::time_point t0 = Clock::now();
  if (ddph_test::run_bucket(s, b) != DDPH_OK) std::exit(1);
  return ms_since(t0);
}

// Submits `count` copies of b (each is_last, a step of its own), then
// flushes: the time per bucket, with the worker running them back to back.
double time_queued(ddph_session_t* s, ddph_test::FloatBucket& b, int count, uint64_t* step) {
  int errors = 0;
  std::vector<ddph_test::FloatBucket> queue(size_t(count), b);
  for (ddph_test::FloatBucket& q : queue) q.bucket.buffer.shape = q.shape;
  const Clock::time_point t0 = Clock::now();
  for (ddph_test::FloatBucket& q : queue) {
    q.bucket.step = (*step)++;
    if (ddph_error_t* e = ddph_session_submit(s, &q.bucket, count_error, &errors)) {
      std::fprintf(stderr, "submit: %s\n", ddph_error_message(e));
      std::exit(1);
    }
  }
  ddph_error_free(ddph_session_flush(s));
  if (errors != 0) std::exit(1);
  return ms_since(t0) / count;
}

int run_cost(const Args& a, int rank, int world, const std::string& dir) {
  // The check's cost inside a session, as training pays it: runs of 100
  // allreduce buckets of 64 KB, each is_last (so that auto compares before
  // each one), queued and run back to back, through a session with
  // comm.bucket_check off and one with auto, alternating run by run so that
  // a change in the machine's load hits both alike. The difference of the
  // medians per bucket is the check.
  ddph_session_t* off =
      ddph_test::open_session(yaml(hook_yaml("allreduce"), "off"), rank, world, dir);
  ddph_session_t* on =
      ddph_test::open_session(yaml(hook_yaml("allreduce"), "auto"), rank, world, dir);
  if (off == nullptr || on == nullptr) return 1;
  std::vector<float> x(16384, 1.0f);
  ddph_test::FloatBucket b(x, 0, 0, true);
  std::vector<double> t_off, t_on;
  uint64_t step_off = 0, step_on = 0;
  for (int i = 0; i < a.iters + 1; ++i) {
    barrier(off);
    const double d_off = time_queued(off, b, 100, &step_off);
    barrier(on);
    const double d_on = time_queued(on, b, 100, &step_on);
    if (i == 0) continue;  // the first step meets the layout
    t_off.push_back(d_off);
    t_on.push_back(d_on);
  }
  ddph_session_close(on);
  ddph_session_close(off);
  const double m_off = median(t_off), m_on = median(t_on), e_ms = m_on - m_off;
  if (rank == 0)
    std::printf(
        "allreduce hook, 64 KB buckets with is_last, queued: median %.4f ms per bucket "
        "with bucket_check off, %.4f ms with auto: the check costs %.4f ms\n",
        m_off, m_on, e_ms);

  ddph_session_t* s =
      ddph_test::open_session(yaml(hook_yaml("allreduce"), "off"), rank, world, dir);
  if (s == nullptr) return 1;
  for (int64_t bytes : a.sizes) {
    std::vector<float> data(size_t(bytes / 4), 1.0f);
    ddph_test::FloatBucket big(data, 0, 0, true);
    std::vector<double> hook;
    for (int i = 0; i < a.iters + 3; ++i) {
      big.bucket.step = uint64_t(i);
      barrier(s);
      const double d = time_bucket(s, big);
      if (i >= 3) hook.push_back(d);
    }
    const double h_ms = median(hook);
    if (rank == 0)
      std::printf("bucket %10lld B: allreduce hook median %.3f ms; check / hook = %.2f%%\n",
                  (long long)bytes, h_ms, 100.0 * e_ms / h_ms);
  }
  ddph_session_close(s);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app("The figures behind comm.bucket_check (see the source's header)");
  app.require_subcommand(1);
  CLI::App* many = app.add_subcommand("many", "steps of many small buckets");
  CLI::App* cost = app.add_subcommand("cost", "the check's cost against one bucket's time");
  for (CLI::App* mode : {many, cost})
    mode->add_option("--world", a.world)->check(CLI::Range(1, 64))->capture_default_str();
  many->add_option("--buckets", a.buckets)->check(CLI::Range(1, 10000000))->capture_default_str();
  many->add_option("--bytes", a.bytes)->check(CLI::Range(4, 1 << 30))->capture_default_str();
  many->add_option("--steps", a.steps)->check(CLI::Range(1, 100000))->capture_default_str();
  many->add_option("--hook", a.hook)->check(CLI::IsMember({"noop", "allreduce"}));
  many->add_option("--check", a.check)->check(CLI::IsMember({"auto", "strict", "off"}));
  cost->add_option("--iters", a.iters)->check(CLI::Range(1, 100000))->capture_default_str();
  cost->add_option("--sizes", a.sizes, "bytes, comma-separated")->delimiter(',');
  CLI11_PARSE(app, argc, argv);
  a.mode = many->parsed() ? "many" : "cost";
  auto res = ddph_test::run_ranks(
      a.world,
      [&](int rank, int world, const std::string& dir) {
        return a.mode == "many" ? run_many(a, rank, world, dir) : run_cost(a, rank, world, dir);
      },
      600.0);
  if (!ddph_test::all_passed(res)) {
    std::fprintf(stderr, "%s\n", ddph_test::describe(res).c_str());
    return 1;
  }
  return 0;
}
