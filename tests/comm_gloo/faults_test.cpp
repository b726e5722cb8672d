// Missing, dead and silent peers: the survivors get DDPH_TIMEOUT or
// DDPH_COMM_FAILURE within the timeout, never a hang or a crash, and a
// broken communicator then fails fast.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <ostream>
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

// One collective on a buffer of world MiB (survivors keep writing to the
// dead socket), named as its errors name it.
struct Collective {
  const char* name;  // the collective, as its errors name it
  const char* test;  // the test's name
  ddph_error_t* (*call)(ddph_comm_t* comm, Tensor& t);
};

// ctest lists the parameter by its name, not its bytes.
void PrintTo(const Collective& c, std::ostream* os) {
  *os << c.test;
}

const Collective kAllreduceSum = {"allreduce", "AllreduceSum", [](ddph_comm_t* c, Tensor& t) {
                                    return c->allreduce(c->ctx, t.dl(), t.dl(), DDPH_SUM, nullptr);
                                  }};

// After one good call the victim disappears (how: by `die`); every
// survivor's next calls fail within the deadline, later calls fail fast as
// "broken", and destroy returns.
int survive(int rank, int world, const std::string& dir, int victim, void (*die)(),
            const Collective& op = kAllreduceSum) {
  Err err;
  ddph_comm_t* comm = connect(config(rank, world, dir), &err);
  DDPH_CHILD_CHECK(comm != nullptr, "rank %d: %s", rank, err.text().c_str());
  Tensor t(kF32, int64_t(world) << 18);
  err = take(op.call(comm, t));
  DDPH_CHILD_CHECK(err.ok(), "rank %d first %s: %s", rank, op.name, err.text().c_str());
  if (rank == victim) die();

  // A survivor the victim never talks to (a leaf of a broadcast tree) may
  // finish one call; its next one meets a peer that broke.
  const double t0 = now_s();
  for (int i = 0; i < 5 && err.ok(); ++i) err = take(op.call(comm, t));
  const double took = seconds_since(t0);
  DDPH_CHILD_CHECK(err.code == DDPH_COMM_FAILURE || err.code == DDPH_TIMEOUT,
                   "rank %d: expected a failure of %s, got %s", rank, op.name, err.text().c_str());
  const std::string named = std::string(op.name) + " on rank " + std::to_string(rank);
  DDPH_CHILD_CHECK(err.message.find(named) != std::string::npos,
                   "message does not name the collective and rank (%s): %s", named.c_str(),
                   err.message.c_str());
  DDPH_CHILD_CHECK(took < kDeadlineS, "rank %d noticed the dead peer after %.2f s", rank, took);

  const double t1 = now_s();
  Err again = take(comm->barrier(comm->ctx));
  DDPH_CHILD_CHECK(again.code == DDPH_COMM_FAILURE, "%s", again.text().c_str());
  DDPH_CHILD_CHECK(again.message.find("communicator is broken since") != std::string::npos, "%s",
                   again.message.c_str());
  // Fast: well inside the timeout it would wait if it were not broken (an
  // absolute bound would fail on a loaded 2-core machine).
  DDPH_CHILD_CHECK(seconds_since(t1) < 0.5 * kTimeoutMs / 1000,
                   "a broken communicator must fail fast, took %.2f s", seconds_since(t1));
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

// Every collective's buffers outlive a peer's death (posted_buffers.h); a
// killed rank, 4 ranks, the victim in the middle of the ring and the tree.
class CommGlooFaultsEvery : public ::testing::TestWithParam<Collective> {};

TEST_P(CommGlooFaultsEvery, KilledRankFailsTheOthersWithinTheTimeout) {
  static Collective op;
  op = GetParam();
  auto res = ddph_test::run_ranks(
      4,
      [](int rank, int world, const std::string& dir) {
        return survive(
            rank, world, dir, 2, [] { raise(SIGKILL); }, op);
      },
      40);
  ASSERT_EQ(res.size(), 4u);
  EXPECT_EQ(res[2].signal, SIGKILL) << ddph_test::describe(res);
  for (int r : {0, 1, 3})
    EXPECT_TRUE(res[size_t(r)].exit_code == 0 && !res[size_t(r)].timed_out)
        << "survivor " << r << " must fail cleanly: " << ddph_test::describe(res);
}

const Collective kAllreduceMax = {"allreduce", "AllreduceMax", [](ddph_comm_t* c, Tensor& t) {
                                    return c->allreduce(c->ctx, t.dl(), t.dl(), DDPH_MAX, nullptr);
                                  }};
// From rank 0 the victim, rank 2, forwards to rank 3; from rank 1 it is a leaf.
const Collective kBroadcastFrom0 = {
    "broadcast", "BroadcastFromRank0",
    [](ddph_comm_t* c, Tensor& t) { return c->broadcast(c->ctx, t.dl(), 0, nullptr); }};
const Collective kBroadcastFrom1 = {
    "broadcast", "BroadcastFromRank1",
    [](ddph_comm_t* c, Tensor& t) { return c->broadcast(c->ctx, t.dl(), 1, nullptr); }};
const Collective kReduceScatterAvg = {
    "reduce_scatter", "ReduceScatterAvg", [](ddph_comm_t* c, Tensor& t) {
      Tensor out(kF32, t.numel() / c->size(c->ctx));
      return c->reduce_scatter(c->ctx, t.dl(), out.dl(), DDPH_AVG, nullptr);
    }};
const Collective kBarrier = {"barrier", "Barrier",
                             [](ddph_comm_t* c, Tensor&) { return c->barrier(c->ctx); }};
// 1 KB: the small path, through the mailboxes (small_allreduce.cpp).
const Collective kAllreduceSmall = {"allreduce", "AllreduceSmall", [](ddph_comm_t* c, Tensor&) {
                                      Tensor t(kF32, 256);
                                      return c->allreduce(c->ctx, t.dl(), t.dl(), DDPH_AVG,
                                                          nullptr);
                                    }};

std::string collective_test_name(const ::testing::TestParamInfo<Collective>& info) {
  return info.param.test;
}

INSTANTIATE_TEST_SUITE_P(Collectives, CommGlooFaultsEvery,
                         ::testing::Values(kAllreduceSum, kAllreduceMax, kBroadcastFrom0,
                                           kBroadcastFrom1, kReduceScatterAvg, kBarrier,
                                           kAllreduceSmall),
                         collective_test_name);

// A peer that stops (SIGSTOP: alive, connected, answering nothing) is named
// in the survivor's timeout, by rank, pid and address, as a killed one is;
// gloo's own words ("Timed out waiting 2000ms for recv") name nobody.
class CommGlooStalledPeer : public ::testing::TestWithParam<Collective> {};

TEST_P(CommGlooStalledPeer, TheTimeoutNamesIt) {
  static Collective op;
  op = GetParam();
  auto res = ddph_test::run_ranks(
      2,
      [](int rank, int world, const std::string& dir) {
        Err err;
        ddph_comm_t* comm = connect(config(rank, world, dir), &err);
        DDPH_CHILD_CHECK(comm != nullptr, "rank %d: %s", rank, err.text().c_str());
        Tensor t(kF32, int64_t(world) << 18);
        err = take(op.call(comm, t));
        DDPH_CHILD_CHECK(err.ok(), "rank %d first %s: %s", rank, op.name, err.text().c_str());
        const std::string pid_file = dir + "/pid1";
        if (rank == 1) {
          FILE* f = fopen(pid_file.c_str(), "w");
          fprintf(f, "%d", int(getpid()));
          fclose(f);
          raise(SIGSTOP);  // rank 0 kills it once it has its message
          return 1;
        }
        const double t0 = now_s();
        err = take(op.call(comm, t));
        const double took = seconds_since(t0);
        int pid = 0;
        if (FILE* f = fopen(pid_file.c_str(), "r")) {
          if (fscanf(f, "%d", &pid) != 1) pid = 0;
          fclose(f);
        }
        if (pid > 0) kill(pid, SIGKILL);
        DDPH_CHILD_CHECK(err.code == DDPH_TIMEOUT, "%s: %s", op.name, err.text().c_str());
        const std::string named = "rank 1 (pid " + std::to_string(pid) + " on host ";
        DDPH_CHILD_CHECK(pid > 0 && err.message.find(named) != std::string::npos,
                         "the message does not name '%s': %s", named.c_str(), err.message.c_str());
        DDPH_CHILD_CHECK(err.message.find(", at 127.0.0.1:") != std::string::npos &&
                             err.message.find("stalled") != std::string::npos,
                         "no address or cause: %s", err.message.c_str());
        DDPH_CHILD_CHECK(took > 0.8 * kTimeoutMs / 1000 && took < kDeadlineS,
                         "timed out after %.2f s with a %lld ms timeout", took,
                         (long long)kTimeoutMs);
        comm->destroy(comm->ctx);
        return 0;
      },
      30);
  ASSERT_EQ(res.size(), 2u);
  EXPECT_TRUE(res[0].exit_code == 0 && !res[0].timed_out) << ddph_test::describe(res);
  EXPECT_EQ(res[1].signal, SIGKILL) << ddph_test::describe(res);
}

INSTANTIATE_TEST_SUITE_P(Collectives, CommGlooStalledPeer,
                         ::testing::Values(kAllreduceSum, kReduceScatterAvg, kBarrier,
                                           kAllreduceSmall),
                         collective_test_name);

// A peer that closes its communicator while this rank makes one small
// allreduce more: its mailboxes are taken off gloo's device thread before
// they are freed (plugins/comm_gloo/mailboxes.cpp), so it neither crashes
// nor hangs, and the extra call fails within the timeout. Three rounds, so
// that the message lands now before, now during the close.
TEST(CommGlooFaults, PeerClosingDuringASmallAllreduceFailsItWithinTheTimeout) {
  auto res = ddph_test::run_ranks(
      2,
      [](int rank, int world, const std::string& dir) {
        for (int round = 0; round < 3; ++round) {
          Connect c = config(rank, world, dir);
          c.prefix = "round" + std::to_string(round);
          Err err;
          ddph_comm_t* comm = connect(c, &err);
          DDPH_CHILD_CHECK(comm != nullptr, "rank %d: %s", rank, err.text().c_str());
          Tensor t(kF32, 256);
          for (int i = 0; i < 20; ++i)
            CHILD_OK(comm->allreduce(comm->ctx, t.dl(), t.dl(), DDPH_SUM, nullptr));
          if (rank == 1) {
            const double t0 = now_s();
            err = take(comm->allreduce(comm->ctx, t.dl(), t.dl(), DDPH_SUM, nullptr));
            const double took = seconds_since(t0);
            DDPH_CHILD_CHECK(err.code == DDPH_COMM_FAILURE || err.code == DDPH_TIMEOUT,
                             "round %d: the extra call gave %s", round, err.text().c_str());
            DDPH_CHILD_CHECK(took < kDeadlineS, "round %d: the extra call failed after %.2f s",
                             round, took);
          }
          comm->destroy(comm->ctx);
        }
        return 0;
      },
      40);
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
}

// Slows the calling thread down to a crawl while it lives: SCHED_IDLE, on
// one CPU with a thread that spins there. gloo's device thread, started
// before, keeps its own policy and CPUs, so messages still arrive at full
// speed while this thread takes milliseconds between two steps of a call.
class Crawl {
 public:
  Crawl() {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu() < 0 ? 0 : sched_getcpu(), &one);
    pthread_setaffinity_np(pthread_self(), sizeof one, &one);
    spinner_ = std::thread([this, one] {
      pthread_setaffinity_np(pthread_self(), sizeof one, &one);
      while (!stop_.load(std::memory_order_relaxed)) {
      }
    });
    sched_param idle{};
    ok_ = pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle) == 0;
  }
  ~Crawl() {
    stop_ = true;
    spinner_.join();
    sched_param normal{};
    pthread_setschedparam(pthread_self(), SCHED_OTHER, &normal);
  }
  bool ok() const { return ok_; }

 private:
  std::atomic<bool> stop_{false};
  std::thread spinner_;
  bool ok_ = false;
};

