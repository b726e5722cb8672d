// bytes_out of the zero hooks' allreduce protocol (ddph_session_stats): what
// the wrapped hook reports it sent, plus the parameters' broadcasts, which
// every rank counts for every share whether it sends or receives it. A
// wrapped hook that reports no stats counts as having sent nothing: the
// broadcasts alone, counted once. The wrapped hook is the fixture family's
// sum (an allreduce of the bucket, counting the bucket's bytes), built with
// and without its stats function.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "tests/loader/test_paths.h"
#include "tests/support/multiprocess.h"
#include "tests/support/optim_model.h"
#include "tests/support/session_ranks.h"

namespace {

using namespace ddph_test::optim;

constexpr int kSteps = 3;

// Every rank's bytes_out after kSteps steps of zero_step (protocol
// allreduce) around the fixture sum of fixture case `fixture`; -1 on failure.
int64_t bytes_out_after_steps(const std::string& fixture) {
  const std::string config = "plugin_path: [" + ddph_test::fixture_dir(fixture) + "]\n" +
                             yaml("optimizer: sgd, lr: 0.1, protocol: allreduce",
                                  "{family: fixture_sum, name: sum}", "zero/zero_step");
  const std::string out = ddph_test::make_temp_dir("ddph-zero-stats") + "/bytes";
  auto results = ddph_test::run_ranks(2, [&](int rank, int world, const std::string& dir) {
    ddph_session_t* s = ddph_test::open_session(config, rank, world, dir);
    DDPH_CHILD_CHECK(s != nullptr, "open failed");
    Model m;
    for (int step = 0; step < kSteps; ++step)
      DDPH_CHILD_CHECK(m.step(s, rank, uint64_t(step)) == DDPH_OK, "step %d", step);
    ddph_stats_t stats{};
    stats.struct_size = sizeof stats;
    DDPH_CHILD_CHECK(ddph_session_stats(s, &stats) == nullptr, "stats failed");
    // Both ranks count the same: rank 1 checks it against rank 0's figure.
    const uint64_t mine = stats.bytes_out;
    DDPH_CHILD_CHECK(ddph_test::same_on_all_ranks(s, &mine, sizeof mine),
                     "rank %d counts %llu bytes, another rank differs", rank,
                     (unsigned long long)mine);
    if (rank == 0) {
      FILE* f = std::fopen(out.c_str(), "w");
      DDPH_CHILD_CHECK(f != nullptr, "cannot write %s", out.c_str());
      std::fprintf(f, "%llu\n", (unsigned long long)mine);
      std::fclose(f);
    }
    ddph_session_close(s);
    return 0;
  });
  EXPECT_TRUE(ddph_test::all_passed(results)) << ddph_test::describe(results);
  unsigned long long bytes = 0;
  FILE* f = std::fopen(out.c_str(), "r");
  const bool read = f != nullptr && std::fscanf(f, "%llu", &bytes) == 1;
  if (f != nullptr) std::fclose(f);
  return read ? int64_t(bytes) : -1;
}

// One step's parameters, as float32 bytes: what the broadcasts carry, and
// what the sum hook reduces (the model's buckets hold every parameter).
int64_t parameter_bytes_per_step() {
  return int64_t(total_numel() * sizeof(float));
}

TEST(ZeroStats, AWrappedHookWithStatsAddsItsBytesToTheBroadcasts) {
  EXPECT_EQ(bytes_out_after_steps("good"), 2 * kSteps * parameter_bytes_per_step());
}

TEST(ZeroStats, AWrappedHookWithoutStatsLeavesTheBroadcastsCountedOnce) {
  EXPECT_EQ(bytes_out_after_steps("nostats"), kSteps * parameter_bytes_per_step());
}

}  // namespace
