// Jobs that share a store never meet; the same job id runs again after a
// clean end and is refused, with the fix, while an earlier run holds it.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
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

// Two jobs of two ranks each on one store, their ranks started interleaved:
// each job averages its own values (1, 2 -> 1.5 and 100, 200 -> 150).
// Before job ids, job A's rank 0 and job B's rank 1 averaged each other.
void two_jobs_never_meet(const std::string& rendezvous_or_empty) {
  auto res = run_ranks(
      4,
      [&](int process, int, const std::string& dir) {
        const bool job_a = process == 0 || process == 3;
        JobOpen o;
        o.rank = job_a ? (process == 0 ? 0 : 1) : (process == 2 ? 0 : 1);
        o.world = 2;
        o.rendezvous =
            rendezvous_or_empty.empty() ? "file://" + dir + "/store" : rendezvous_or_empty;
        o.yaml_job = job_a ? "job-a" : "job-b";
        const float mine = job_a ? float(o.rank + 1) : float(100 * (o.rank + 1));
        return join_and_average(o, mine, job_a ? 1.5f : 150.0f);
      },
      60);
  EXPECT_TRUE(all_passed(res)) << describe(res);
}

TEST(JobIdentity, TwoJobsOnOneFileStoreNeverMeet) {
  two_jobs_never_meet("");
}

TEST(JobIdentity, TwoJobsOnOneRedisServerNeverMeet) {
  const int port = free_port();
  const int redis = start_redis(port);
  if (redis < 0) GTEST_SKIP() << "redis-server is not installed or did not start";
  two_jobs_never_meet("redis://127.0.0.1:" + std::to_string(port));
  // Both jobs ended well: nothing of theirs is left on the server.
  EXPECT_EQ(redis_cli(port, "DBSIZE"), "0\n");
  kill(redis, SIGTERM);
  waitpid(redis, nullptr, 0);
}

// The same job id, twice in a row on one directory: the second run works,
// and a run that ended well leaves no file behind.
TEST(JobIdentity, TheSameJobRunsTwiceInARowAndLeavesNoFiles) {
  const std::string dir = make_temp_dir("ddph-jobs");
  for (int round = 0; round < 2; ++round) {
    auto res = run_ranks(
        2,
        [&](int rank, int world, const std::string&) {
          JobOpen o;
          o.rank = rank;
          o.world = world;
          o.rendezvous = "file://" + dir + "/store";
          o.yaml_job = "nightly";
          return join_and_average(o, float(rank), 0.5f);
        },
        30);
    ASSERT_TRUE(all_passed(res)) << "round " << round << ": " << describe(res);
    EXPECT_TRUE(files_in(dir + "/store").empty())
        << "left behind: " << testing::PrintToString(files_in(dir + "/store"));
  }
}

