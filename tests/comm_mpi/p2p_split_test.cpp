// comm_mpi's point-to-point, alltoallv and split on the ranks of the MPI job.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "tests/comm_mpi/harness.h"

namespace comm_mpi_test {
namespace {

using PeerFixture = CommFixture;
using PointToPoint = CommFixture;

// Every rank sends to the next before anyone receives: a blocking send of a
// message past MPI's eager limit would deadlock here. Two messages per pair
// arrive in order.
TEST_F(PointToPoint, RingWhereEveryRankSendsFirst) {
  if (world < 2) GTEST_SKIP() << "needs 2 ranks";
  const int n = 1 << 20;  // 4 MiB
  const int to = (rank + 1) % world, from = (rank + world - 1) % world;
  Tensor a(kF32, n), b(kF32, n), ra(kF32, n), rb(kF32, n);
  for (int i = 0; i < n; ++i) {
    a.as<float>()[i] = float(rank * 1000 + i % 1000);
    b.as<float>()[i] = float(-rank - 1);
  }
  EXPECT_CALL_OK(comm->send(comm->ctx, a.dl(), to, nullptr));
  EXPECT_CALL_OK(comm->send(comm->ctx, b.dl(), to, nullptr));
  // The caller's buffers are free once send returns.
  std::memset(a.as<float>(), 0, size_t(n) * 4);
  EXPECT_CALL_OK(comm->recv(comm->ctx, ra.dl(), from, nullptr));
  EXPECT_CALL_OK(comm->recv(comm->ctx, rb.dl(), from, nullptr));
  for (int i = 0; i < n; ++i) ASSERT_EQ(ra.as<float>()[i], float(from * 1000 + i % 1000)) << i;
  for (int i = 0; i < n; ++i) ASSERT_EQ(rb.as<float>()[i], float(-from - 1)) << i;
  EXPECT_CALL_OK(comm->barrier(comm->ctx));
}

TEST_F(PointToPoint, RefusesBadPeers) {
  Tensor t(kF32, 4);
  Err self = take(comm->send(comm->ctx, t.dl(), rank, nullptr));
  EXPECT_EQ(self.code, DDPH_INVALID_ARGUMENT);
  EXPECT_NE(self.message.find("this rank itself"), std::string::npos) << self.message;
  Err out = take(comm->recv(comm->ctx, t.dl(), world, nullptr));
  EXPECT_EQ(out.code, DDPH_INVALID_ARGUMENT);
  EXPECT_NE(out.message.find("outside"), std::string::npos) << out.message;
}

// A message shorter than the receiving buffer is an error, not a silently
// half-filled buffer; the communicator stays usable.
TEST_F(PointToPoint, ShortMessageIsRefused) {
  if (world < 2) GTEST_SKIP() << "needs 2 ranks";
  const int to = (rank + 1) % world, from = (rank + world - 1) % world;
  Tensor three(kI32, 3), five(kI32, 5);
  EXPECT_CALL_OK(comm->send(comm->ctx, three.dl(), to, nullptr));
  Err short_msg = take(comm->recv(comm->ctx, five.dl(), from, nullptr));
  EXPECT_EQ(short_msg.code, DDPH_INVALID_ARGUMENT);
  EXPECT_NE(short_msg.message.find("sent 3 elements, but buf holds 5"), std::string::npos)
      << short_msg.message;
  EXPECT_CALL_OK(comm->barrier(comm->ctx));
}

// Rank r sends (2r + p) % 4 elements to rank p: uneven, with empty blocks.
int64_t count(int from, int to) {
  return (2 * from + to) % 4;
}

TEST_F(PeerFixture, AlltoallvWithUnevenCounts) {
  std::vector<int64_t> sc(static_cast<size_t>(world)), rc(static_cast<size_t>(world));
  int64_t ns = 0, nr = 0;
  for (int p = 0; p < world; ++p) {
    sc[size_t(p)] = count(rank, p);
    rc[size_t(p)] = count(p, rank);
    ns += sc[size_t(p)];
    nr += rc[size_t(p)];
  }
  for (DLDataType dt : {kI32, kF16, kF64}) {
    Tensor send(dt, ns), recv(dt, nr);
    int64_t at = 0;
    for (int p = 0; p < world; ++p)
      for (int64_t i = 0; i < sc[size_t(p)]; ++i) set(send, at++, 100 * rank + 10 * p + i);
    for (int64_t i = 0; i < nr; ++i) set(recv, i, -1);
    EXPECT_CALL_OK(comm->alltoallv(comm->ctx, send.dl(), sc.data(), recv.dl(), rc.data(), nullptr));
    at = 0;
    for (int p = 0; p < world; ++p)
      for (int64_t i = 0; i < rc[size_t(p)]; ++i)
        ASSERT_EQ(get(recv, at++), 100 * p + 10 * rank + i) << "from " << p << " [" << i << "]";
  }
  // Counts that do not add up are refused before anything is sent.
  Tensor send(kI32, ns + 1), recv(kI32, nr);
  Err bad = take(comm->alltoallv(comm->ctx, send.dl(), sc.data(), recv.dl(), rc.data(), nullptr));
  EXPECT_EQ(bad.code, DDPH_INVALID_ARGUMENT);
  EXPECT_NE(bad.message.find("the sum of send_counts"), std::string::npos) << bad.message;
}

using Split = PeerFixture;

// Ranks 0 and 1 form a group ordered by descending key; rank 2 passes a
// negative color and joins none.
TEST_F(Split, GroupsByColorOrderedByKeyAndNegativeColorGetsNull) {
  if (world != 3) GTEST_SKIP() << "written for 3 ranks";
  ddph_comm_t* sub = reinterpret_cast<ddph_comm_t*>(1);
  const int color = rank == 2 ? -1 : 7;
  EXPECT_CALL_OK(comm->split(comm->ctx, color, -rank, &sub));
  if (rank == 2) {
    EXPECT_EQ(sub, nullptr);
  } else {
    ASSERT_NE(sub, nullptr);
    EXPECT_EQ(sub->size(sub->ctx), 2);
    EXPECT_EQ(sub->rank(sub->ctx), 1 - rank);  // key -rank: rank 1 comes first
    Tensor t(kI64, 3);
    for (int i = 0; i < 3; ++i) t.as<int64_t>()[i] = 10 * (rank + 1) + i;
    const uint64_t parent_before = comm->bytes_sent(comm->ctx);
    EXPECT_CALL_OK(sub->allreduce(sub->ctx, t.dl(), t.dl(), DDPH_SUM, nullptr));
    for (int i = 0; i < 3; ++i) EXPECT_EQ(t.as<int64_t>()[i], 30 + 2 * i);
    // A subgroup's traffic counts into the communicator it was split from.
    EXPECT_GT(comm->bytes_sent(comm->ctx), parent_before);
    sub->destroy(sub->ctx);
  }
  // The parent still works after its child is gone.
  Tensor one(kI32, 1);
  one.as<int32_t>()[0] = 1;
  EXPECT_CALL_OK(comm->allreduce(comm->ctx, one.dl(), one.dl(), DDPH_SUM, nullptr));
  EXPECT_EQ(one.as<int32_t>()[0], world);
}

TEST_F(Split, SingletonsAndTheWholeWorld) {
  ddph_comm_t* self = nullptr;
  EXPECT_CALL_OK(comm->split(comm->ctx, rank, 0, &self));
  ASSERT_NE(self, nullptr);
  EXPECT_EQ(self->size(self->ctx), 1);
  EXPECT_EQ(self->rank(self->ctx), 0);
  Tensor t(kF32, 2);
  t.as<float>()[0] = 6;
  t.as<float>()[1] = 7;
  EXPECT_CALL_OK(self->allreduce(self->ctx, t.dl(), t.dl(), DDPH_AVG, nullptr));
  EXPECT_EQ(t.as<float>()[0], 6.0f);
  self->destroy(self->ctx);

  ddph_comm_t* all = nullptr;
  EXPECT_CALL_OK(comm->split(comm->ctx, 0, rank, &all));
  ASSERT_NE(all, nullptr);
  EXPECT_EQ(all->size(all->ctx), world);
  EXPECT_EQ(all->rank(all->ctx), rank);
  // A split of a split.
  ddph_comm_t* again = nullptr;
  EXPECT_CALL_OK(all->split(all->ctx, rank % 2, rank, &again));
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->size(again->ctx), (world + 1 - rank % 2) / 2);
  again->destroy(again->ctx);
  all->destroy(all->ctx);
}

}  // namespace
}  // namespace comm_mpi_test
