// Every rendezvous wait ends at comm.timeout, to the millisecond: whichever
// rank is missing, and with a Redis server that never answers or was
// stopped. Before, a rank waiting for a lower rank gave up after gloo's own
// 30 s whatever the timeout said, a silent Redis hung the open for ever, and
// a 200 ms timeout came out as about 1 s.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "tests/jobs/job_ranks.h"
#include "tests/support/multiprocess.h"
#include "tests/support/redis_server.h"

namespace ddph_test {
namespace {

constexpr double kTimeoutS = 0.2;

// What an open may take beyond its timeout: what a world-of-one open takes
// here and now (loading the plugins, creating the TCP device: slower under
// a sanitizer or on a loaded machine), twice, plus 0.4 s. On an idle
// machine that is about 0.45 s: well under the whole second that the
// whole-second waits of before gave a 200 ms timeout.
double slack_s(const std::string& dir) {
  JobOpen o;
  o.rendezvous = "file://" + dir + "/baseline";
  o.yaml_job = "baseline";
  Opened s = open_job(o);
  ddph_session_close(s.session);
  return 2 * s.seconds + 0.4;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

class MissingRank : public ::testing::TestWithParam<int> {};

// Three ranks, one of them (0, 1 or 2) never started: the other two fail
// with DDPH_TIMEOUT between 200 ms and 200 ms + slack, naming the rank.
TEST_P(MissingRank, TheOthersTimeOutAtTheTimeout) {
  const int missing = GetParam();
  auto res = run_ranks(
      3,
      [missing](int rank, int world, const std::string& dir) {
        if (rank == missing) return 0;
        const double slack = slack_s(dir + "/rank" + std::to_string(rank));
        JobOpen o;
        o.rank = rank;
        o.world = world;
        o.rendezvous = "file://" + dir + "/store";
        o.timeout = "200ms";
        Opened s = open_job(o);
        DDPH_CHILD_CHECK(s.session == nullptr, "rank %d opened without rank %d", rank, missing);
        DDPH_CHILD_CHECK(s.code == DDPH_TIMEOUT, "rank %d: %s", rank, s.message.c_str());
        DDPH_CHILD_CHECK(s.seconds >= kTimeoutS * 0.95 && s.seconds < kTimeoutS + slack,
                         "rank %d gave up after %.3f s with a %.3f s timeout (slack %.3f s): %s",
                         rank, s.seconds, kTimeoutS, slack, s.message.c_str());
        const std::string named = missing == 0 ? "rank 0 did not start the run"
                                               : "rank " + std::to_string(missing) + " of";
        DDPH_CHILD_CHECK(contains(s.message, named), "rank %d: '%s' not in: %s", rank,
                         named.c_str(), s.message.c_str());
        return 0;
      },
      30);
  EXPECT_TRUE(all_passed(res)) << "rank " << missing << " missing: " << describe(res);
}

INSTANTIATE_TEST_SUITE_P(EachRank, MissingRank, ::testing::Values(0, 1, 2));

// A server on loopback that accepts connections and never answers: its
// listening socket, and "127.0.0.1:PORT" in *where.
int silent_server(std::string* where) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(fd, 8) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    return -1;
  *where = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  return fd;
}

// A Redis that accepts connections and never answers.
TEST(RendezvousTimeout, ASilentRedisTimesOut) {
  std::string where;
  const int fd = silent_server(&where);
  ASSERT_GE(fd, 0) << "cannot listen on loopback";
  const double slack = slack_s(make_temp_dir("ddph-timeout"));
  JobOpen o;
  o.rendezvous = "redis://" + where;
  o.timeout = "200ms";
  Opened s = open_job(o);
  close(fd);
  EXPECT_EQ(s.session, nullptr);
  EXPECT_EQ(s.code, DDPH_TIMEOUT) << s.message;
  EXPECT_TRUE(contains(s.message, "did not answer in time")) << s.message;
  EXPECT_GE(s.seconds, kTimeoutS * 0.95);
  EXPECT_LT(s.seconds, kTimeoutS + slack) << s.message;
}

// Rank 1 waits for rank 0's run marker on a Redis that never answers: it is
// told the store did not answer, naming it, not that rank 0 did not start.
TEST(RendezvousTimeout, ASilentRedisIsBlamedNotRank0) {
  std::string where;
  const int fd = silent_server(&where);
  ASSERT_GE(fd, 0) << "cannot listen on loopback";
  JobOpen o;
  o.rank = 1;
  o.world = 2;
  o.rendezvous = "redis://" + where;
  o.timeout = "200ms";
  Opened s = open_job(o);
  close(fd);
  EXPECT_EQ(s.session, nullptr);
  EXPECT_EQ(s.code, DDPH_TIMEOUT) << s.message;
  EXPECT_TRUE(contains(s.message, "redis store " + where)) << s.message;
  EXPECT_TRUE(contains(s.message, "did not answer in time")) << s.message;
  EXPECT_FALSE(contains(s.message, "rank 0 did not start")) << s.message;
}

// A real Redis server, stopped (SIGSTOP) while the job starts.
TEST(RendezvousTimeout, AStoppedRedisTimesOut) {
  const int port = free_port();
  const int redis = start_redis(port);
  if (redis < 0) GTEST_SKIP() << "redis-server is not installed or did not start";
  const double slack = slack_s(make_temp_dir("ddph-timeout"));
  kill(redis, SIGSTOP);
  JobOpen o;
  o.rendezvous = "redis://127.0.0.1:" + std::to_string(port);
  o.timeout = "200ms";
  Opened s = open_job(o);
  kill(redis, SIGCONT);
  kill(redis, SIGTERM);
  waitpid(redis, nullptr, 0);
  EXPECT_EQ(s.session, nullptr);
  EXPECT_EQ(s.code, DDPH_TIMEOUT) << s.message;
  EXPECT_LT(s.seconds, kTimeoutS + slack) << s.message;
}

// Over Redis, a missing rank 1 also ends at the timeout.
TEST(RendezvousTimeout, AMissingRankOverRedisTimesOut) {
  const int port = free_port();
  const int redis = start_redis(port);
  if (redis < 0) GTEST_SKIP() << "redis-server is not installed or did not start";
  const double slack = slack_s(make_temp_dir("ddph-timeout"));
  JobOpen o;
  o.world = 2;
  o.rendezvous = "redis://127.0.0.1:" + std::to_string(port);
  o.timeout = "200ms";
  Opened s = open_job(o);
  kill(redis, SIGTERM);
  waitpid(redis, nullptr, 0);
  EXPECT_EQ(s.session, nullptr);
  EXPECT_EQ(s.code, DDPH_TIMEOUT) << s.message;
  EXPECT_TRUE(contains(s.message, "rank 1 of")) << s.message;
  EXPECT_GE(s.seconds, kTimeoutS * 0.95);
  EXPECT_LT(s.seconds, kTimeoutS + slack) << s.message;
}

}  // namespace
}  // namespace ddph_test
