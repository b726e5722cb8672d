// Results of every collective on 2 and 3 real processes over real gloo.
#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/base/error.h"
#include "core/comm/comm_call.h"
#include "plugins/comm_gloo/small_allreduce.h"
#include "tests/comm_gloo/harness.h"
#include "tests/support/multiprocess.h"

namespace comm_gloo_test {
namespace {

struct DtypeCase {
  const char* name;
  DLDataType dl;
  bool integer;
};
const DtypeCase kDtypes[] = {
    {"float32", kF32, false},   {"float64", kF64, false}, {"int32", kI32, true},
    {"int64", kI64, true},      {"uint8", kU8, true},     {"float16", kF16, false},
    {"bfloat16", kBF16, false},
};
const ddph_reduce_op_t kOps[] = {DDPH_SUM, DDPH_AVG, DDPH_MAX, DDPH_MIN};
const char* op_name(ddph_reduce_op_t op) {
  return op == DDPH_SUM ? "SUM" : op == DDPH_AVG ? "AVG" : op == DDPH_MAX ? "MAX" : "MIN";
}

// Small integers, not monotone in rank (so MAX/MIN are not just "the last
// rank's value"), and with the last rank topping up so the sum divides by
// world: every SUM/AVG/MAX/MIN is then exact in every dtype, 16-bit included.
double value(int rank, int world, int i) {
  double v = 1 + (i * 7 + rank * 3) % 11;
  if (rank == world - 1) {
    int sum = 0;
    for (int r = 0; r < world - 1; ++r) sum += 1 + (i * 7 + r * 3) % 11;
    sum += int(v);
    v += (world - sum % world) % world;
  }
  return v;
}

double expected(ddph_reduce_op_t op, int world, int i) {
  double sum = 0, mx = -1e300, mn = 1e300;
  for (int r = 0; r < world; ++r) {
    double v = value(r, world, i);
    sum += v;
    mx = std::max(mx, v);
    mn = std::min(mn, v);
  }
  switch (op) {
    case DDPH_SUM:
      return sum;
    case DDPH_AVG:  // inputs are world * value() (see input()), each divided exactly
      return sum;
    case DDPH_MAX:
      return mx;
    default:
      return mn;
  }
}

// AVG divides each rank's value first (ddph.h), so its inputs are multiples
// of the world size: every quotient, and so the sum, is exact in every dtype.
double input(ddph_reduce_op_t op, int rank, int world, int i) {
  return op == DDPH_AVG ? world * value(rank, world, i) : value(rank, world, i);
}

int allreduce_body(int rank, int world, const std::string& dir) {
  ddph_comm_t* comm = must_connect(rank, world, dir);
  DDPH_CHILD_CHECK(comm != nullptr, "rank %d", rank);
  DDPH_CHILD_CHECK(comm->rank(comm->ctx) == rank && comm->size(comm->ctx) == world, "rank %d",
                   rank);
  // 13 elements take the small path (plugins/comm_gloo/small_allreduce.h),
  // one element more than 32 KiB the ring.
  for (const DtypeCase& d : kDtypes) {
    for (int n : {13, 32768 / (d.dl.bits / 8) + 1}) {
      for (ddph_reduce_op_t op : kOps) {
        for (bool in_place : {false, true}) {
          Tensor send(d.dl, n), recv(d.dl, n);
          for (int i = 0; i < n; ++i) {
            set(send, i, input(op, rank, world, i));
            set(recv, i, 99);
          }
          Tensor& out = in_place ? send : recv;
          CHILD_OK(comm->allreduce(comm->ctx, send.dl(), out.dl(), op, nullptr));
          for (int i = 0; i < n; ++i)
            DDPH_CHILD_CHECK(get(out, i) == expected(op, world, i),
                             "%s %s%s of %d [%d]: got %g, expected %g", d.name, op_name(op),
                             in_place ? " in place" : "", n, i, get(out, i),
                             expected(op, world, i));
          if (!in_place)
            for (int i = 0; i < n; ++i)
              DDPH_CHILD_CHECK(get(send, i) == input(op, rank, world, i), "%s: send was modified",
                               d.name);
        }
      }
    }
  }
  // AVG divides first, and integers truncate like C division: rank 0's 1 and
  // 2*world+1 give 0 and 2; world-1 on every rank gives 0 (each quotient is 0),
  // where dividing the sum would give world-1.
  Tensor ints(kI32, 3);
  ints.as<int32_t>()[0] = rank == 0 ? 1 : 0;
  ints.as<int32_t>()[1] = rank == 0 ? 2 * world + 1 : 0;
  ints.as<int32_t>()[2] = world - 1;
  CHILD_OK(comm->allreduce(comm->ctx, ints.dl(), ints.dl(), DDPH_AVG, nullptr));
  DDPH_CHILD_CHECK(
      ints.as<int32_t>()[0] == 0 && ints.as<int32_t>()[1] == 2 && ints.as<int32_t>()[2] == 0,
      "int AVG: %d %d %d", ints.as<int32_t>()[0], ints.as<int32_t>()[1], ints.as<int32_t>()[2]);
  // fp32 AVG of 1/3-ish values on a buffer of many ring segments equals, bit
  // for bit, dividing first and then summing (PyTorch's allreduce_hook);
  // gloo_reference_test.cpp holds both to gloo's own ring.
  {
    const int m = 700001;  // two segments per chunk, and a ragged end
    Tensor avg(kF32, m), ref(kF32, m);
    for (int i = 0; i < m; ++i)
      avg.as<float>()[i] = ref.as<float>()[i] = 1.0f + float((i * 37 + rank * 101) % 1009) / 7.0f;
    for (int i = 0; i < m; ++i) ref.as<float>()[i] /= float(world);
    CHILD_OK(comm->allreduce(comm->ctx, avg.dl(), avg.dl(), DDPH_AVG, nullptr));
    CHILD_OK(comm->allreduce(comm->ctx, ref.dl(), ref.dl(), DDPH_SUM, nullptr));
    DDPH_CHILD_CHECK(std::memcmp(avg.as<float>(), ref.as<float>(), size_t(m) * 4) == 0,
                     "fp32 AVG differs from divide-then-SUM");
  }
  // A buffer of several ring segments exercises its chunking.
  const int big = 600000;
  Tensor f(kF32, big);
  for (int i = 0; i < big; ++i) f.as<float>()[i] = float((i % 1000) * (rank + 1));
  CHILD_OK(comm->allreduce(comm->ctx, f.dl(), f.dl(), DDPH_SUM, nullptr));
  const float factor = float(world * (world + 1) / 2);
  for (int i = 0; i < big; ++i)
    DDPH_CHILD_CHECK(f.as<float>()[i] == float(i % 1000) * factor, "big[%d] = %g", i,
                     double(f.as<float>()[i]));
  comm->destroy(comm->ctx);
  return 0;
}

int gather_scatter_body(int rank, int world, const std::string& dir) {
  ddph_comm_t* comm = must_connect(rank, world, dir);
  DDPH_CHILD_CHECK(comm != nullptr, "rank %d", rank);
  const int n = 5;
  // allgather: out of place, then in place (send is this rank's block of recv).
  {
    Tensor send(kI64, n), recv(kI64, world * n);
    for (int i = 0; i < n; ++i) send.as<int64_t>()[i] = 1000 * rank + i;
    CHILD_OK(comm->allgather(comm->ctx, send.dl(), recv.dl(), nullptr));
    for (int r = 0; r < world; ++r)
      for (int i = 0; i < n; ++i)
        DDPH_CHILD_CHECK(recv.as<int64_t>()[r * n + i] == 1000 * r + i, "allgather [%d][%d]", r, i);
  }
  {
    Tensor recv(kF32, world * n);
    for (int i = 0; i < world * n; ++i) recv.as<float>()[i] = -1;
    for (int i = 0; i < n; ++i) recv.as<float>()[rank * n + i] = float(10 * rank + i);
    int64_t shape = n;
    DLTensor mine = view(recv, rank * n, &shape);
    CHILD_OK(comm->allgather(comm->ctx, &mine, recv.dl(), nullptr));
    for (int r = 0; r < world; ++r)
      for (int i = 0; i < n; ++i)
        DDPH_CHILD_CHECK(recv.as<float>()[r * n + i] == float(10 * r + i),
                         "in-place allgather [%d][%d] = %g", r, i,
                         double(recv.as<float>()[r * n + i]));
  }
  // reduce_scatter: rank r gets the reduction of block r. Small blocks take
  // the small exchange; blocks of 300001 doubles (2.4 MB, three ring
  // segments each) the ring over the blocks.
  for (const int b : {n, 300001})
    for (ddph_reduce_op_t op : kOps) {
      Tensor send(kF64, world * b), recv(kF64, b);
      // AVG divides each rank's value first: scale by world so the quotients are exact.
      const double scale = op == DDPH_AVG ? world : 1;
      for (int j = 0; j < world * b; ++j) send.as<double>()[j] = scale * (rank + 1) * (j + 1);
      CHILD_OK(comm->reduce_scatter(comm->ctx, send.dl(), recv.dl(), op, nullptr));
      for (int i = 0; i < b; ++i) {
        const int j = rank * b + i;
        double sum = 0;
        for (int r = 0; r < world; ++r) sum += double((r + 1) * (j + 1));
        double want = op == DDPH_SUM   ? sum
                      : op == DDPH_AVG ? sum
                      : op == DDPH_MAX ? double(world * (j + 1))
                                       : double(j + 1);
        DDPH_CHILD_CHECK(recv.as<double>()[i] == want, "reduce_scatter %s [%d] = %g, want %g",
                         op_name(op), i, recv.as<double>()[i], want);
      }
    }
  // In place (recv is block rank() of send): the ring combines into send.
  {
    const int b = 300001;
    Tensor send(kF64, world * b);
    for (int j = 0; j < world * b; ++j) send.as<double>()[j] = world * (rank + 1) * double(j + 1);
    int64_t shape = b;
    DLTensor mine = view(send, rank * b, &shape);
    CHILD_OK(comm->reduce_scatter(comm->ctx, send.dl(), &mine, DDPH_AVG, nullptr));
    for (int i = 0; i < b; ++i) {
      const int j = rank * b + i;
      const double want = double(world * (world + 1) / 2) * (j + 1);
      DDPH_CHILD_CHECK(send.as<double>()[j] == want, "in-place reduce_scatter [%d] = %g, want %g",
                       i, send.as<double>()[j], want);
    }
  }
  // broadcast from the last rank (non-zero root).
  {
    const int root = world - 1;
    Tensor buf(kF64, n);
    for (int i = 0; i < n; ++i) buf.as<double>()[i] = rank == root ? 0.25 * i + 7 : -5;
    CHILD_OK(comm->broadcast(comm->ctx, buf.dl(), root, nullptr));
    for (int i = 0; i < n; ++i)
      DDPH_CHILD_CHECK(buf.as<double>()[i] == 0.25 * i + 7, "broadcast [%d] = %g", i,
                       buf.as<double>()[i]);
  }
  comm->destroy(comm->ctx);
  return 0;
}

int barrier_p2p_body(int rank, int world, const std::string& dir) {
  ddph_comm_t* comm = must_connect(rank, world, dir);
  DDPH_CHILD_CHECK(comm != nullptr, "rank %d", rank);
  // barrier: late ranks write a marker just before it; after it, every
  // marker must exist on every rank.
  std::this_thread::sleep_for(std::chrono::milliseconds(150 * rank));
  std::string mark = dir + "/mark" + std::to_string(rank);
  FILE* f = std::fopen(mark.c_str(), "w");
  DDPH_CHILD_CHECK(f != nullptr, "rank %d", rank);
  std::fclose(f);
  CHILD_OK(comm->barrier(comm->ctx));
  for (int r = 0; r < world; ++r) {
    struct stat st;
    std::string other = dir + "/mark" + std::to_string(r);
    DDPH_CHILD_CHECK(stat(other.c_str(), &st) == 0, "rank %d passed the barrier before rank %d",
                     rank, r);
  }
  // send/recv ring, every rank sending first (sends are buffered), three
  // rounds of two messages each: matching is in order per (sender, receiver).
  const int next = (rank + 1) % world, prev = (rank + world - 1) % world;
  for (int round = 0; round < 3; ++round) {
    Tensor a(kI32, 4), b(kI32, 4), x(kI32, 4), y(kI32, 4);
    for (int i = 0; i < 4; ++i) {
      a.as<int32_t>()[i] = 100 * rank + 10 * round + i;
      b.as<int32_t>()[i] = -(100 * rank + 10 * round + i);
    }
    CHILD_OK(comm->send(comm->ctx, a.dl(), next, nullptr));
    CHILD_OK(comm->send(comm->ctx, b.dl(), next, nullptr));
    CHILD_OK(comm->recv(comm->ctx, x.dl(), prev, nullptr));
    CHILD_OK(comm->recv(comm->ctx, y.dl(), prev, nullptr));
    for (int i = 0; i < 4; ++i) {
      DDPH_CHILD_CHECK(x.as<int32_t>()[i] == 100 * prev + 10 * round + i, "round %d x[%d]=%d",
                       round, i, x.as<int32_t>()[i]);
      DDPH_CHILD_CHECK(y.as<int32_t>()[i] == -(100 * prev + 10 * round + i), "round %d y[%d]=%d",
                       round, i, y.as<int32_t>()[i]);
    }
  }
  comm->destroy(comm->ctx);
  return 0;
}

int bytes_sent_body(int rank, int world, const std::string& dir) {
  ddph_comm_t* comm = must_connect(rank, world, dir);
  DDPH_CHILD_CHECK(comm != nullptr && comm->bytes_sent != nullptr, "rank %d", rank);
  const int n = 1 << 18;  // 1 MiB of float32
  const uint64_t payload = uint64_t(n) * 4;
  Tensor buf(kF32, n);
  uint64_t before = comm->bytes_sent(comm->ctx);
  CHILD_OK(comm->allreduce(comm->ctx, buf.dl(), buf.dl(), DDPH_SUM, nullptr));
  // A ring allreduce puts 2 (W-1)/W of the buffer on the wire from each rank.
  const uint64_t want = 2 * (world - 1) * payload / world;
  // The last segments may still sit in the socket buffer; the kernel sends
  // them within moments.
  uint64_t grew = 0;
  for (int i = 0; i < 200 && grew < want; ++i) {
    grew = comm->bytes_sent(comm->ctx) - before;
    if (grew < want) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  DDPH_CHILD_CHECK(grew >= want, "bytes_sent grew by %llu, expected at least %llu",
                   (unsigned long long)grew, (unsigned long long)want);
  DDPH_CHILD_CHECK(grew < 2 * payload, "bytes_sent grew by %llu for a %llu-byte allreduce",
                   (unsigned long long)grew, (unsigned long long)payload);
  // And it keeps counting.
  CHILD_OK(comm->allreduce(comm->ctx, buf.dl(), buf.dl(), DDPH_SUM, nullptr));
  uint64_t again = 0;
  for (int i = 0; i < 200 && again < grew + want; ++i) {
    again = comm->bytes_sent(comm->ctx) - before;
    if (again < grew + want) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  DDPH_CHILD_CHECK(again >= grew + want, "second allreduce: %llu", (unsigned long long)again);
  // A reduce-scatter puts (W-1)/W of the buffer on the wire, half of what
  // an allreduce sends.
  {
    Tensor whole(kF32, n - n % world), block(kF32, n / world);
    const uint64_t start = comm->bytes_sent(comm->ctx);
    CHILD_OK(comm->reduce_scatter(comm->ctx, whole.dl(), block.dl(), DDPH_AVG, nullptr));
    const uint64_t rs_want = uint64_t(world - 1) * uint64_t(n / world) * 4;
    uint64_t sent = 0;
    for (int i = 0; i < 200 && sent < rs_want; ++i) {
      sent = comm->bytes_sent(comm->ctx) - start;
      if (sent < rs_want) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    DDPH_CHILD_CHECK(sent >= rs_want && sent < rs_want + rs_want / 8,
                     "a reduce-scatter of %llu bytes sent %llu, expected %llu",
                     (unsigned long long)payload, (unsigned long long)sent,
                     (unsigned long long)rs_want);
  }
  // A small allreduce sends the whole buffer to every peer (after a header
  // of 48 bytes and a seal of 8): (W - 1) times 16 KB, where the ring would send
  // 2 (W - 1) / W of it.
  {
    const uint64_t small_bytes = 16384, small_want = uint64_t(world - 1) * small_bytes;
    Tensor small(kF32, int64_t(small_bytes / 4));
    const uint64_t start = comm->bytes_sent(comm->ctx);
    CHILD_OK(comm->allreduce(comm->ctx, small.dl(), small.dl(), DDPH_SUM, nullptr));
    uint64_t sent = 0;
    for (int i = 0; i < 200 && sent < small_want; ++i) {
      sent = comm->bytes_sent(comm->ctx) - start;
      if (sent < small_want) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    DDPH_CHILD_CHECK(sent >= small_want && sent < 2 * small_want,
                     "a %llu-byte allreduce sent %llu bytes, expected %llu and a little framing",
                     (unsigned long long)small_bytes, (unsigned long long)sent,
                     (unsigned long long)small_want);
  }
  comm->destroy(comm->ctx);
  return 0;
}

// alltoallv: rank s sends count(s, p) elements to rank p (zeros included),
// valued by (s, p, i), natively and through core's send/recv fallback (a
// copy of the table that claims ABI 1.0, so its alltoallv is not read).
int64_t a2a_count(int s, int p, int scale) {
  return ((s * 3 + p * 5) % 4) * scale;
}
double a2a_value(int s, int p, int64_t i) {
  return double(1000 * s + 100 * p) + double(i % 97);
}

ddph_error_t* a2a_must_not_be_called(void*, const DLTensor*, const int64_t*, DLTensor*,
                                     const int64_t*, void*) {
  std::fprintf(stderr, "alltoallv called through a v1.0 table\n");
  std::abort();
}

int alltoallv_body(int rank, int world, const std::string& dir) {
  ddph_comm_t* comm = must_connect(rank, world, dir);
  DDPH_CHILD_CHECK(
      comm != nullptr && comm->struct_size >= DDPH_COMM_SIZE_V1_1 && comm->alltoallv != nullptr,
      "rank %d: no alltoallv in a 1.1 table", rank);
  ddph_comm_t v1_0 = *comm;
  v1_0.struct_size = DDPH_COMM_SIZE_V1_0;
  v1_0.alltoallv = &a2a_must_not_be_called;
  // scale 1: a few elements; scale 100000: blocks of several hundred KB.
  for (int scale : {1, 100000}) {
    for (bool fallback : {false, true}) {
      std::vector<int64_t> send_counts(static_cast<size_t>(world)), recv_counts(send_counts);
      int64_t send_n = 0, recv_n = 0;
      for (int p = 0; p < world; ++p) {
        send_n += send_counts[size_t(p)] = a2a_count(rank, p, scale);
        recv_n += recv_counts[size_t(p)] = a2a_count(p, rank, scale);
      }
      Tensor send(kF64, send_n), recv(kF64, recv_n);
      for (int p = 0, at = 0; p < world; ++p)
        for (int64_t i = 0; i < send_counts[size_t(p)]; ++i)
          send.as<double>()[at++] = a2a_value(rank, p, i);
      for (int64_t i = 0; i < recv_n; ++i) recv.as<double>()[i] = -1;
      if (fallback) {
        try {
          ddph::FlatTensor in(send.as<double>(), ddph::DType::F64, send_n);
          ddph::FlatTensor out(recv.as<double>(), ddph::DType::F64, recv_n);
          ddph::comm_alltoallv(&v1_0, in, send_counts, out, recv_counts, nullptr);
        } catch (const ddph::Error& e) {
          DDPH_CHILD_CHECK(false, "rank %d: fallback alltoallv: %s", rank, e.what());
        }
      } else {
        CHILD_OK(comm->alltoallv(comm->ctx, send.dl(), send_counts.data(), recv.dl(),
                                 recv_counts.data(), nullptr));
      }
      for (int p = 0, at = 0; p < world; ++p)
        for (int64_t i = 0; i < recv_counts[size_t(p)]; ++i, ++at)
          DDPH_CHILD_CHECK(recv.as<double>()[at] == a2a_value(p, rank, i),
                           "%s scale %d: from rank %d [%lld] = %g, want %g",
                           fallback ? "fallback" : "native", scale, p, (long long)i,
                           recv.as<double>()[at], a2a_value(p, rank, i));
    }
  }
  // The communicator stays usable after alltoallv (slots do not collide).
  Tensor one(kI32, 1);
  one.as<int32_t>()[0] = 1;
  CHILD_OK(comm->allreduce(comm->ctx, one.dl(), one.dl(), DDPH_SUM, nullptr));
  DDPH_CHILD_CHECK(one.as<int32_t>()[0] == world, "allreduce after alltoallv: %d",
                   one.as<int32_t>()[0]);
  comm->destroy(comm->ctx);
  return 0;
}

// split: on W ranks, color = rank % 2 with keys in reverse rank order, and
// the last rank of an odd world opting out (negative color). Each group sums
// its members' ranks; a split of a split works; the parent stays usable.
int split_body(int rank, int world, const std::string& dir) {
  ddph_comm_t* comm = must_connect(rank, world, dir);
  DDPH_CHILD_CHECK(comm != nullptr && comm->split != nullptr, "rank %d: no split", rank);
  const bool out = world % 2 == 1 && rank == world - 1;
  ddph_comm_t* sub = nullptr;
  CHILD_OK(comm->split(comm->ctx, out ? -1 : rank % 2, -rank, &sub));
  if (out) {
    DDPH_CHILD_CHECK(sub == nullptr, "rank %d: a negative color got a communicator", rank);
  } else {
    std::vector<int> members;  // same color, by key -rank: descending rank
    for (int r = world - 1; r >= 0; --r)
      if (r % 2 == rank % 2 && !(world % 2 == 1 && r == world - 1)) members.push_back(r);
    const int want_rank = int(std::find(members.begin(), members.end(), rank) - members.begin());
    DDPH_CHILD_CHECK(sub != nullptr && sub->rank(sub->ctx) == want_rank &&
                         sub->size(sub->ctx) == int(members.size()),
                     "rank %d: sub rank %d of %d, want %d of %zu", rank,
                     sub ? sub->rank(sub->ctx) : -1, sub ? sub->size(sub->ctx) : -1, want_rank,
                     members.size());
    Tensor t(kI64, 3);
    for (int i = 0; i < 3; ++i) t.as<int64_t>()[i] = rank * (i + 1);
    CHILD_OK(sub->allreduce(sub->ctx, t.dl(), t.dl(), DDPH_SUM, nullptr));
    int64_t sum = 0;
    for (int r : members) sum += r;
    for (int i = 0; i < 3; ++i)
      DDPH_CHILD_CHECK(t.as<int64_t>()[i] == sum * (i + 1), "group sum [%d] = %lld, want %lld", i,
                       (long long)t.as<int64_t>()[i], (long long)(sum * (i + 1)));
    // Split again: everyone alone.
    ddph_comm_t* alone = nullptr;
    CHILD_OK(sub->split(sub->ctx, sub->rank(sub->ctx), 0, &alone));
    DDPH_CHILD_CHECK(alone != nullptr && alone->size(alone->ctx) == 1, "nested split");
    alone->destroy(alone->ctx);
    sub->destroy(sub->ctx);
  }
  Tensor one(kI32, 1);
  one.as<int32_t>()[0] = 1;
  CHILD_OK(comm->allreduce(comm->ctx, one.dl(), one.dl(), DDPH_SUM, nullptr));
  DDPH_CHILD_CHECK(one.as<int32_t>()[0] == world, "parent after split: %d", one.as<int32_t>()[0]);
  comm->destroy(comm->ctx);
  return 0;
}

// The send buffers (SO_SNDBUF) of this process's connected TCP sockets:
// in a rank of these tests, exactly the communicator's pairs.
std::vector<int> connected_send_buffers() {
  std::vector<int> out;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    const int fd = std::atoi(e->d_name);
    struct stat st;
    if (e->d_name[0] == '.' || fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_storage peer;
    socklen_t len = sizeof peer;
    int type = 0, bytes = 0;
    socklen_t tlen = sizeof type, blen = sizeof bytes;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) != 0 || type != SOCK_STREAM) continue;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) continue;
    if (peer.ss_family != AF_INET && peer.ss_family != AF_INET6) continue;
    if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, &blen) == 0) out.push_back(bytes);
  }
  closedir(d);
  return out;
}

// gloo sizes a pair's send buffer for the first small message through the
// mailboxes and the kernel then stops tuning it (plugins/comm_gloo/
// mailboxes.h). Left at gloo's size (4.5 KB) it held less than one ring
// segment, and every 256 KB allreduce after a small one waited out the
// peer's delayed acknowledgement. Each pair must keep room for a segment.
int send_buffer_body(int rank, int world, const std::string& dir) {
  ddph_comm_t* comm = must_connect(rank, world, dir);
  DDPH_CHILD_CHECK(comm != nullptr, "rank %d", rank);
  Tensor small(kF32, 256), ring(kF32, 1 << 16);
  for (int i = 0; i < 3; ++i) {
    CHILD_OK(comm->allreduce(comm->ctx, small.dl(), small.dl(), DDPH_SUM, nullptr));
    CHILD_OK(comm->allreduce(comm->ctx, ring.dl(), ring.dl(), DDPH_SUM, nullptr));
  }
  const std::vector<int> buffers = connected_send_buffers();
  DDPH_CHILD_CHECK(buffers.size() >= size_t(world - 1), "rank %d: %zu connected sockets", rank,
                   buffers.size());
  // 256 KB, or what the kernel allows (twice net.core.wmem_max) where less.
  long wmem_max = 212992;
  if (FILE* f = std::fopen("/proc/sys/net/core/wmem_max", "r")) {
    if (std::fscanf(f, "%ld", &wmem_max) != 1) wmem_max = 212992;
    std::fclose(f);
  }
  const long want = std::min(256L * 1024, 2 * wmem_max);
  for (int bytes : buffers)
    DDPH_CHILD_CHECK(bytes >= want,
                     "rank %d: a pair's send buffer is %d bytes, less than %ld (two 64 KB "
                     "segments with room to spare)",
                     rank, bytes, want);
  comm->destroy(comm->ctx);
  return 0;
}

// The small path's mailboxes (2 W of them) stay within 4 MiB per
// communicator at every world size, and up to 64 ranks hold 32 KiB
// buffers; every limit is a whole number of the largest elements, and
// past 262,144 ranks there is no small path.
TEST(CommGlooSmallAllreduce, MailboxesStayWithinTheirMemoryAtEveryWorldSize) {
  using ddph::comm_gloo::small_allreduce_limit;
  for (int world = 2; world <= 64; ++world) EXPECT_EQ(small_allreduce_limit(world), 32768u);
  for (int world : {65, 100, 128, 1000, 1024, 4096, 100000, 1 << 20}) {
    const size_t limit = small_allreduce_limit(world);
    EXPECT_LE(2 * size_t(world) * limit, size_t(4) << 20) << world << " ranks";
    EXPECT_EQ(limit % 8, 0u) << world << " ranks";
  }
  EXPECT_EQ(small_allreduce_limit(1024), 2048u);
  EXPECT_EQ(small_allreduce_limit(100000), 16u);
  EXPECT_EQ(small_allreduce_limit(1 << 20), 0u) << "no small path, no mailboxes";
  EXPECT_LT(small_allreduce_limit(65), 32768u);
}

class CommGlooRanks : public ::testing::TestWithParam<int> {};

TEST_P(CommGlooRanks, AllreduceIsExactForEveryDtypeAndOp) {
  auto res = ddph_test::run_ranks(GetParam(), allreduce_body, 40);
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

TEST_P(CommGlooRanks, AllgatherReduceScatterBroadcast) {
  auto res = ddph_test::run_ranks(GetParam(), gather_scatter_body, 30);
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

TEST_P(CommGlooRanks, BarrierAndSendRecvRing) {
  auto res = ddph_test::run_ranks(GetParam(), barrier_p2p_body, 30);
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

TEST_P(CommGlooRanks, BytesSentCountsTheWire) {
  auto res = ddph_test::run_ranks(GetParam(), bytes_sent_body, 30);
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

TEST_P(CommGlooRanks, AlltoallvNativeAndFallback) {
  auto res = ddph_test::run_ranks(GetParam(), alltoallv_body, 30);
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

TEST_P(CommGlooRanks, SplitGroupsByColorAndKey) {
  auto res = ddph_test::run_ranks(GetParam(), split_body, 30);
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

TEST_P(CommGlooRanks, SmallAllreducesLeaveRoomInEveryPairsSendBuffer) {
  auto res = ddph_test::run_ranks(GetParam(), send_buffer_body, 30);
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

INSTANTIATE_TEST_SUITE_P(World, CommGlooRanks, ::testing::Values(2, 3, 4), world_name);

}  // namespace
}  // namespace comm_gloo_test
