// The job store's frame and its checks, in one process over a file store:
// what a value that did not come from a rank of this job gets. The frame is
// written here by hand, from its layout in loader/job/job_store.cpp, so that the
// test does not trust the code it checks.
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "core/base/error.h"
#include "core/comm/rendezvous/file_store.h"
#include "loader/host_table.h"
#include "loader/job/job_id.h"
#include "loader/job/job_secret.h"
#include "loader/job/job_store.h"
#include "tests/support/multiprocess.h"

namespace ddph {
namespace loader {
namespace {

using rendezvous::deadline_in;
using namespace std::chrono_literals;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

void put(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += char(uint8_t(v >> (8 * i)));
}

// "DDPHKEY1", flags, rank, pid, host, payload [, HMAC over key 0 frame].
std::string hand_frame(uint32_t rank, const std::string& host, const std::string& payload,
                       const std::string& key = "", const std::string& secret = "") {
  std::string f = "DDPHKEY1";
  put(f, secret.empty() ? 0 : 1, 1);
  put(f, rank, 4);
  put(f, 4242, 4);
  put(f, host.size(), 4);
  f += host;
  put(f, payload.size(), 8);
  f += payload;
  if (!secret.empty()) f += hmac_sha256(secret, key + '\0' + f);
  return f;
}

struct Fixture {
  Fixture() { install_loader_host(); }
  std::string dir = ddph_test::make_temp_dir("ddph-jobstore");
  std::shared_ptr<rendezvous::FileStore> raw = std::make_shared<rendezvous::FileStore>(dir);

