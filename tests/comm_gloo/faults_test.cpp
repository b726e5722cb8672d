// Missing, dead and silent peers: the survivors get DDPH_TIMEOUT or
// DDPH_COMM_FAILURE within the timeout, never a hang or a crash, and a
// broken communicator then fails fast.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "tests/comm_gloo/harness.h"
#include "tests/support/multiprocess.h"

namespace comm_gloo_test {
namespace {

constexpr int64_t kTimeoutMs = 2000;
// "Within the timeout", with room for a loaded 2-core machine.
constexpr double kDeadlineS = 1.5 * kTimeoutMs / 1000;

Connect config(int rank, int world, const std::string& dir) {
  Connect c;
  c.rank = rank;
  c.world = world;
  c.rendezvous = file_url(dir + "/store");
  c.timeout_ms = kTimeoutMs;
  return c;
}

TEST(CommGlooFaults, RankThatNeverJoinsTimesOut) {
  auto res = ddph_test::run_ranks(
      3,
      [](int rank, int world, const std::string& dir) {
        if (rank == 2) return 0;  // never calls create
        Err err;
        const double t0 = now_s();
        ddph_comm_t* comm = connect(config(rank, world, dir), &err);
        const double took = seconds_since(t0);
        DDPH_CHILD_CHECK(comm == nullptr, "rank %d connected without rank 2", rank);
        DDPH_CHILD_CHECK(err.code == DDPH_TIMEOUT, "rank %d: %s", rank, err.text().c_str());
        DDPH_CHILD_CHECK(err.message.find("rendezvous") != std::string::npos, "%s",
                         err.message.c_str());
        DDPH_CHILD_CHECK(took > 0.9 * kTimeoutMs / 1000 && took < kDeadlineS,
                         "rank %d gave up after %.2f s", rank, took);
        return 0;
      },
      20);
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

// After one good allreduce the victim disappears (how: by `die`); every
// survivor's next collective fails within the deadline, later calls fail
// fast as "broken", and destroy returns.
int survive(int rank, int world, const std::string& dir, int victim, void (*die)()) {
  Err err;
  ddph_comm_t* comm = connect(config(rank, world, dir), &err);
  DDPH_CHILD_CHECK(comm != nullptr, "rank %d: %s", rank, err.text().c_str());
  const int n = 1 << 20;  // 4 MiB: survivors keep writing to the dead socket
  Tensor t(kF32, n);
  err = take(comm->allreduce(comm->ctx, t.dl(), t.dl(), DDPH_SUM, nullptr));
  DDPH_CHILD_CHECK(err.ok(), "rank %d first allreduce: %s", rank, err.text().c_str());
  if (rank == victim) die();

  const double t0 = now_s();
  for (int i = 0; i < 5 && err.ok(); ++i)
    err = take(comm->allreduce(comm->ctx, t.dl(), t.dl(), DDPH_SUM, nullptr));
  const double took = seconds_since(t0);
  DDPH_CHILD_CHECK(err.code == DDPH_COMM_FAILURE || err.code == DDPH_TIMEOUT,
                   "rank %d: expected a failure, got %s", rank, err.text().c_str());
  DDPH_CHILD_CHECK(
      err.message.find("allreduce on rank " + std::to_string(rank)) != std::string::npos,
      "message does not name the collective and rank: %s", err.message.c_str());
  DDPH_CHILD_CHECK(took < kDeadlineS, "rank %d noticed the dead peer after %.2f s", rank, took);

  const double t1 = now_s();
  Err again = take(comm->barrier(comm->ctx));
  DDPH_CHILD_CHECK(again.code == DDPH_COMM_FAILURE, "%s", again.text().c_str());
  DDPH_CHILD_CHECK(again.message.find("communicator is broken since") != std::string::npos, "%s",
                   again.message.c_str());
  DDPH_CHILD_CHECK(seconds_since(t1) < 0.5, "a broken communicator must fail fast");
  comm->destroy(comm->ctx);
  return 0;
}

TEST(CommGlooFaults, RankExitingMidJobFailsTheOthers3Ranks) {
  auto res = ddph_test::run_ranks(
      3,
      [](int rank, int world, const std::string& dir) {
        return survive(rank, world, dir, 1, [] { _exit(0); });
      },
      30);
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

TEST(CommGlooFaults, RankKilledMidJobFailsTheOther2Ranks) {
  auto res = ddph_test::run_ranks(
      2,
      [](int rank, int world, const std::string& dir) {
        return survive(rank, world, dir, 0, [] { raise(SIGKILL); });
      },
      30);
  ASSERT_EQ(res.size(), 2u);
  EXPECT_EQ(res[0].signal, SIGKILL) << ddph_test::describe(res);
  EXPECT_EQ(res[1].exit_code, 0) << "the survivor must not crash or hang: "
                                 << ddph_test::describe(res);
  EXPECT_FALSE(res[1].timed_out);
}

TEST(CommGlooFaults, SilentPeerTimesOut) {
  auto res = ddph_test::run_ranks(
      2,
      [](int rank, int world, const std::string& dir) {
        Err err;
        ddph_comm_t* comm = connect(config(rank, world, dir), &err);
        DDPH_CHILD_CHECK(comm != nullptr, "rank %d: %s", rank, err.text().c_str());
        Tensor t(kI64, 16);
        if (rank == 1) {
          // Alive, connected, but never joins the collective.
          std::this_thread::sleep_for(std::chrono::milliseconds(2 * kTimeoutMs + 1000));
          _exit(0);
        }
        const double t0 = now_s();
        err = take(comm->allreduce(comm->ctx, t.dl(), t.dl(), DDPH_MAX, nullptr));
        const double took = seconds_since(t0);
        DDPH_CHILD_CHECK(err.code == DDPH_TIMEOUT, "%s", err.text().c_str());
        DDPH_CHILD_CHECK(took > 0.8 * kTimeoutMs / 1000 && took < kDeadlineS,
                         "timed out after %.2f s with a %lld ms timeout", took,
                         (long long)kTimeoutMs);
        comm->destroy(comm->ctx);
        return 0;
      },
      30);
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

}  // namespace
}  // namespace comm_gloo_test
