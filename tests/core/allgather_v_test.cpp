// core/hook/allgather_v.h over an in-process communicator of W threads, one
// per rank: every rank's bytes, whatever their length, reach every rank in
// rank order, with the number of collectives the header promises.
#include "core/hook/allgather_v.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/base/error.h"
#include "core/comm/backend.h"

namespace {

// What the ranks of one in-process world share: each rank's send bytes
// and a barrier.
struct World {
  explicit World(int n) : size(n), sends(size_t(n)) {}
  const int size;
  std::mutex mu;
  std::condition_variable cv;
  int arrived = 0;
  uint64_t generation = 0;
  std::vector<std::vector<char>> sends;
  std::vector<int> allgathers = std::vector<int>(size_t(size), 0);

  void barrier() {
    std::unique_lock<std::mutex> lock(mu);
    const uint64_t mine = generation;
    if (++arrived == size) {
      arrived = 0;
      ++generation;
      cv.notify_all();
      return;
    }
    cv.wait(lock, [&] { return generation != mine; });
  }
};

size_t bytes_of(const DLTensor* t) {
  return size_t(t->shape[0]) * size_t((t->dtype.bits * t->dtype.lanes + 7) / 8);
}

// Only allgather (and rank, size) is used; the rest fails loudly.
class ThreadBackend : public ddph::CommBackend {
 public:
  ThreadBackend(World* world, int rank) : world_(world), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return world_->size; }
  void allgather(const DLTensor* send, DLTensor* recv, void*) override {
    const size_t n = bytes_of(send);
    const bool fits = bytes_of(recv) == n * size_t(world_->size);
    EXPECT_TRUE(fits) << "rank " << rank_ << ": recv is not world blocks of send";
    const char* from = static_cast<const char*>(send->data);
    world_->sends[size_t(rank_)].assign(from, from + n);
    ++world_->allgathers[size_t(rank_)];
    world_->barrier();
    for (int r = 0; r < world_->size; ++r) {
      const bool same = world_->sends[size_t(r)].size() == n;
      EXPECT_TRUE(same) << "ranks " << r << " and " << rank_ << " send different lengths";
      if (fits && same)
        std::memcpy(static_cast<char*>(recv->data) + size_t(r) * n, world_->sends[size_t(r)].data(),
                    n);
    }
    world_->barrier();  // nobody overwrites a send before every rank read it
  }
  void allreduce(const DLTensor*, DLTensor*, ddph_reduce_op_t, void*) override { unused(); }
  void reduce_scatter(const DLTensor*, DLTensor*, ddph_reduce_op_t, void*) override { unused(); }
  void broadcast(DLTensor*, int, void*) override { unused(); }
  void barrier() override { unused(); }
  void send(const DLTensor*, int, void*) override { unused(); }
  void recv(DLTensor*, int, void*) override { unused(); }
  void alltoallv(const DLTensor*, const int64_t*, DLTensor*, const int64_t*, void*) override {
    unused();
  }
  std::unique_ptr<CommBackend> split(int, int) override {
    unused();
    return nullptr;
  }

 private:
  static void unused() { DDPH_FAIL(DDPH_UNSUPPORTED, "not used by allgather_v"); }
  World* world_;
  int rank_;
};

// Runs body(comm, rank) on `size` threads, one communicator each.
void on_ranks(World& world, const std::function<void(ddph_comm_t*, int)>& body) {
  std::vector<std::thread> threads;
  for (int r = 0; r < world.size; ++r)
    threads.emplace_back([&world, &body, r] {
      ddph_comm_t* comm = ddph::make_comm_table(std::make_unique<ThreadBackend>(&world, r));
      body(comm, r);
      comm->destroy(comm->ctx);
    });
  for (std::thread& t : threads) t.join();
}

// Rank r's bytes: r * 7 of them, with a NUL inside, so lengths differ and
// rank 0's is empty.
std::string bytes_of_rank(int r) {
  std::string s;
  for (int i = 0; i < r * 7; ++i) s.push_back(char(i == 3 ? 0 : 'a' + (r + i) % 26));
  return s;
}

TEST(AllgatherV, EveryRanksBytesOfAnyLengthInRankOrder) {
  World world(3);
  std::vector<std::vector<std::string>> got(3);
  on_ranks(world, [&](ddph_comm_t* comm, int r) {
    got[size_t(r)] = ddph::allgather_v(comm, bytes_of_rank(r));
  });
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ(got[size_t(r)].size(), 3u);
    for (int from = 0; from < 3; ++from)
      EXPECT_EQ(got[size_t(r)][size_t(from)], bytes_of_rank(from))
          << "rank " << r << " got rank " << from << "'s bytes";
    EXPECT_EQ(world.allgathers[size_t(r)], 2) << "the lengths, then the bytes";
  }
}

TEST(AllgatherV, KnownLengthsTakeOneAllgatherAndNoneWhenAllAreEmpty) {
  World world(4);
  const std::vector<uint64_t> lengths = {0, 7, 14, 21};
  std::vector<std::vector<std::string>> got(4), empty(4);
  on_ranks(world, [&](ddph_comm_t* comm, int r) {
    got[size_t(r)] = ddph::allgather_v(comm, bytes_of_rank(r), lengths);
    empty[size_t(r)] = ddph::allgather_v(comm, "", std::vector<uint64_t>(4, 0));
  });
  for (int r = 0; r < 4; ++r) {
    for (int from = 0; from < 4; ++from) {
      EXPECT_EQ(got[size_t(r)][size_t(from)], bytes_of_rank(from));
      EXPECT_EQ(empty[size_t(r)][size_t(from)], "");
    }
    EXPECT_EQ(world.allgathers[size_t(r)], 1);
  }
}

TEST(AllgatherV, LengthsThatDoNotFitTheCallAreRefusedBeforeAnyCollective) {
  World world(1);
  on_ranks(world, [&](ddph_comm_t* comm, int) {
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
  EXPECT_EQ(world.allgathers[0], 0);
}

TEST(AllgatherEach, EveryRanksValueInRankOrder) {
  struct Words {
    uint64_t a, b;
  };
  World world(3);
  std::vector<std::vector<Words>> got(3);
  on_ranks(world, [&](ddph_comm_t* comm, int r) {
    got[size_t(r)] = ddph::allgather_each(comm, Words{uint64_t(r), uint64_t(100 + r)});
  });
  for (int r = 0; r < 3; ++r)
    for (int from = 0; from < 3; ++from) {
      EXPECT_EQ(got[size_t(r)][size_t(from)].a, uint64_t(from));
      EXPECT_EQ(got[size_t(r)][size_t(from)].b, uint64_t(100 + from));
    }
}

}  // namespace
