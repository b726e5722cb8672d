// Ranks that make different collective calls: before the agreement check
// Open MPI aborted the process on a length mismatch and returned different
// results with no error on an op mismatch. Now every rank gets
// DDPH_COMM_FAILURE naming both calls, no rank runs the call, and the same
// communicator then works.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/comm_mpi/harness.h"

namespace comm_mpi_test {
namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

struct Agreement : CommFixture {
  void SetUp() override {
    CommFixture::SetUp();
    if (world < 2) GTEST_SKIP() << "needs 2 ranks";
  }

  // The error every rank must get: DDPH_COMM_FAILURE naming this rank's call
  // and, on rank 0, the others' (elsewhere rank 0's).
  void expect_refused(const Err& e, const std::string& rank0_call, const std::string& others_call) {
    EXPECT_EQ(e.code, DDPH_COMM_FAILURE) << e.text();
    EXPECT_TRUE(contains(e.message, "not making the same call")) << e.message;
    if (rank == 0) {
      EXPECT_TRUE(contains(e.message, "this rank called " + rank0_call)) << e.message;
      EXPECT_TRUE(contains(e.message, "rank 1 called " + others_call)) << e.message;
    } else {
      EXPECT_TRUE(contains(e.message, "this rank called " + others_call)) << e.message;
      EXPECT_TRUE(contains(e.message, "rank 0 called " + rank0_call)) << e.message;
    }
  }

  // The communicator is still in step: a correct allreduce sums exactly.
  void expect_still_usable() {
    Tensor t(kI32, 5);
    for (int64_t i = 0; i < 5; ++i) t.as<int32_t>()[i] = int32_t(rank + i);
    EXPECT_CALL_OK(comm->allreduce(comm->ctx, t.dl(), t.dl(), DDPH_SUM, nullptr));
    const int ranks_sum = world * (world - 1) / 2;
    for (int64_t i = 0; i < 5; ++i) ASSERT_EQ(t.as<int32_t>()[i], ranks_sum + world * i);
  }
};

TEST_F(Agreement, LengthsThatDifferAreNamedAndNothingRuns) {
  const int64_t n = rank == 0 ? 1000 : 500;
  Tensor t(kF32, n);
  for (int64_t i = 0; i < n; ++i) t.as<float>()[i] = float(rank + 1);
  const Err e = take(comm->allreduce(comm->ctx, t.dl(), t.dl(), DDPH_SUM, nullptr));
  expect_refused(e, "allreduce SUM of 1000 float32", "allreduce SUM of 500 float32");
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(t.as<float>()[i], float(rank + 1)) << i;
  expect_still_usable();
}

TEST_F(Agreement, AnEmptyCallAgainstAFullOneIsRefused) {
  // Empty calls return without MPI, so this used to leave the full ones waiting.
  Tensor send(kF32, rank == 0 ? 0 : 4), recv(kF32, rank == 0 ? 0 : 4 * world);
  const Err e = take(comm->allgather(comm->ctx, send.dl(), recv.dl(), nullptr));
  expect_refused(e, "allgather of 0 float32", "allgather of 4 float32");
  expect_still_usable();
}

TEST_F(Agreement, OpsThatDifferAreRefusedNotSilentlyMixed) {
  Tensor t(kF32, 16);
  for (int64_t i = 0; i < 16; ++i) t.as<float>()[i] = float(rank);
  const Err e =
      take(comm->allreduce(comm->ctx, t.dl(), t.dl(), rank == 0 ? DDPH_SUM : DDPH_MAX, nullptr));
  expect_refused(e, "allreduce SUM of 16 float32", "allreduce MAX of 16 float32");
  expect_still_usable();
}

TEST_F(Agreement, DifferentCollectivesAndRootsAreNamed) {
  Tensor t(kI64, 8);
  const Err kinds = take(rank == 0 ? comm->allreduce(comm->ctx, t.dl(), t.dl(), DDPH_SUM, nullptr)
                                   : comm->broadcast(comm->ctx, t.dl(), 0, nullptr));
  expect_refused(kinds, "allreduce SUM of 8 int64", "broadcast from root 0 of 8 int64");
  const Err roots = take(comm->broadcast(comm->ctx, t.dl(), rank == 0 ? 0 : 1, nullptr));
  expect_refused(roots, "broadcast from root 0 of 8 int64", "broadcast from root 1 of 8 int64");
  const Err barrier =
      take(rank == 0 ? comm->barrier(comm->ctx)
                     : comm->allreduce(comm->ctx, t.dl(), t.dl(), DDPH_MIN, nullptr));
  expect_refused(barrier, "barrier", "allreduce MIN of 8 int64");
  expect_still_usable();
}

TEST_F(Agreement, AlltoallvCountsThatDoNotPairUpAreRefused) {
  // Every rank sends 2 elements to each peer, but rank 0 expects 3 from
  // rank 1: consistent on each rank (counts sum to the tensors), not between them.
  const size_t w = size_t(world);
  std::vector<int64_t> sc(w, 2), rc(w, 2);
  if (rank == 0) rc[1] = 3;
  Tensor send(kI32, 2 * world), recv(kI32, 2 * world + (rank == 0 ? 1 : 0));
  const Err e =
      take(comm->alltoallv(comm->ctx, send.dl(), sc.data(), recv.dl(), rc.data(), nullptr));
  EXPECT_EQ(e.code, DDPH_COMM_FAILURE) << e.text();
  EXPECT_TRUE(contains(e.message, "every rank called alltoallv of int32 elements")) << e.message;
  EXPECT_TRUE(contains(e.message, "recv_counts")) << e.message;
  expect_still_usable();
}

}  // namespace
}  // namespace comm_mpi_test
