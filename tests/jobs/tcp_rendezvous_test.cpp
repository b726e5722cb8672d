// Sessions that meet at rank 0's tcp:// store (or env://, as torchrun and
// ddph lab set MASTER_ADDR and MASTER_PORT), as real processes on a
// loopback port: they average exactly; a job with a secret meets only
// ranks that hold it; a rank of another job, or a second job's rank 0 on
// the same port, is refused at once with both job ids named, and rank 0's
// timeout says whom it refused; a missing rank 0 ends at the timeout naming
// its address; and the same job runs again and again on one port.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "tests/jobs/job_ranks.h"
#include "tests/support/multiprocess.h"
#include "tests/support/redis_server.h"

namespace ddph_test {
namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::string tcp_url(int port) {
  return "tcp://127.0.0.1:" + std::to_string(port);
}

std::string write_secret(const std::string& dir, const std::string& name,
                         const std::string& secret) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << secret;
  chmod(path.c_str(), 0600);
  return path;
}

// Waits (up to 20 s) until something listens on 127.0.0.1:port.
bool listening(int port) {
  for (int i = 0; i < 2000; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(uint16_t(port));
    const bool up = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    close(fd);
    if (up) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST(TcpRendezvous, ThreeRanksWithASecretAverageExactly) {
  const int port = free_port();
  const std::string secret = write_secret(make_temp_dir("ddph-tcp"), "secret", "the job's");
  auto res = run_ranks(
      3,
      [&](int rank, int world, const std::string&) {
        JobOpen o;
        o.rank = rank;
        o.world = world;
        o.rendezvous = tcp_url(port);
        o.yaml_job = "tcp-three";
        o.extra_comm = "secret_file: " + secret;
        return join_and_average(o, float(rank), 1.0f);
      },
      60);
  EXPECT_TRUE(all_passed(res)) << describe(res);
}

TEST(TcpRendezvous, EnvReadsTheAddressTorchrunSets) {
  const int port = free_port();
  auto res = run_ranks(
      2,
      [&](int rank, int world, const std::string&) {
        setenv("MASTER_ADDR", "127.0.0.1", 1);
        setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
        setenv("RANK", std::to_string(rank).c_str(), 1);
        setenv("WORLD_SIZE", std::to_string(world).c_str(), 1);
        JobOpen o;
        o.rank = -1;  // from RANK and WORLD_SIZE
        o.world = -1;
        o.rendezvous = "env://";
        o.yaml_job = "tcp-env";
        return join_and_average(o, float(10 * rank), 5.0f);
      },
      60);
  EXPECT_TRUE(all_passed(res)) << describe(res);
}

// Sessions of one job one after another on one port: a rank that opens the
// next session while rank 0 still closes the last one waits for rank 0's
// next server instead of failing.
TEST(TcpRendezvous, TheSameJobRunsAgainAndAgainOnOnePort) {
  const int port = free_port();
  auto res = run_ranks(
      2,
      [&](int rank, int world, const std::string&) {
        for (int run = 0; run < 4; ++run) {
          JobOpen o;
          o.rank = rank;
          o.world = world;
          o.rendezvous = tcp_url(port);
          o.yaml_job = "tcp-again";
          if (join_and_average(o, float(run + rank), float(run) + 0.5f) != 0) return 1;
        }
        return 0;
      },
      90);
  EXPECT_TRUE(all_passed(res)) << describe(res);
}

// Job A's rank 0 serves the port. Job B's rank 1, given the same port, is
// refused at once naming both jobs, and A's rank 0, whose rank 1 never
// came, times out saying whom it refused. Job B's rank 0 cannot serve
// there: the port is taken.
TEST(TcpRendezvous, AnotherJobOnThePortIsRefusedOnBothSides) {
  const int port = free_port();
  auto res = run_ranks(
      3,
      [&](int process, int, const std::string&) {
        JobOpen o;
        o.world = 2;
        o.rendezvous = tcp_url(port);
        o.timeout = "3s";
        if (process == 0) {  // job A's rank 0
          o.rank = 0;
          o.yaml_job = "job-a";
          Opened s = open_job(o);
          DDPH_CHILD_CHECK(s.session == nullptr, "job A's rank 0 opened without its rank 1");
          DDPH_CHILD_CHECK(s.code == DDPH_TIMEOUT, "job A's rank 0: %s", s.message.c_str());
          DDPH_CHILD_CHECK(contains(s.message, "of job 'job-b': this store serves job 'job-a'"),
                           "job A's rank 0 does not name the refused rank: %s", s.message.c_str());
          return 0;
        }
        if (!listening(port)) return 1;
        o.rank = process == 1 ? 1 : 0;
        o.yaml_job = "job-b";
        Opened s = open_job(o);
        DDPH_CHILD_CHECK(s.session == nullptr, "job B's rank %d joined job A", o.rank);
        DDPH_CHILD_CHECK(s.code == DDPH_INVALID_ARGUMENT, "job B's rank %d: %s", o.rank,
                         s.message.c_str());
        DDPH_CHILD_CHECK(s.seconds < 2.5, "job B's rank %d was refused only after %.1f s: %s",
                         o.rank, s.seconds, s.message.c_str());
        const std::string why =
            o.rank == 1
                ? "job 'job-b' (rank 1): rank 0's tcp store at 127.0.0.1:" + std::to_string(port) +
                      " (" + tcp_url(port) + ") serves job 'job-a', not this one"
                : tcp_url(port) + ": port " + std::to_string(port) + " is in use";
        DDPH_CHILD_CHECK(contains(s.message, why), "job B's rank %d: '%s' not in: %s", o.rank,
                         why.c_str(), s.message.c_str());
        return 0;
      },
      60);
  EXPECT_TRUE(all_passed(res)) << describe(res);
}

// A rank 1 without the job's secret, or with another one, is refused at
// connect; rank 0's timeout names it.
TEST(TcpRendezvous, ARankWithoutTheJobsSecretIsRefusedOnBothSides) {
  const std::string base = make_temp_dir("ddph-tcp-secret");
  const std::string good = write_secret(base, "good", "the job's secret");
  const std::string other = write_secret(base, "other", "another secret");
  for (const std::string intruder : {"none", "other"}) {
    const int port = free_port();
    auto res = run_ranks(
        2,
        [&](int rank, int world, const std::string&) {
          JobOpen o;
          o.rank = rank;
          o.world = world;
          o.rendezvous = tcp_url(port);
          o.yaml_job = "tcp-secret";
          o.timeout = "3s";
          if (rank == 0) o.extra_comm = "secret_file: " + good;
          if (rank == 1 && intruder == "other") o.extra_comm = "secret_file: " + other;
          Opened s = open_job(o);
          DDPH_CHILD_CHECK(s.session == nullptr, "rank %d joined a job it must not", rank);
          const std::string why =
              rank == 0 ? (intruder == "none" ? "it holds no secret, and this job has one"
                                              : "it holds another secret than this job's")
                        : (intruder == "none" ? "this rank (1) has none"
                                              : "did not prove it holds this rank's secret");
          DDPH_CHILD_CHECK(s.code == (rank == 0 ? DDPH_TIMEOUT : DDPH_INVALID_ARGUMENT),
                           "rank %d: %s", rank, s.message.c_str());
          DDPH_CHILD_CHECK(contains(s.message, why), "rank %d: '%s' not in: %s", rank, why.c_str(),
                           s.message.c_str());
          return 0;
        },
        30);
    EXPECT_TRUE(all_passed(res)) << "intruder " << intruder << ": " << describe(res);
  }
}

TEST(TcpRendezvous, WithoutRankZeroTheOthersFailAtTheTimeoutNamingItsAddress) {
  const int port = free_port();  // nobody serves it
  JobOpen o;
  o.rank = 1;
  o.world = 2;
  o.rendezvous = tcp_url(port);
  o.timeout = "300ms";
  // What an open of a world of one takes here and now, for the slack.
  JobOpen alone;
  alone.rendezvous = tcp_url(free_port());
  Opened baseline = open_job(alone);
  ASSERT_NE(baseline.session, nullptr) << baseline.message;
  ddph_session_close(baseline.session);
  Opened s = open_job(o);
  EXPECT_EQ(s.session, nullptr);
  EXPECT_EQ(s.code, DDPH_TIMEOUT) << s.message;
  EXPECT_TRUE(contains(
      s.message, "rank 1 cannot reach rank 0's tcp store at 127.0.0.1:" + std::to_string(port)))
      << s.message;
  EXPECT_GE(s.seconds, 0.3 * 0.95);
  EXPECT_LT(s.seconds, 0.3 + 2 * baseline.seconds + 0.4) << s.message;
}

}  // namespace
}  // namespace ddph_test
