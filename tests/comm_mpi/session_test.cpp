// Whole sessions (ddph_session_open from YAML) with comm.backend mpi: hooks
// run their collectives from the session's worker thread over comm_mpi, and
// give the averages exact arithmetic (or Gloo, for lossy quantization)
// gives. Runs in plugin mode: the plugin initializes MPI.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tests/comm_mpi/harness.h"
#include "tests/support/session_ranks.h"

namespace comm_mpi_test {
namespace {

using ddph_test::FloatBucket;

std::string mpi_yaml(const std::string& hook) {
  return "comm: {backend: mpi, timeout: 30s}\nhook: " + hook + "\n";
}

// A file store directory every rank of this job names alike (for the Gloo
// reference), and MPI's "no rendezvous" otherwise.
std::string job_dir() {
  return "/tmp/ddph-comm-mpi-test-" + std::to_string(getppid());
}

// MPI sessions get no rendezvous at all, as under `ddph train`.
ddph_session_t* open(const std::string& yaml) {
  ddph_session_options_t o{};
  o.struct_size = sizeof o;
  o.yaml_text = yaml.c_str();
  o.rank = job_rank();
  o.world_size = job_size();
  ddph_session_t* s = nullptr;
  Err err = take(ddph_session_open(&o, &s));
  EXPECT_TRUE(err.ok()) << err.text();
  return s;
}

// Rank r's gradient element i at step s: multiples of 6, so means over 1, 2
// or 3 ranks are exact.
float grad(int r, uint64_t s, size_t i) {
  return float(6 * (10 * r + int(i) + 3 * int(s) - 20));
}

TEST(Session, AllreduceHookAveragesExactly) {
  ddph_session_t* s = open(mpi_yaml("{family: default, name: allreduce, options: {}}"));
  ASSERT_NE(s, nullptr);
  const int world = job_size(), rank = job_rank();
  for (uint64_t step = 0; step < 3; ++step) {
    // 400 KB: large enough for the ring comm_mpi asks Open MPI for (nbc_tuning.h).
    std::vector<float> g(100003);
    for (size_t i = 0; i < g.size(); ++i) g[i] = grad(rank, step, i);
    FloatBucket b(g, 0, step, true);
    ASSERT_EQ(ddph_test::run_bucket(s, b), DDPH_OK);
    for (size_t i = 0; i < g.size(); ++i) {
      double sum = 0;
      for (int r = 0; r < world; ++r) sum += grad(r, step, i);
      ASSERT_EQ(g[i], float(sum / world)) << "step " << step << " [" << i << "]";
    }
  }
  ddph_stats_t st{};
  st.struct_size = sizeof st;
  ddph_error_free(ddph_session_stats(s, &st));
  EXPECT_EQ(st.buckets, 3u);
  if (world > 1) {
    EXPECT_GT(st.wire_bytes, 0u);
  }
  ddph_session_close(s);
}

// post_localsgd needs split: groups {0, 1} and {2} after the first step.
TEST(Session, PostLocalSgdAveragesInsideSplitGroups) {
  if (job_size() != 3) GTEST_SKIP() << "written for 3 ranks";
  ddph_session_t* s = open(
      mpi_yaml("{family: post_localsgd, name: post_localsgd, options: {start_localsgd_iter: 1, "
               "subgroups: '0,1;2'}}"));
  ASSERT_NE(s, nullptr);
  const int rank = job_rank();
  for (uint64_t step = 0; step < 3; ++step) {
    std::vector<float> g(7);
    for (size_t i = 0; i < g.size(); ++i) g[i] = grad(rank, step, i);
    FloatBucket b(g, 0, step, true);
    ASSERT_EQ(ddph_test::run_bucket(s, b), DDPH_OK);
    for (size_t i = 0; i < g.size(); ++i) {
      float want;
      if (step == 0)
        want = (grad(0, step, i) + grad(1, step, i) + grad(2, step, i)) / 3;
      else if (rank == 2)
        want = grad(2, step, i);
      else
        want = (grad(0, step, i) + grad(1, step, i)) / 2;
      ASSERT_EQ(g[i], want) << "rank " << rank << " step " << step << " [" << i << "]";
    }
  }
  ddph_session_close(s);
}

// The 8-bit reduce_scatter protocol (alltoallv + allgather) is lossy: it
// must land within quantization error of the exact mean, and give exactly
// the bits it gives over Gloo, since both only move the same codes.
TEST(Session, QuantizedReduceScatterMatchesGlooAndTheMean) {
  const std::string hook =
      "{family: quantization, name: per_channel, options: {protocol: reduce_scatter, "
      "channel_size: 512, bits: 8, min_bytes: 0}}";
  const int world = job_size(), rank = job_rank();
  const size_t n = 10007;  // ragged: not a multiple of the world or the channel
  auto input = [](int r, size_t i) { return std::sin(0.001 * double(i) * (r + 1)) + 0.1 * r; };
  auto run = [&](const std::string& backend_yaml, std::vector<float>* out) {
    ddph_session_t* s = ddph_test::open_session(backend_yaml, rank, world, job_dir());
    ASSERT_NE(s, nullptr) << backend_yaml;
    out->resize(n);
    for (size_t i = 0; i < n; ++i) (*out)[i] = float(input(rank, i));
    FloatBucket b(*out, 0, 0, true);
    ASSERT_EQ(ddph_test::run_bucket(s, b), DDPH_OK);
    ddph_session_close(s);
  };
  std::vector<float> over_mpi, over_gloo;
  run(mpi_yaml(hook), &over_mpi);
  run("comm: {backend: gloo, timeout: 30s}\nhook: " + hook + "\n", &over_gloo);
  EXPECT_EQ(std::memcmp(over_mpi.data(), over_gloo.data(), n * 4), 0);
  // Each rank's value is within half a step (range / 255) of its code, for a
  // channel range of at most 2.2 + 0.2: the mean is off by less than 0.01.
  for (size_t i = 0; i < n; ++i) {
    double mean = 0;
    for (int r = 0; r < world; ++r) mean += input(r, i) / world;
    ASSERT_NEAR(over_mpi[i], mean, 0.01) << i;
  }
  if (rank == 0) std::system(("rm -rf " + job_dir()).c_str());
}

TEST(Session, OpeningOneInitializesMpi) {
  ddph_session_t* s = open(mpi_yaml("{family: default, name: allreduce, options: {}}"));
  ASSERT_NE(s, nullptr);
  int initialized = 0;
  MPI_Initialized(&initialized);
  EXPECT_EQ(initialized, 1);
  ddph_session_close(s);
}

}  // namespace
}  // namespace comm_mpi_test
