// A rank that never joins a collective: the others get DDPH_TIMEOUT within
// the communicator's timeout, never a hang, and the broken communicator then
// fails fast. Its own ctest entry: MPI cannot cancel the abandoned
// collective, so this process's other communicators are left alone.
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>

#include "tests/comm_mpi/harness.h"
#include "tests/comm_mpi/test_main.h"

namespace comm_mpi_test {
namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

TEST(Timeout, MissingRankGivesTimeoutThenFailsFast) {
  const int timeout_ms = 3000;
  // Ranks start together, so that creating the communicator (collective,
  // under the same short timeout) cannot time out on a loaded machine.
  if (init_mode() == InitMode::kHost) MPI_Barrier(MPI_COMM_WORLD);
  Err err;
  ddph_comm_t* comm = make_comm(&err, timeout_ms);
  ASSERT_NE(comm, nullptr) << err.text();
  const int rank = comm->rank(comm->ctx), world = comm->size(comm->ctx);
  if (world < 2) GTEST_SKIP() << "needs 2 ranks";
  const int absent = world - 1;
  Tensor t(kF32, 1 << 16);
  for (int64_t i = 0; i < t.numel(); ++i) t.as<float>()[i] = float(rank);
  if (rank != absent) {
    const double start = now_s();
    Err late = take(comm->allreduce(comm->ctx, t.dl(), t.dl(), DDPH_SUM, nullptr));
    const double waited = now_s() - start;
    EXPECT_EQ(late.code, DDPH_TIMEOUT) << late.text();
    EXPECT_TRUE(contains(late.message, "allreduce")) << late.message;
    EXPECT_TRUE(contains(late.message, "the " + std::to_string(world) + " ranks")) << late.message;
    EXPECT_TRUE(contains(late.message, "unusable")) << late.message;
    // Generous bounds for a loaded machine; the point is "not a hang".
    EXPECT_GE(waited, timeout_ms / 1000.0 * 0.9);
    EXPECT_LT(waited, 60.0);
    // The caller's buffer is theirs again at once: MPI never had it.
    for (int64_t i = 0; i < t.numel(); ++i) ASSERT_EQ(t.as<float>()[i], float(rank));
    const double again_start = now_s();
    Err again = take(comm->barrier(comm->ctx));
    EXPECT_EQ(again.code, DDPH_COMM_FAILURE) << again.text();
    EXPECT_TRUE(contains(again.message, "broken since DDPH_TIMEOUT")) << again.message;
    EXPECT_LT(now_s() - again_start, timeout_ms / 1000.0);  // no second wait
  }
  comm->destroy(comm->ctx);
  // A fresh communicator works: the job goes on without the broken one.
  // The absent rank gets here at once and waits in its creation for the
  // others to give up on theirs.
  Err fresh_err;
  ddph_comm_t* fresh = make_comm(&fresh_err, 20000);
  ASSERT_NE(fresh, nullptr) << fresh_err.text();
  Tensor one(kI32, 1);
  one.as<int32_t>()[0] = 1;
  Err ok = take(fresh->allreduce(fresh->ctx, one.dl(), one.dl(), DDPH_SUM, nullptr));
  EXPECT_TRUE(ok.ok()) << ok.text();
  EXPECT_EQ(one.as<int32_t>()[0], world);
  fresh->destroy(fresh->ctx);
}

}  // namespace
}  // namespace comm_mpi_test
