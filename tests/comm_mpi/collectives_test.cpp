// Every collective of comm_mpi and every dtype, on the ranks of the MPI job
// (3 under ctest: an odd world catches power-of-two assumptions), against
// exact arithmetic.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "tests/comm_mpi/harness.h"

namespace comm_mpi_test {
namespace {

struct DtypeCase {
  const char* name;
  DLDataType dl;
};
const DtypeCase kDtypes[] = {
    {"float32", kF32}, {"float64", kF64}, {"int32", kI32},     {"int64", kI64},
    {"uint8", kU8},    {"float16", kF16}, {"bfloat16", kBF16},
};
const ddph_reduce_op_t kOps[] = {DDPH_SUM, DDPH_AVG, DDPH_MAX, DDPH_MIN};
const char* op_name(ddph_reduce_op_t op) {
  return op == DDPH_SUM ? "SUM" : op == DDPH_AVG ? "AVG" : op == DDPH_MAX ? "MAX" : "MIN";
}

// Small integers, not monotone in rank (so MAX/MIN are not just "the last
// rank's value"): every SUM/MAX/MIN is exact in every dtype.
double value(int rank, int i) {
  return 1 + (i * 7 + rank * 3) % 11;
}

double expected(ddph_reduce_op_t op, int world, int i) {
  double sum = 0, mx = -1e300, mn = 1e300;
  for (int r = 0; r < world; ++r) {
    sum += value(r, i);
    mx = std::max(mx, value(r, i));
    mn = std::min(mn, value(r, i));
  }
  return op == DDPH_MAX ? mx : op == DDPH_MIN ? mn : sum;
}

// AVG divides each rank's value first (ddph.h): inputs world * value() make
// every quotient, and so the sum of quotients, exact in every dtype.
double input(ddph_reduce_op_t op, int rank, int world, int i) {
  return op == DDPH_AVG ? world * value(rank, i) : value(rank, i);
}

using Collectives = CommFixture;

TEST_F(Collectives, RankAndSizeAreMpis) {
  EXPECT_EQ(rank, job_rank());
  EXPECT_EQ(world, job_size());
  EXPECT_GE(comm->struct_size, DDPH_COMM_SIZE_V1_1);
  EXPECT_NE(comm->alltoallv, nullptr);
  EXPECT_NE(comm->split, nullptr);
  EXPECT_NE(comm->bytes_sent, nullptr);
}

TEST_F(Collectives, AllreduceEveryDtypeAndOp) {
  const int n = 13;
  for (const DtypeCase& d : kDtypes) {
    for (ddph_reduce_op_t op : kOps) {
      for (bool in_place : {false, true}) {
        Tensor send(d.dl, n), recv(d.dl, n);
        for (int i = 0; i < n; ++i) {
          set(send, i, input(op, rank, world, i));
          set(recv, i, 99);
        }
        Tensor& out = in_place ? send : recv;
        EXPECT_CALL_OK(comm->allreduce(comm->ctx, send.dl(), out.dl(), op, nullptr));
        for (int i = 0; i < n; ++i)
          ASSERT_EQ(get(out, i), expected(op, world, i))
              << d.name << " " << op_name(op) << (in_place ? " in place" : "") << " [" << i << "]";
        if (!in_place) {
          for (int i = 0; i < n; ++i)
            ASSERT_EQ(get(send, i), input(op, rank, world, i)) << d.name << ": send was modified";
        }
      }
    }
  }
}

// DDPH_AVG is PyTorch's divide-first mean (ddph.h), as comm_gloo computes it.
TEST_F(Collectives, AvgDividesEachRanksValueFirst) {
  // Integers truncate each quotient: rank 0's 1 and 2*world+1 give 0 and 2;
  // world-1 on every rank gives 0, where dividing the sum would give world-1.
  Tensor ints(kI32, 3);
  ints.as<int32_t>()[0] = rank == 0 ? 1 : 0;
  ints.as<int32_t>()[1] = rank == 0 ? 2 * world + 1 : 0;
  ints.as<int32_t>()[2] = world - 1;
  EXPECT_CALL_OK(comm->allreduce(comm->ctx, ints.dl(), ints.dl(), DDPH_AVG, nullptr));
  EXPECT_EQ(ints.as<int32_t>()[0], 0);
  EXPECT_EQ(ints.as<int32_t>()[1], 2);
  EXPECT_EQ(ints.as<int32_t>()[2], 0);
  // float16: 60000 on every rank. Summing first overflows float16's 65504
  // (inf); dividing first gives 60000 / world, summed back to 60000 exactly.
  if (world == 3) {
    Tensor h(kF16, 2);
    set(h, 0, 60000);
    set(h, 1, 60000);
    EXPECT_CALL_OK(comm->allreduce(comm->ctx, h.dl(), h.dl(), DDPH_AVG, nullptr));
    EXPECT_EQ(get(h, 0), 60000.0);
  }
  // float32 values that do not divide exactly: bit-equal to dividing on
  // every rank, then summing (what PyTorch's allreduce_hook does).
  const int m = 100003;
  Tensor avg(kF32, m), ref(kF32, m);
  for (int i = 0; i < m; ++i)
    avg.as<float>()[i] = ref.as<float>()[i] = 1.0f + float((i * 37 + rank * 101) % 1009) / 7.0f;
  for (int i = 0; i < m; ++i) ref.as<float>()[i] /= float(world);
  EXPECT_CALL_OK(comm->allreduce(comm->ctx, avg.dl(), avg.dl(), DDPH_AVG, nullptr));
  EXPECT_CALL_OK(comm->allreduce(comm->ctx, ref.dl(), ref.dl(), DDPH_SUM, nullptr));
  EXPECT_EQ(std::memcmp(avg.as<float>(), ref.as<float>(), size_t(m) * 4), 0);
}

TEST_F(Collectives, LargeAllreduceSum) {
  const int big = 1 << 21;  // 8 MiB: past every eager limit, many pipeline segments
  Tensor f(kF32, big);
  for (int i = 0; i < big; ++i) f.as<float>()[i] = float((i % 1000) * (rank + 1));
  EXPECT_CALL_OK(comm->allreduce(comm->ctx, f.dl(), f.dl(), DDPH_SUM, nullptr));
  const float factor = float(world * (world + 1) / 2);
  for (int i = 0; i < big; ++i) ASSERT_EQ(f.as<float>()[i], float(i % 1000) * factor) << i;
}

TEST_F(Collectives, MaxAndMinLetNanWin) {
  Tensor f(kF32, 2);
  f.as<float>()[0] = rank == 1 ? std::nanf("") : float(rank);
  f.as<float>()[1] = rank == 1 ? std::nanf("") : float(rank);
  Tensor g(kF32, 2);
  std::memcpy(g.as<float>(), f.as<float>(), 8);
  EXPECT_CALL_OK(comm->allreduce(comm->ctx, f.dl(), f.dl(), DDPH_MAX, nullptr));
  EXPECT_CALL_OK(comm->allreduce(comm->ctx, g.dl(), g.dl(), DDPH_MIN, nullptr));
  if (world > 1) {
    EXPECT_TRUE(std::isnan(f.as<float>()[0]));
    EXPECT_TRUE(std::isnan(g.as<float>()[0]));
  }
}

TEST_F(Collectives, Allgather) {
  const int n = 5;
  for (const DtypeCase& d : kDtypes) {
    Tensor send(d.dl, n), recv(d.dl, world * n);
    for (int i = 0; i < n; ++i) set(send, i, 10 * rank + i);
    EXPECT_CALL_OK(comm->allgather(comm->ctx, send.dl(), recv.dl(), nullptr));
    for (int r = 0; r < world; ++r)
      for (int i = 0; i < n; ++i) ASSERT_EQ(get(recv, r * n + i), 10 * r + i) << d.name;
  }
  // In place: send is this rank's block of recv.
  Tensor recv(kI64, world * n);
  for (int i = 0; i < world * n; ++i) recv.as<int64_t>()[i] = -1;
  for (int i = 0; i < n; ++i) recv.as<int64_t>()[rank * n + i] = 1000 * rank + i;
  int64_t shape = n;
  DLTensor mine = view(recv, rank * n, &shape);
  EXPECT_CALL_OK(comm->allgather(comm->ctx, &mine, recv.dl(), nullptr));
  for (int r = 0; r < world; ++r)
    for (int i = 0; i < n; ++i) ASSERT_EQ(recv.as<int64_t>()[r * n + i], 1000 * r + i);
}

TEST_F(Collectives, ReduceScatterEveryOp) {
  const int n = 5;
  for (const DtypeCase& d : kDtypes) {
    for (ddph_reduce_op_t op : kOps) {
      Tensor send(d.dl, world * n), recv(d.dl, n);
      for (int j = 0; j < world * n; ++j) set(send, j, input(op, rank, world, j));
      EXPECT_CALL_OK(comm->reduce_scatter(comm->ctx, send.dl(), recv.dl(), op, nullptr));
      for (int i = 0; i < n; ++i)
        ASSERT_EQ(get(recv, i), expected(op, world, rank * n + i))
            << d.name << " " << op_name(op) << " [" << i << "]";
    }
  }
}

TEST_F(Collectives, BroadcastFromEveryRoot) {
  for (int root = 0; root < world; ++root) {
    for (DLDataType dt : {kU8, kF32, kBF16}) {
      Tensor buf(dt, 7);
      for (int i = 0; i < 7; ++i) set(buf, i, rank == root ? 3 * root + i : 0);
      EXPECT_CALL_OK(comm->broadcast(comm->ctx, buf.dl(), root, nullptr));
      for (int i = 0; i < 7; ++i) ASSERT_EQ(get(buf, i), 3 * root + i) << "root " << root;
    }
  }
}

TEST_F(Collectives, BarrierAndEmptyTensors) {
  EXPECT_CALL_OK(comm->barrier(comm->ctx));
  Tensor empty(kF32, 0), empty_world(kF32, 0);
  EXPECT_CALL_OK(comm->allreduce(comm->ctx, empty.dl(), empty.dl(), DDPH_SUM, nullptr));
  EXPECT_CALL_OK(comm->allgather(comm->ctx, empty.dl(), empty_world.dl(), nullptr));
  EXPECT_CALL_OK(comm->broadcast(comm->ctx, empty.dl(), 0, nullptr));
  EXPECT_CALL_OK(comm->barrier(comm->ctx));
}

// Bytes sent follow the model documented in docs/mpi.md.
TEST_F(Collectives, BytesSentFollowTheModel) {
  const int n = 3 * 1024;  // divisible by 3: the model's ratios are exact
  Tensor f(kF32, n), g(kF32, world * n), h(kF32, n);
  const uint64_t before = comm->bytes_sent(comm->ctx);
  EXPECT_CALL_OK(comm->allreduce(comm->ctx, f.dl(), f.dl(), DDPH_SUM, nullptr));
  const uint64_t bytes = uint64_t(n) * 4, w = uint64_t(world);
  EXPECT_EQ(comm->bytes_sent(comm->ctx) - before, 2 * (w - 1) * bytes / w);
  const uint64_t mid = comm->bytes_sent(comm->ctx);
  EXPECT_CALL_OK(comm->allgather(comm->ctx, f.dl(), g.dl(), nullptr));
  EXPECT_EQ(comm->bytes_sent(comm->ctx) - mid, (w - 1) * bytes);
  const uint64_t last = comm->bytes_sent(comm->ctx);
  EXPECT_CALL_OK(comm->reduce_scatter(comm->ctx, g.dl(), h.dl(), DDPH_SUM, nullptr));
  EXPECT_EQ(comm->bytes_sent(comm->ctx) - last, (w - 1) * bytes);
}

}  // namespace
}  // namespace comm_mpi_test