// A rank that has its result may close at once. Its message can reach a
// slower peer, and its close too, before that peer waits for the message:
// gloo then fails the wait although the message is there. The slower peer
// must still get its result (plugins/comm_gloo/small_allreduce.cpp), and
// fail only its next call.
TEST(CommGlooFaults, APeerThatClosesRightAfterASmallAllreduceFailsOnlyTheNextCall) {
  auto res = ddph_test::run_ranks(
      2,
      [](int rank, int world, const std::string& dir) {
        for (int round = 0; round < 20; ++round) {
          Connect c = config(rank, world, dir);
          c.prefix = "round" + std::to_string(round);
          Err err;
          ddph_comm_t* comm = connect(c, &err);
          DDPH_CHILD_CHECK(comm != nullptr, "rank %d: %s", rank, err.text().c_str());
          Tensor t(kF32, 256);
          for (int i = 0; i < 256; ++i) t.as<float>()[i] = float(rank + 1);
          if (rank == 0) {
            // Rank 1 is then waiting for this rank's message, and needs the
            // CPU to go on once it arrives.
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            CHILD_OK(comm->allreduce(comm->ctx, t.dl(), t.dl(), DDPH_SUM, nullptr));
            comm->destroy(comm->ctx);
            continue;
          }
          {
            Crawl crawl;
            DDPH_CHILD_CHECK(crawl.ok(), "SCHED_IDLE refused");
            err = take(comm->allreduce(comm->ctx, t.dl(), t.dl(), DDPH_SUM, nullptr));
          }
          DDPH_CHILD_CHECK(err.code == DDPH_OK, "round %d: %s", round, err.text().c_str());
          DDPH_CHILD_CHECK(t.as<float>()[255] == 3.0f, "round %d: got %g", round,
                           double(t.as<float>()[255]));
          // The peer is gone by now (it closed at once, and this rank
          // crawled): the next call fails.
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          err = take(comm->allreduce(comm->ctx, t.dl(), t.dl(), DDPH_SUM, nullptr));
          DDPH_CHILD_CHECK(err.code == DDPH_COMM_FAILURE, "round %d: the next call gave %s", round,
                           err.text().c_str());
          comm->destroy(comm->ctx);
        }
        return 0;
      },
      60);
  EXPECT_TRUE(ddph_test::all_passed(res)) << ddph_test::describe(res);
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

// Ranks that disagree on a call. Gloo aborts the process when a message is
// longer than the receive posted for it; ddph puts what both ends must
// agree on into the message slots (plugins/comm_gloo/slots.h), so such a
// call fails on the ranks that wait, with a message that says why.
struct Disagreement {
  const char* name;      // the collective, as the error names it
  const char* test;      // the test's name
  bool sender_may_pass;  // rank 0 only sends: it may finish, or fail later
  ddph_error_t* (*call)(ddph_comm_t* comm, int rank);
};

void PrintTo(const Disagreement& d, std::ostream* os) {
  *os << d.test;
}

// Float counts of allreduces that take the ring (above 32 KiB) and the
// small path (plugins/comm_gloo/small_allreduce.h).
constexpr int64_t kRingFloats = 10000, kSmallFloats = 1000;

const Disagreement kDisagreements[] = {
    {"allreduce", "AllreduceLengths", false,
     [](ddph_comm_t* c, int rank) {
       // rank 1's segments overflow rank 0's receives
       Tensor t(kF32, rank == 0 ? kRingFloats : 3 * kRingFloats);
       return c->allreduce(c->ctx, t.dl(), t.dl(), DDPH_SUM, nullptr);
     }},
    {"allreduce", "AllreduceOps", false,
     [](ddph_comm_t* c, int rank) {
       Tensor t(kF32, kRingFloats);  // would have run, each rank with its own op's result
       return c->allreduce(c->ctx, t.dl(), t.dl(), rank == 0 ? DDPH_SUM : DDPH_MAX, nullptr);
     }},
    {"allreduce", "AllreduceDtypes", false,
     [](ddph_comm_t* c, int rank) {
       Tensor t(rank == 0 ? kF32 : kI32, kRingFloats);  // the same bytes, summed as other numbers
       return c->allreduce(c->ctx, t.dl(), t.dl(), DDPH_SUM, nullptr);
     }},
    {"allreduce", "AllreduceSmallAgainstRing", false,
     [](ddph_comm_t* c, int rank) {
       // Rank 0 writes to rank 1's mailbox, which the ring never reads.
       Tensor t(kF32, rank == 0 ? kSmallFloats : kRingFloats);
       return c->allreduce(c->ctx, t.dl(), t.dl(), DDPH_SUM, nullptr);
     }},
    {"broadcast", "BroadcastLengths", true,
     [](ddph_comm_t* c, int rank) {
       Tensor t(kF32, rank == 0 ? 5000 : 50);
       return c->broadcast(c->ctx, t.dl(), 0, nullptr);
     }},
    {"allgather", "AllgatherBlocks", false,
     [](ddph_comm_t* c, int rank) {
       const int64_t n = rank == 0 ? 64 : 8;
       Tensor send(kF32, n), recv(kF32, 2 * n);
       return c->allgather(c->ctx, send.dl(), recv.dl(), nullptr);
     }},
    {"alltoallv", "AlltoallvCounts", false,
     [](ddph_comm_t* c, int rank) {
       // Rank 0 sends rank 1 a block of 100, rank 1 expects 10.
       const int64_t send_counts[2] = {4, rank == 0 ? 100 : 4};
       const int64_t recv_counts[2] = {4, 4};
       const int64_t r1_recv[2] = {10, 4};
       Tensor send(kF32, send_counts[0] + send_counts[1]), recv(kF32, 14);
       Tensor recv0(kF32, 8);
       if (rank == 0)
         return c->alltoallv(c->ctx, send.dl(), send_counts, recv0.dl(), recv_counts, nullptr);
       return c->alltoallv(c->ctx, send.dl(), send_counts, recv.dl(), r1_recv, nullptr);
     }},
    {"recv", "SendRecvLengths", true,
     [](ddph_comm_t* c, int rank) {
       Tensor t(kF32, rank == 0 ? 1000 : 10);
       if (rank == 0) {
         ddph_error_t* e = c->send(c->ctx, t.dl(), 1, nullptr);
         return e != nullptr ? e : c->barrier(c->ctx);  // waits for the send to go out
       }
       return c->recv(c->ctx, t.dl(), 0, nullptr);
     }},
};

class CommGlooDisagreeingRanks : public ::testing::TestWithParam<Disagreement> {};

// How a rank's call ended, as its exit code.
enum DisagreementEnd { kTimedOut = 0, kSawThePeerGiveUp = 3, kSenderEnded = 4 };

TEST_P(CommGlooDisagreeingRanks, TimeOutNamingTheCauseInsteadOfAborting) {
  static Disagreement d;
  d = GetParam();
  auto res = ddph_test::run_ranks(
      2,
      [](int rank, int world, const std::string& dir) {
        Err err;
        ddph_comm_t* comm = connect(config(rank, world, dir), &err);
        DDPH_CHILD_CHECK(comm != nullptr, "rank %d: %s", rank, err.text().c_str());
        const double t0 = now_s();
        err = take(d.call(comm, rank));
        const double took = seconds_since(t0);
        comm->destroy(comm->ctx);
        DDPH_CHILD_CHECK(took < kDeadlineS, "rank %d: %s returned after %.2f s", rank, d.name,
                         took);
        // A rank that only sends may finish, or fail in a later call.
        if (rank == 0 && d.sender_may_pass) return int(kSenderEnded);
        // The first rank to give up times out; its peer may instead see it
        // close the connection. Either way the message names the call and
        // what may have happened.
        DDPH_CHILD_CHECK(err.code == DDPH_TIMEOUT || err.code == DDPH_COMM_FAILURE,
                         "rank %d: %s gave %s", rank, d.name, err.text().c_str());
        DDPH_CHILD_CHECK(err.message.find(std::string(d.name) + " on rank") != std::string::npos &&
                             err.message.find("making a different call") != std::string::npos,
                         "rank %d: the message does not say why: %s", rank, err.message.c_str());
        return int(err.code == DDPH_TIMEOUT ? kTimedOut : kSawThePeerGiveUp);
      },
      30);
  ASSERT_EQ(res.size(), 2u);
  int timed_out = 0;
  for (size_t r = 0; r < res.size(); ++r) {
    const int end = res[r].exit_code;
    const bool allowed = end == kTimedOut || end == kSawThePeerGiveUp ||
                         (r == 0 && d.sender_may_pass && end == kSenderEnded);
    EXPECT_TRUE(res[r].signal == 0 && !res[r].timed_out && allowed)
        << "rank " << r << ": " << ddph_test::describe(res);
    timed_out += end == kTimedOut;
  }
  EXPECT_GE(timed_out, d.sender_may_pass ? 0 : 1) << ddph_test::describe(res);
}

std::string disagreement_test_name(const ::testing::TestParamInfo<Disagreement>& info) {
  return info.param.test;
}

INSTANTIATE_TEST_SUITE_P(Calls, CommGlooDisagreeingRanks, ::testing::ValuesIn(kDisagreements),
                         disagreement_test_name);

// Small allreduces (plugins/comm_gloo/small_allreduce.cpp) carry the call
// in every message: ranks that disagree see each other's call and fail at
// once, naming both, instead of waiting out the timeout.
const Disagreement kSmallDisagreements[] = {
    {"allreduce", "Lengths", false,
     [](ddph_comm_t* c, int rank) {
       Tensor t(kF32, rank == 0 ? kSmallFloats : 3 * kSmallFloats);
       return c->allreduce(c->ctx, t.dl(), t.dl(), DDPH_SUM, nullptr);
     }},
    {"allreduce", "Ops", false,
     [](ddph_comm_t* c, int rank) {
       Tensor t(kF32, kSmallFloats);
       return c->allreduce(c->ctx, t.dl(), t.dl(), rank == 0 ? DDPH_SUM : DDPH_MAX, nullptr);
     }},
    {"allreduce", "Dtypes", false,
     [](ddph_comm_t* c, int rank) {
       Tensor t(rank == 0 ? kF32 : kI32, kSmallFloats);
       return c->allreduce(c->ctx, t.dl(), t.dl(), DDPH_SUM, nullptr);
     }},
    {"reduce_scatter", "AllreduceAgainstReduceScatter", false,
     [](ddph_comm_t* c, int rank) {
       // The same bytes on the wire, another collective.
       Tensor t(kF32, kSmallFloats), half(kF32, kSmallFloats / 2);
       if (rank == 0) return c->allreduce(c->ctx, t.dl(), t.dl(), DDPH_SUM, nullptr);
       return c->reduce_scatter(c->ctx, t.dl(), half.dl(), DDPH_SUM, nullptr);
     }},
};

class CommGlooDisagreeingSmallAllreduces : public ::testing::TestWithParam<Disagreement> {};

TEST_P(CommGlooDisagreeingSmallAllreduces, FailAtOnceNamingBothCalls) {
  static Disagreement d;
  d = GetParam();
  auto res = ddph_test::run_ranks(
      2,
      [](int rank, int world, const std::string& dir) {
        Err err;
        ddph_comm_t* comm = connect(config(rank, world, dir), &err);
        DDPH_CHILD_CHECK(comm != nullptr, "rank %d: %s", rank, err.text().c_str());
        const double t0 = now_s();
        err = take(d.call(comm, rank));
        const double took = seconds_since(t0);
        Err again = take(comm->barrier(comm->ctx));
        comm->destroy(comm->ctx);
        DDPH_CHILD_CHECK(took < 0.5 * kTimeoutMs / 1000, "rank %d: %s failed after %.2f s", rank,
                         d.name, took);
        DDPH_CHILD_CHECK(err.code == DDPH_COMM_FAILURE, "rank %d: %s gave %s", rank, d.name,
                         err.text().c_str());
        DDPH_CHILD_CHECK(
            again.code == DDPH_COMM_FAILURE &&
                again.message.find("communicator is broken since") != std::string::npos,
            "rank %d: the communicator must stay broken: %s", rank, again.text().c_str());
        // Normally each rank reads the other's call; a rank whose peer
        // closed the connection first may see only that.
        const std::string peer = "rank " + std::to_string(1 - rank) + " (pid ";
        if (err.message.find(peer) != std::string::npos &&
            err.message.find(") is making a different call: its call ") != std::string::npos &&
            err.message.find("; this rank's call ") != std::string::npos)
          return 0;
        DDPH_CHILD_CHECK(err.message.find("making a different call") != std::string::npos,
                         "rank %d: the message does not say why: %s", rank, err.message.c_str());
        return 3;
      },
      30);
  ASSERT_EQ(res.size(), 2u);
  int named = 0;
  for (const ddph_test::RankResult& r : res) {
    EXPECT_TRUE(r.signal == 0 && !r.timed_out && (r.exit_code == 0 || r.exit_code == 3))
        << ddph_test::describe(res);
    named += r.exit_code == 0;
  }
  EXPECT_GE(named, 1) << "no rank named the other's call: " << ddph_test::describe(res);
}

INSTANTIATE_TEST_SUITE_P(Calls, CommGlooDisagreeingSmallAllreduces,
                         ::testing::ValuesIn(kSmallDisagreements), disagreement_test_name);

}  // namespace
}  // namespace comm_gloo_test