  std::unique_ptr<JobStore> store(int rank, const std::string& secret) {
    JobRun run;
    run.job = "unit";
    run.job_source = "the test";
    run.rank = rank;
    run.world = 2;
    run.timeout = 2s;
    run.secret = secret;
    return std::make_unique<JobStore>(std::make_unique<rendezvous::FileStore>(dir), run);
  }
};

ddph_code_t get_code(JobStore& s, const std::string& key, std::string* message) {
  std::string value;
  struct Sink {
    std::string* v;
  } sink{&value};
  ddph_error_t* e = s.table()->get(
      s.table()->ctx, key.c_str(), 500,
      [](void* k, const void* b, size_t n) {
        static_cast<Sink*>(k)->v->assign(static_cast<const char*>(b), n);
      },
      &sink);
  const ddph_code_t code = ddph_error_code(e);
  *message = e ? ddph_error_message(e) : value;
  ddph_error_free(e);
  return code;
}

TEST(JobStore, AValueSignedWithTheSecretIsAccepted) {
  Fixture f;
  auto rank0 = f.store(0, "k3y");
  const std::string full = rank0->full_key("comm/1");
  f.raw->set(full, hand_frame(1, "peer", "address", full, "k3y"), deadline_in(1s));
  std::string got;
  EXPECT_EQ(get_code(*rank0, "comm/1", &got), DDPH_OK) << got;
  EXPECT_EQ(got, "address");
}

TEST(JobStore, AnUnsignedValueIsRefusedNamingItsWriter) {
  Fixture f;
  auto rank0 = f.store(0, "k3y");
  const std::string full = rank0->full_key("comm/1");
  f.raw->set(full, hand_frame(1, "intruder", "address"), deadline_in(1s));
  std::string message;
  EXPECT_EQ(get_code(*rank0, "comm/1", &message), DDPH_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(message, "written by rank 1 (pid 4242 on host intruder)")) << message;
  EXPECT_TRUE(contains(message, "it is not signed")) << message;
}

TEST(JobStore, AValueSignedWithAnotherSecretOrForAnotherKeyIsRefused) {
  Fixture f;
  auto rank0 = f.store(0, "k3y");
  const std::string full = rank0->full_key("comm/1");
  for (const auto& [secret, key] :
       {std::pair<std::string, std::string>{"other", full}, {"k3y", rank0->full_key("comm/0")}}) {
    f.raw->set(full, hand_frame(1, "peer", "address", key, secret), deadline_in(1s));
    std::string message;
    EXPECT_EQ(get_code(*rank0, "comm/1", &message), DDPH_INVALID_ARGUMENT) << secret;
    EXPECT_TRUE(contains(message, "not signed with this job's secret")) << message;
  }
}

TEST(JobStore, ASignedValueIsRefusedByARankWithoutASecret) {
  Fixture f;
  auto rank0 = f.store(0, "");
  const std::string full = rank0->full_key("comm/1");
  f.raw->set(full, hand_frame(1, "peer", "address", full, "k3y"), deadline_in(1s));
  std::string message;
  EXPECT_EQ(get_code(*rank0, "comm/1", &message), DDPH_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(message, "this rank (0) has none")) << message;
}

TEST(JobStore, AValueOfAnotherProgramIsRefused) {
  Fixture f;
  auto rank0 = f.store(0, "");
  const std::string full = rank0->full_key("comm/1");
  f.raw->set(full, "127.0.0.1:29500", deadline_in(1s));
  std::string message;
  EXPECT_EQ(get_code(*rank0, "comm/1", &message), DDPH_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(message, "was not written by this version of ddphooks")) << message;
}

// Release removes every key this rank wrote, and rank 0's marker.
TEST(JobStore, ReleaseLeavesTheDirectoryEmpty) {
  Fixture f;
  {
    auto rank0 = f.store(0, "");
    auto rank1 = f.store(1, "");
    ASSERT_EQ(rank0->table()->set(rank0->table()->ctx, "comm/0", "a", 1), nullptr);
    ASSERT_EQ(rank1->table()->set(rank1->table()->ctx, "comm/1", "b", 1), nullptr);
    EXPECT_EQ(ddph_test::dir_entries(f.dir).size(), 5u);  // marker, 2 rank claims, 2 keys
    rank0->release();
    rank1->release();
  }
  EXPECT_TRUE(ddph_test::dir_entries(f.dir).empty())
      << testing::PrintToString(ddph_test::dir_entries(f.dir));
}

// A key written twice in one run is a collision, named, never a silent
// replacement.
TEST(JobStore, AKeyIsWrittenOnce) {
  Fixture f;
  auto rank0 = f.store(0, "");
  ASSERT_EQ(rank0->table()->set(rank0->table()->ctx, "comm/0", "a", 1), nullptr);
  ddph_error_t* e = rank0->table()->set(rank0->table()->ctx, "comm/0", "b", 1);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(ddph_error_code(e), DDPH_COMM_FAILURE);
  EXPECT_TRUE(contains(ddph_error_message(e), "already written by rank 0"))
      << ddph_error_message(e);
  ddph_error_free(e);
}

TEST(JobId, SourcesInOrder) {
  unsetenv("DDPH_JOB_ID");
  unsetenv("TORCHELASTIC_RUN_ID");
  EXPECT_EQ(resolve_job_id(nullptr, "").id, "default");
  setenv("TORCHELASTIC_RUN_ID", "none", 1);  // torchrun's default: not an id
  EXPECT_EQ(resolve_job_id(nullptr, "").id, "default");
  setenv("TORCHELASTIC_RUN_ID", "rdzv-7", 1);
  EXPECT_EQ(resolve_job_id(nullptr, "").id, "rdzv-7");
  setenv("DDPH_JOB_ID", "from-env", 1);
  EXPECT_EQ(resolve_job_id(nullptr, "").id, "from-env");
  EXPECT_EQ(resolve_job_id(nullptr, "from-yaml").id, "from-yaml");
  EXPECT_EQ(resolve_job_id("from-host", "from-yaml").id, "from-host");
  EXPECT_EQ(resolve_job_id("from-host", "from-yaml").source, "ddph_session_options.job");
  unsetenv("DDPH_JOB_ID");
  unsetenv("TORCHELASTIC_RUN_ID");
}

TEST(JobId, BadIdsAreRefusedNamingTheirSource) {
  setenv("DDPH_JOB_ID", "../etc", 1);
  try {
    resolve_job_id(nullptr, "");
    FAIL() << "accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), DDPH_INVALID_ARGUMENT);
    EXPECT_TRUE(contains(e.what(), "DDPH_JOB_ID '../etc' is not a job id")) << e.what();
  }
  unsetenv("DDPH_JOB_ID");
  EXPECT_FALSE(is_valid_job_id(""));
  EXPECT_FALSE(is_valid_job_id(std::string(65, 'a')));
  EXPECT_TRUE(is_valid_job_id(std::string(64, 'a')));
  EXPECT_FALSE(is_valid_job_id("a b"));
  EXPECT_TRUE(is_valid_job_id("run-2026.11_25"));
}

TEST(JobId, NewIdsAreValidAndDiffer) {
  const std::string a = new_job_id(), b = new_job_id();
  EXPECT_TRUE(is_valid_job_id(a)) << a;
  EXPECT_NE(a, b);
}

// HMAC-SHA256 against RFC 4231's test case 2.
TEST(JobSecret, HmacMatchesRfc4231) {
  const std::string mac = hmac_sha256("Jefe", "what do ya want for nothing?");
  std::string hex;
  for (unsigned char c : mac) {
    char b[3];
    snprintf(b, sizeof b, "%02x", c);
    hex += b;
  }
  EXPECT_EQ(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

}  // namespace
}  // namespace loader
}  // namespace ddph
