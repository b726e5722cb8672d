// How comm_mpi meets MPI and its host: who initializes MPI, the thread level,
// rank placement, traffic kept apart from the host's, and misuse refused
// without breaking the communicator.
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

// Host mode: the host's MPI is used as it is and left running (main checks
// MPI_Finalized after the tests, then finalizes it itself).
TEST(HostInit, UsesTheHostsMpiAndNeverFinalizesIt) {
  if (init_mode() != InitMode::kHost) GTEST_SKIP() << "host mode only";
  for (int i = 0; i < 2; ++i) {
    Err err;
    ddph_comm_t* comm = make_comm(&err);
    ASSERT_NE(comm, nullptr) << err.text();
    Tensor t(kI32, 1);
    t.as<int32_t>()[0] = 1;
    Err r = take(comm->allreduce(comm->ctx, t.dl(), t.dl(), DDPH_SUM, nullptr));
    EXPECT_TRUE(r.ok()) << r.text();
    EXPECT_EQ(t.as<int32_t>()[0], job_size());
    comm->destroy(comm->ctx);
  }
  int finalized = 1;
  MPI_Finalized(&finalized);
  EXPECT_EQ(finalized, 0);
}

// The host's point-to-point messages never meet ddphooks' (MPI_Comm_dup):
// the host's message, sent first with the same tag, stays for the host.
TEST(HostInit, HostTrafficNeverMatchesDdphs) {
  if (init_mode() != InitMode::kHost) GTEST_SKIP() << "host mode only";
  Err err;
  ddph_comm_t* comm = make_comm(&err);
  ASSERT_NE(comm, nullptr) << err.text();
  const int rank = job_rank(), world = job_size();
  if (world < 2) GTEST_SKIP() << "needs 2 ranks";
  const int to = (rank + 1) % world, from = (rank + world - 1) % world;
  int host_out = 1000 + rank, host_in = -1;
  MPI_Request host_send;
  MPI_Isend(&host_out, 1, MPI_INT, to, 0, MPI_COMM_WORLD, &host_send);
  Tensor mine(kI32, 1), theirs(kI32, 1);
  mine.as<int32_t>()[0] = 2000 + rank;
  Err s = take(comm->send(comm->ctx, mine.dl(), to, nullptr));
  Err r = take(comm->recv(comm->ctx, theirs.dl(), from, nullptr));
  EXPECT_TRUE(s.ok()) << s.text();
  EXPECT_TRUE(r.ok()) << r.text();
  EXPECT_EQ(theirs.as<int32_t>()[0], 2000 + from);
  MPI_Recv(&host_in, 1, MPI_INT, from, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Wait(&host_send, MPI_STATUS_IGNORE);
  EXPECT_EQ(host_in, 1000 + from);
  comm->destroy(comm->ctx);
}

// Plugin mode: nobody initialized MPI; creating the communicator does, with
// a thread level that lets the session's worker thread call MPI.
TEST(PluginInit, InitializesMpiWithThreadSupport) {
  if (init_mode() != InitMode::kPlugin) GTEST_SKIP() << "plugin mode only";
  int initialized = 1;
  MPI_Initialized(&initialized);
  if (initialized) GTEST_SKIP() << "an earlier test of this process already initialized MPI";
  Err err;
  ddph_comm_t* comm = make_comm(&err);
  ASSERT_NE(comm, nullptr) << err.text();
  MPI_Initialized(&initialized);
  EXPECT_EQ(initialized, 1);
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  EXPECT_GE(provided, MPI_THREAD_SERIALIZED);
  comm->destroy(comm->ctx);
  // Still initialized: MPI is finalized only at exit (it cannot be
  // initialized twice, and another session may follow).
  int finalized = 1;
  MPI_Finalized(&finalized);
  EXPECT_EQ(finalized, 0);
}

// A host that finalizes MPI under an open communicator gets errors, not an
// abort from MPI; opening another is refused.
TEST(HostFinalizes, CallsAfterMpiFinalizeFailCleanly) {
  if (init_mode() != InitMode::kHostFinalizes) GTEST_SKIP() << "host_finalizes mode only";
  Err err;
  ddph_comm_t* comm = make_comm(&err);
  ASSERT_NE(comm, nullptr) << err.text();
  MPI_Barrier(MPI_COMM_WORLD);
  MPI_Finalize();
  Tensor t(kF32, 4);
  Err late = take(comm->allreduce(comm->ctx, t.dl(), t.dl(), DDPH_SUM, nullptr));
  EXPECT_EQ(late.code, DDPH_COMM_FAILURE);
  EXPECT_TRUE(contains(late.message, "MPI has been finalized")) << late.message;
  comm->destroy(comm->ctx);  // must not touch MPI
  Err again;
  EXPECT_EQ(make_comm(&again), nullptr);
  EXPECT_EQ(again.code, DDPH_UNSUPPORTED);
  EXPECT_TRUE(contains(again.message, "already been finalized")) << again.message;
}

TEST(ThreadLevel, RefusesAHostMpiWithoutThreadSupport) {
  if (init_mode() != InitMode::kSingle) GTEST_SKIP() << "single mode only";
  Err err;
  EXPECT_EQ(make_comm(&err), nullptr);
  EXPECT_EQ(err.code, DDPH_UNSUPPORTED);
  EXPECT_TRUE(contains(err.message, "MPI_THREAD_SINGLE")) << err.message;
  EXPECT_TRUE(contains(err.message, "MPI_THREAD_SERIALIZED")) << err.message;
}

TEST(Placement, RankThatDisagreesWithMpiIsRefusedNamingBoth) {
  const int rank = job_rank(), world = job_size();
  Err err;
  EXPECT_EQ(make_comm(&err, 20000, (rank + 1) % world, world), nullptr);
  if (world > 1) {
    EXPECT_EQ(err.code, DDPH_INVALID_ARGUMENT);
    const std::string opened =
        "rank " + std::to_string((rank + 1) % world) + " of " + std::to_string(world);
    const std::string mpi = "rank " + std::to_string(rank) + " of " + std::to_string(world);
    EXPECT_TRUE(contains(err.message, opened)) << err.message;
    EXPECT_TRUE(contains(err.message, "MPI_COMM_WORLD says " + mpi)) << err.message;
  }
  Err size_err;
  EXPECT_EQ(make_comm(&size_err, 20000, 0, world + 1), nullptr);
  EXPECT_EQ(size_err.code, DDPH_INVALID_ARGUMENT);
  // Nothing collective was started: a good communicator follows.
  Err ok;
  ddph_comm_t* comm = make_comm(&ok);
  ASSERT_NE(comm, nullptr) << ok.text();
  comm->destroy(comm->ctx);
}

TEST(Misuse, BadArgumentsAreRefusedAndTheCommunicatorStillWorks) {
  Err err;
  ddph_comm_t* comm = make_comm(&err);
  ASSERT_NE(comm, nullptr) << err.text();
  const int world = comm->size(comm->ctx);
  Tensor a(kF32, 4), b(kF32, 5), i8(kI8, 4), g(kF32, 4 * world + 1);
  Err numel = take(comm->allreduce(comm->ctx, a.dl(), b.dl(), DDPH_SUM, nullptr));
  EXPECT_EQ(numel.code, DDPH_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(numel.message, "allreduce")) << numel.message;
  Err dtype = take(comm->allreduce(comm->ctx, i8.dl(), i8.dl(), DDPH_SUM, nullptr));
  EXPECT_EQ(dtype.code, DDPH_UNSUPPORTED);
  EXPECT_TRUE(contains(dtype.message, "int8")) << dtype.message;
  Err op = take(comm->allreduce(comm->ctx, a.dl(), a.dl(), ddph_reduce_op_t(9), nullptr));
  EXPECT_EQ(op.code, DDPH_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(op.message, "op 9")) << op.message;
  Err rs_op = take(comm->reduce_scatter(comm->ctx, g.dl(), a.dl(), ddph_reduce_op_t(-1), nullptr));
  EXPECT_EQ(rs_op.code, DDPH_INVALID_ARGUMENT);
  Err gather = take(comm->allgather(comm->ctx, a.dl(), g.dl(), nullptr));
  EXPECT_EQ(gather.code, DDPH_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(gather.message, "size() * send numel")) << gather.message;
  DLTensor on_gpu = *a.dl();
  on_gpu.device = DLDevice{kDLCUDA, 0};
  Err device = take(comm->allreduce(comm->ctx, &on_gpu, &on_gpu, DDPH_SUM, nullptr));
  ddph_test::expect_false_cuda_label_refused(device.code, device.message);
  Err root = take(comm->broadcast(comm->ctx, a.dl(), world, nullptr));
  EXPECT_EQ(root.code, DDPH_INVALID_ARGUMENT);
  Err null_out = take(comm->split(comm->ctx, 0, 0, nullptr));
  EXPECT_EQ(null_out.code, DDPH_INVALID_ARGUMENT);
  // None of that touched the network: a real collective still works.
  a.as<float>()[0] = 2;
  Err ok = take(comm->allreduce(comm->ctx, a.dl(), a.dl(), DDPH_SUM, nullptr));
  EXPECT_TRUE(ok.ok()) << ok.text();
  EXPECT_EQ(a.as<float>()[0], 2.0f * float(world));
  comm->destroy(comm->ctx);
}

}  // namespace
}  // namespace comm_mpi_test