// A rank 0 killed while it waits for its peers leaves its run marker. The
// next rank 0 of that job id is told at once who holds the id and how to
// remove the keys; running that command lets the job start again.
TEST(JobIdentity, ACrashedRunGivesTheNextRank0TheFix) {
  const std::string dir = make_temp_dir("ddph-jobs");
  const std::string url = "file://" + dir + "/store";
  pid_t crashed = fork();
  if (crashed == 0) {
    JobOpen o;
    o.world = 2;  // rank 1 never comes
    o.rendezvous = url;
    o.yaml_job = "resumed";
    o.timeout = "60s";
    open_job(o);
    _exit(0);
  }
  // Wait for its marker (the file of key "ddph/resumed/run"), then kill it
  // as a crash would.
  const std::string marker = dir + "/store/ddph%2Fresumed%2Frun";
  for (int i = 0; i < 500 && access(marker.c_str(), F_OK) != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(access(marker.c_str(), F_OK), 0) << "rank 0 never wrote its marker";
  kill(crashed, SIGKILL);
  waitpid(crashed, nullptr, 0);

  JobOpen o;
  o.world = 2;
  o.rendezvous = url;
  o.yaml_job = "resumed";
  o.timeout = "2s";
  Opened again = open_job(o);
  EXPECT_EQ(again.session, nullptr);
  EXPECT_EQ(again.code, DDPH_INVALID_ARGUMENT) << again.message;
  EXPECT_TRUE(contains(again.message, "a job with this id already ran here or is running"))
      << again.message;
  EXPECT_TRUE(contains(again.message, "pid " + std::to_string(crashed))) << again.message;
  EXPECT_LT(again.seconds, 1.0) << "refused at once, not after the timeout";
  // The message's own command removes the keys.
  const size_t from = again.message.find("rm -f '");
  ASSERT_NE(from, std::string::npos) << again.message;
  const std::string command = again.message.substr(from, again.message.find('*', from) + 1 - from);
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  // No key is left. The killed writer may leave the temporary file of a
  // write it was making (".tmp-PID-N", core/comm/rendezvous/file_store.cpp),
  // which no key reads.
  std::vector<std::string> keys;
  for (const std::string& name : files_in(dir + "/store"))
    if (name[0] != '.') keys.push_back(name);
  EXPECT_TRUE(keys.empty()) << command << " left " << testing::PrintToString(keys);

  auto res = run_ranks(
      2,
      [&](int rank, int world, const std::string&) {
        JobOpen r;
        r.rank = rank;
        r.world = world;
        r.rendezvous = url;
        r.yaml_job = "resumed";
        Opened s = open_job(r);
        DDPH_CHILD_CHECK(s.session != nullptr, "rank %d: %s", rank, s.message.c_str());
        ddph_session_close(s.session);
        return 0;
      },
      30);
  EXPECT_TRUE(all_passed(res)) << describe(res);
}

// Two processes started as rank 0 of one job id at once: one is refused at
// once, naming the other; the other then times out waiting for rank 1.
TEST(JobIdentity, TwoRank0sOfOneJobIdAreRefused) {
  auto res = run_ranks(
      2,
      [](int process, int, const std::string& dir) {
        JobOpen o;
        o.world = 2;
        o.rendezvous = "file://" + dir + "/store";
        o.yaml_job = "twice";
        o.timeout = "1s";
        Opened s = open_job(o);
        DDPH_CHILD_CHECK(s.session == nullptr, "process %d opened a session of one rank", process);
        if (s.code == DDPH_INVALID_ARGUMENT) {
          DDPH_CHILD_CHECK(contains(s.message, "already ran here or is running"), "%s",
                           s.message.c_str());
          return 10;  // the refused one
        }
        DDPH_CHILD_CHECK(s.code == DDPH_TIMEOUT, "process %d: %s", process, s.message.c_str());
        return 20;  // the one that held the id
      },
      30);
  ASSERT_EQ(res.size(), 2u);
  EXPECT_EQ(res[0].exit_code + res[1].exit_code, 30) << describe(res);
}

// Two processes started as rank 1 of a run that cannot complete yet (rank
// 2 waits until one of them has been refused): both read the run's marker,
// one takes rank 1 and the other is refused, naming it.
TEST(JobIdentity, ASecondProcessAsTheSameRankIsRefused) {
  auto res = run_ranks(
      4,
      [](int process, int, const std::string& dir) {
        const std::string refused = dir + "/refused";
        if (process == 3)
          for (int i = 0; i < 2000 && access(refused.c_str(), F_OK) != 0; ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        JobOpen o;
        o.rank = process == 0 ? 0 : process == 3 ? 2 : 1;
        o.world = 3;
        o.rendezvous = "file://" + dir + "/store";
        o.yaml_job = "claimed";
        o.timeout = "30s";
        Opened s = open_job(o);
        if (s.session == nullptr) {
          DDPH_CHILD_CHECK(o.rank == 1, "rank %d: %s", o.rank, s.message.c_str());
          DDPH_CHILD_CHECK(s.code == DDPH_INVALID_ARGUMENT &&
                               contains(s.message, "rank 1 of job 'claimed' is taken: rank 1 (pid"),
                           "%s", s.message.c_str());
          std::ofstream(refused) << getpid();
          return 10;  // the refused one
        }
        std::string message;
        const float mean = average_of(s.session, float(o.rank), &message);
        ddph_session_close(s.session);
        DDPH_CHILD_CHECK(mean == 1.0f, "rank %d: mean %g (%s)", o.rank, double(mean),
                         message.c_str());
        return 0;
      },
      60);
  ASSERT_EQ(res.size(), 4u);
  EXPECT_EQ(res[0].exit_code, 0) << describe(res);
  EXPECT_EQ(res[3].exit_code, 0) << describe(res);
  EXPECT_EQ(res[1].exit_code + res[2].exit_code, 10) << describe(res);
}

// A rank started with another world size is told so, naming rank 0.
TEST(JobIdentity, AWorldSizeMismatchIsSaidInThoseWords) {
  auto res = run_ranks(
      2,
      [](int rank, int, const std::string& dir) {
        JobOpen o;
        o.rank = rank;
        o.world = rank == 0 ? 2 : 3;
        o.rendezvous = "file://" + dir + "/store";
        o.yaml_job = "sizes";
        o.timeout = "1s";
        Opened s = open_job(o);
        DDPH_CHILD_CHECK(s.session == nullptr, "rank %d opened", rank);
        if (rank == 1)
          DDPH_CHILD_CHECK(
              s.code == DDPH_INVALID_ARGUMENT && contains(s.message, "world size mismatch") &&
                  contains(s.message, "world_size 3") && contains(s.message, "world_size 2"),
              "%s", s.message.c_str());
        else
          DDPH_CHILD_CHECK(s.code == DDPH_TIMEOUT && contains(s.message, "rank 1"), "%s",
                           s.message.c_str());
        return 0;
      },
      30);
  EXPECT_TRUE(all_passed(res)) << describe(res);
}

// Keys never depend on how many sessions a process opened: rank 0 opens
// (and closes) two sessions of other jobs first, rank 1 none, and they meet.
TEST(JobIdentity, SessionsOpenedEarlierDoNotMoveTheKeys) {
  auto res = run_ranks(
      2,
      [](int rank, int world, const std::string& dir) {
        const std::string url = "file://" + dir + "/store";
        if (rank == 0) {
          for (const char* other : {"warmup-1", "warmup-2"}) {
            JobOpen w;
            w.rendezvous = "file://" + dir + "/own";
            w.yaml_job = other;
            Opened s = open_job(w);
            DDPH_CHILD_CHECK(s.session != nullptr, "%s", s.message.c_str());
            ddph_session_close(s.session);
          }
        }
        JobOpen o;
        o.rank = rank;
        o.world = world;
        o.rendezvous = url;
        o.option_job = "counted";  // from the host this time
        o.timeout = "10s";
        return join_and_average(o, float(rank), 0.5f);
      },
      30);
  EXPECT_TRUE(all_passed(res)) << describe(res);
}

}  // namespace
}  // namespace ddph_test
