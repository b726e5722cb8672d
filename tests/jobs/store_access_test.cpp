// Only the store's owner can join a job: a file store's directory must be
// this user's and closed to others, and with a shared secret a process that
// does not hold it is refused.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "tests/jobs/job_ranks.h"
#include "tests/support/multiprocess.h"
#include "tests/support/redis_server.h"

namespace ddph_test {
namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::string write_secret(const std::string& dir, const std::string& name, const std::string& secret,
                         mode_t mode = 0600) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << secret;
  chmod(path.c_str(), mode);
  return path;
}

TEST(StoreAccess, AMissingDirectoryIsCreatedForTheOwnerAlone) {
  const std::string dir = make_temp_dir("ddph-access") + "/new/store";
  JobOpen o;
  o.rendezvous = "file://" + dir;
  Opened s = open_job(o);
  ASSERT_NE(s.session, nullptr) << s.message;
  ddph_session_close(s.session);
  struct stat st {};
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(st.st_uid, geteuid());
}

TEST(StoreAccess, ADirectoryOthersMayWriteToIsRefused) {
  const std::string dir = make_temp_dir("ddph-access") + "/open";
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0777), 0);
  JobOpen o;
  o.rendezvous = "file://" + dir;
  Opened s = open_job(o);
  EXPECT_EQ(s.session, nullptr);
  EXPECT_EQ(s.code, DDPH_INVALID_ARGUMENT) << s.message;
  EXPECT_TRUE(contains(s.message, "has mode 0777")) << s.message;
  EXPECT_TRUE(contains(s.message, "chmod go-w " + dir)) << s.message;
}

TEST(StoreAccess, ASymbolicLinkIsRefused) {
  const std::string base = make_temp_dir("ddph-access");
  ASSERT_EQ(mkdir((base + "/real").c_str(), 0700), 0);
  ASSERT_EQ(symlink((base + "/real").c_str(), (base + "/link").c_str()), 0);
  JobOpen o;
  o.rendezvous = "file://" + base + "/link";
  Opened s = open_job(o);
  EXPECT_EQ(s.session, nullptr);
  EXPECT_TRUE(contains(s.message, "symbolic link")) << s.message;
}

// The case that was let in: another local user ("nobody") made the
// directory first and waited there as rank 1.
TEST(StoreAccess, ADirectoryOfAnotherUserIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give a directory to another user";
  passwd* nobody = getpwnam("nobody");
  if (nobody == nullptr) GTEST_SKIP() << "no user 'nobody'";
  const std::string dir = make_temp_dir("ddph-access") + "/theirs";
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(chown(dir.c_str(), nobody->pw_uid, nobody->pw_gid), 0);
  JobOpen o;
  o.world = 2;
  o.rendezvous = "file://" + dir;
  Opened s = open_job(o);
  EXPECT_EQ(s.session, nullptr);
  EXPECT_EQ(s.code, DDPH_INVALID_ARGUMENT) << s.message;
  EXPECT_TRUE(contains(s.message, "belongs to nobody")) << s.message;
  EXPECT_LT(s.seconds, 1.0) << "refused before any wait";
}

// Every rank of a job with a secret holds it: they meet. A rank with another
// secret, or none, is refused by its peers and refuses them, each naming why.
void secret_case(const char* rendezvous_kind, int redis_port) {
  const std::string base = make_temp_dir("ddph-secret");
  const std::string good = write_secret(base, "good", "the job's secret");
  const std::string other = write_secret(base, "other", "another secret");
  auto url = [&](const std::string& dir) {
    return redis_port > 0 ? "redis://127.0.0.1:" + std::to_string(redis_port)
                          : "file://" + dir + "/store";
  };
  {
    auto res = run_ranks(
        2,
        [&](int rank, int world, const std::string& dir) {
          JobOpen o;
          o.rank = rank;
          o.world = world;
          o.rendezvous = url(dir);
          o.yaml_job = std::string("secret-ok-") + rendezvous_kind;
          o.extra_comm = "secret_file: " + good;
          return join_and_average(o, float(rank), 0.5f);
        },
        30);
    EXPECT_TRUE(all_passed(res)) << rendezvous_kind << ": " << describe(res);
  }
  for (const std::string intruder : {"none", "other"}) {
    auto res = run_ranks(
        2,
        [&](int rank, int world, const std::string& dir) {
          JobOpen o;
          o.rank = rank;
          o.world = world;
          o.rendezvous = url(dir);
          o.yaml_job = "secret-" + intruder + "-" + rendezvous_kind;
          o.timeout = "2s";
          if (rank == 0) o.extra_comm = "secret_file: " + good;
          if (rank == 1 && intruder == "other") o.extra_comm = "secret_file: " + other;
          Opened s = open_job(o);
          DDPH_CHILD_CHECK(s.session == nullptr, "rank %d joined a job it must not", rank);
          DDPH_CHILD_CHECK(s.code == DDPH_INVALID_ARGUMENT || s.code == DDPH_TIMEOUT, "rank %d: %s",
                           rank, s.message.c_str());
          if (rank == 1) {
            // The intruder reads rank 0's marker first.
            const char* why =
                intruder == "none" ? "this rank (1) has none" : "not signed with this job's secret";
            DDPH_CHILD_CHECK(contains(s.message, why), "rank 1: %s", s.message.c_str());
          }
          return 0;
        },
        30);
    EXPECT_TRUE(all_passed(res)) << rendezvous_kind << ", intruder " << intruder << ": "
                                 << describe(res);
  }
}

TEST(StoreAccess, ARankWithoutTheJobsSecretIsRefusedFileStore) {
  secret_case("file", 0);
}

TEST(StoreAccess, ARankWithoutTheJobsSecretIsRefusedRedis) {
  const int port = free_port();
  const int redis = start_redis(port);
  if (redis < 0) GTEST_SKIP() << "redis-server is not installed or did not start";
  secret_case("redis", port);
  kill(redis, SIGTERM);
  waitpid(redis, nullptr, 0);
}

TEST(StoreAccess, ASecretFileOthersMayReadIsRefused) {
  const std::string base = make_temp_dir("ddph-secret");
  const std::string loose = write_secret(base, "loose", "secret", 0644);
  JobOpen o;
  o.rendezvous = "file://" + base + "/store";
  o.extra_comm = "secret_file: " + loose;
  Opened s = open_job(o);
  EXPECT_EQ(s.session, nullptr);
  EXPECT_EQ(s.code, DDPH_INVALID_ARGUMENT) << s.message;
  EXPECT_TRUE(contains(s.message, "comm.secret_file '" + loose + "'")) << s.message;
  EXPECT_TRUE(contains(s.message, "mode is 0644")) << s.message;
}

}  // namespace
}  // namespace ddph_test
