// core/hook/allgather_v.h over in-process ranks (tests/hooks/thread_comm.h):
// every rank's bytes, whatever their length, reach every rank in rank
// order, with the number of allgathers the header promises.
#include "core/hook/allgather_v.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/base/error.h"
#include "core/base/host.h"
#include "tests/hooks/thread_comm.h"

namespace {

// A rank's communicator that counts its allgathers.
struct Counting {
  ddph_comm_t table;
  ddph_comm_t* inner;
  int allgathers = 0;
};

ddph_comm_t* counting(Counting& c, ddph_comm_t* inner) {
  c.inner = inner;
  c.table = *inner;
  c.table.ctx = &c;
  c.table.rank = [](void* ctx) {
    ddph_comm_t* in = static_cast<Counting*>(ctx)->inner;
    return in->rank(in->ctx);
  };
  c.table.size = [](void* ctx) {
    ddph_comm_t* in = static_cast<Counting*>(ctx)->inner;
    return in->size(in->ctx);
  };
  c.table.allgather = [](void* ctx, const DLTensor* send, DLTensor* recv, void* stream) {
    Counting* self = static_cast<Counting*>(ctx);
    ++self->allgathers;
    return self->inner->allgather(self->inner->ctx, send, recv, stream);
  };
  return &c.table;
}

// Runs body(comm, rank) on `world` in-process ranks; returns each rank's
// allgather count.
template <class Body>
std::vector<int> on_ranks(int world, Body body) {
  ddph::set_host(ddph_host());  // the errors the collectives return
  ddph_test::ThreadGroup group(world, ddph_host());
  std::vector<Counting> counts(static_cast<size_t>(world));
  group.run([&](int r) { body(counting(counts[size_t(r)], group.comm(r)), r); });
  std::vector<int> out;
  for (const Counting& c : counts) out.push_back(c.allgathers);
  return out;
}

// Rank r's bytes: r * 7 of them, with a NUL inside, so lengths differ and
// rank 0's is empty.
std::string bytes_of_rank(int r) {
  std::string s;
  for (int i = 0; i < r * 7; ++i) s.push_back(char(i == 3 ? 0 : 'a' + (r + i) % 26));
  return s;
}

TEST(AllgatherV, EveryRanksBytesOfAnyLengthInRankOrder) {
  std::vector<std::vector<std::string>> got(3);
  const std::vector<int> calls = on_ranks(3, [&](ddph_comm_t* comm, int r) {
    got[size_t(r)] = ddph::allgather_v(comm, bytes_of_rank(r));
  });
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ(got[size_t(r)].size(), 3u);
    for (int from = 0; from < 3; ++from)
      EXPECT_EQ(got[size_t(r)][size_t(from)], bytes_of_rank(from))
          << "rank " << r << " got rank " << from << "'s bytes";
    EXPECT_EQ(calls[size_t(r)], 2) << "the lengths, then the bytes";
  }
}

TEST(AllgatherV, KnownLengthsTakeOneAllgatherAndNoneWhenAllAreEmpty) {
  const std::vector<uint64_t> lengths = {0, 7, 14, 21};
  std::vector<std::vector<std::string>> got(4), empty(4);
  const std::vector<int> calls = on_ranks(4, [&](ddph_comm_t* comm, int r) {
    got[size_t(r)] = ddph::allgather_v(comm, bytes_of_rank(r), lengths);
    empty[size_t(r)] = ddph::allgather_v(comm, "", std::vector<uint64_t>(4, 0));
  });
  for (int r = 0; r < 4; ++r) {
    for (int from = 0; from < 4; ++from) {
      EXPECT_EQ(got[size_t(r)][size_t(from)], bytes_of_rank(from));
      EXPECT_EQ(empty[size_t(r)][size_t(from)], "");
    }
    EXPECT_EQ(calls[size_t(r)], 1);
  }
}

TEST(AllgatherV, LengthsThatDoNotFitTheCallAreRefusedBeforeAnyCollective) {
  const std::vector<int> calls = on_ranks(1, [&](ddph_comm_t* comm, int) {
    try {
      ddph::allgather_v(comm, "abc", {2});
      ADD_FAILURE() << "a length other than the bytes' was accepted";
    } catch (const ddph::Error& e) {
      EXPECT_EQ(e.code(), DDPH_INVALID_ARGUMENT);
      EXPECT_NE(std::string(e.what()).find("rank 0 of 1 was given 1 lengths for 3 bytes"),
                std::string::npos)
          << e.what();
    }
    EXPECT_THROW(ddph::allgather_v(comm, "", {0, 0}), ddph::Error) << "two lengths, one rank";
  });
  EXPECT_EQ(calls[0], 0);
}

TEST(AllgatherEach, EveryRanksValueInRankOrder) {
  struct Words {
    uint64_t a, b;
  };
  std::vector<std::vector<Words>> got(3);
  const std::vector<int> calls = on_ranks(3, [&](ddph_comm_t* comm, int r) {
    got[size_t(r)] = ddph::allgather_each(comm, Words{uint64_t(r), uint64_t(100 + r)});
  });
  for (int r = 0; r < 3; ++r) {
    for (int from = 0; from < 3; ++from) {
      EXPECT_EQ(got[size_t(r)][size_t(from)].a, uint64_t(from));
      EXPECT_EQ(got[size_t(r)][size_t(from)].b, uint64_t(100 + from));
    }
    EXPECT_EQ(calls[size_t(r)], 1);
  }
}

}  // namespace
