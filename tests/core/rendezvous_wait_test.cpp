// The rendezvous waits of a large world keep their timeout: one rank waits,
// as gloo's connectFullMesh does, for the keys of 999 or 4999 other ranks,
// one of which never comes, and fails naming that rank at the timeout,
// within 10%. No processes: the other ranks' keys are written beforehand.
// Before, each key got a deadline of its own and a round trip or two, so
// the wait grew with the world (11 s at 1,000 ranks and 52 s at 5,000 with
// a 1 s timeout).
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "core/base/error.h"
#include "core/comm/rendezvous/file_store.h"
#include "core/comm/rendezvous/gloo/gloo_store.h"
#include "core/comm/rendezvous/kv_store.h"
#include "tests/support/multiprocess.h"

namespace ddph {
namespace rendezvous {
namespace {

using namespace std::chrono_literals;

constexpr auto kTimeout = 1000ms;
constexpr auto kRoundTrip = 1ms;  // a store across a network: every call is one round trip

// A store in memory whose every call costs one round trip, one key or
// many (as Redis's GET and MGET do).
class DistantStore : public KvStore {
 public:
  DistantStore() : kv_(memory_store()) {}
  void set(const std::string& k, const std::string& v, Deadline d) override { kv_->set(k, v, d); }
  bool add(const std::string& k, const std::string& v, Deadline d) override {
    return kv_->add(k, v, d);
  }
  bool try_get(const std::string& k, std::string* v, Deadline d) override {
    std::this_thread::sleep_for(kRoundTrip);
    return kv_->try_get(k, v, d);
  }
  void try_get_many(const std::vector<std::string>& keys, std::vector<std::string>* values,
                    std::vector<bool>* found, Deadline d) override {
    std::this_thread::sleep_for(kRoundTrip);
    values->assign(keys.size(), "");
    found->assign(keys.size(), false);
    for (size_t i = 0; i < keys.size(); ++i) (*found)[i] = kv_->try_get(keys[i], &(*values)[i], d);
  }
  void erase(const std::string& k, Deadline d) override { kv_->erase(k, d); }
  std::string describe() const override { return "a distant store"; }
  std::string how_to_remove(const std::string&) const override { return ""; }

 private:
  std::unique_ptr<KvStore> kv_;
};

// Rank 0's connectFullMesh in a world of `world` where the last rank never
// came: it sets its key, then waits for and reads each other rank's in
// turn. Returns the seconds until it failed and the error's text.
std::pair<double, std::string> wait_like_gloo(std::shared_ptr<KvStore> kv, int world) {
  const std::string prefix = "job/comm";
  for (int r = 1; r < world - 1; ++r)
    kv->set(prefix + "/" + std::to_string(r), "address of " + std::to_string(r), {});
  GlooStore store(kv, prefix, kTimeout, world);
  const auto start = std::chrono::steady_clock::now();
  try {
    store.set("0", {'a'});
    for (int r = 1; r < world; ++r) {
      store.wait({std::to_string(r)}, kTimeout);
      const std::vector<char> v = store.get(std::to_string(r));
      EXPECT_EQ(std::string(v.begin(), v.end()), "address of " + std::to_string(r));
    }
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), DDPH_TIMEOUT) << e.what();
    return {std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
            e.what()};
  }
  ADD_FAILURE() << "the wait returned without rank " << world - 1;
  return {0, ""};
}

void expect_at_the_timeout(const std::pair<double, std::string>& got, int world) {
  const double timeout_s = std::chrono::duration<double>(kTimeout).count();
  EXPECT_GE(got.first, timeout_s * 0.99) << got.second;
  EXPECT_LE(got.first, timeout_s * 1.1) << got.second;
  const std::string named = "rank " + std::to_string(world - 1) + " of 'job/comm' has not joined";
  EXPECT_NE(got.second.find(named), std::string::npos) << got.second;
}

class LargeWorld : public ::testing::TestWithParam<int> {};

TEST_P(LargeWorld, ADistantStoreKeepsTheTimeout) {
  const int world = GetParam();
  expect_at_the_timeout(wait_like_gloo(std::make_shared<DistantStore>(), world), world);
}

TEST_P(LargeWorld, AFileStoreKeepsTheTimeout) {
  const int world = GetParam();
  auto kv = std::make_shared<FileStore>(ddph_test::make_temp_dir("ddph-wait") + "/store");
  expect_at_the_timeout(wait_like_gloo(kv, world), world);
}

INSTANTIATE_TEST_SUITE_P(Ranks, LargeWorld, ::testing::Values(1000, 5000));

// Every rank that is missing is named, not only the first.
TEST(GetAll, NamesEveryMissingKeyAtOneDeadline) {
  auto kv = memory_store();
  kv->set("a", "1", {});
  const auto start = std::chrono::steady_clock::now();
  try {
    kv->get_all({"a", "b", "c"}, deadline_in(200ms));
    FAIL() << "returned without b and c";
  } catch (const KeysMissing& e) {
    EXPECT_EQ(e.keys(), (std::vector<std::string>{"b", "c"}));
    EXPECT_NE(std::string(e.what()).find("key 'b', 'c' did not appear"), std::string::npos)
        << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 220ms);
  kv->set("b", "2", {});
  kv->set("c", "3", {});
  EXPECT_EQ(kv->get_all({"a", "b", "c"}, deadline_in(200ms)),
            (std::vector<std::string>{"1", "2", "3"}));
}

}  // namespace
}  // namespace rendezvous
}  // namespace ddph
