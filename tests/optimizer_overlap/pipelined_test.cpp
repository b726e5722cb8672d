// hook_then_optimizer steps a host bucket on its own thread after run()
// returns (DDPH_HOOK_PIPELINED, ABI 1.6), so the session starts the next
// bucket's inner hook while this one steps. Through a session of one rank
// over Gloo, wrapping default/allreduce, with SGD (p -= lr * g).
#include <ddph/ddph.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "conformance/lent_bucket.h"

namespace {

constexpr int64_t kNumel = 1024;
constexpr float kLr = 0.5f;

std::string yaml() {
  return "plugin_path: [" DDPH_PLUGIN_DIR
         "]\n"
         "comm: {backend: gloo, rank: 0, world_size: 1}\n"
         "hook:\n"
         "  family: optimizer_overlap\n"
         "  name: hook_then_optimizer\n"
         "  options: {optimizer: sgd, lr: 0.5}\n"
         "  wrap: {family: default, name: allreduce}\n";
}

// A float32 bucket of one lent 1 x kNumel parameter, gradients g,
// parameter values `initial`, not the step's last.
struct Bucket : ddph::plugin_checks::LentBucket {
  Bucket(uint64_t index, float g, float initial) : LentBucket(kNumel, 1, kNumel) {
    std::fill(data.begin(), data.end(), g);
    std::fill(param_data.begin(), param_data.end(), initial);
    b.index = index;
    b.is_last = 0;
  }
};

struct Probe {
  ddph_session_t* s = nullptr;
  std::thread::id submitter;
  // Set by bucket 0's done: whether bucket 1 had reached the hook (its
  // bytes counted) while bucket 0's done was still running, and whether
  // that done came from a thread other than the one that submitted.
  std::atomic<bool> saw_next_bucket{false}, other_thread{false};
  std::atomic<int> dones{0};
  std::atomic<int> failures{0};
};

uint64_t bytes_in(ddph_session_t* s) {
  ddph_stats_t st{};
  st.struct_size = sizeof st;
  ddph_error_t* e = ddph_session_stats(s, &st);
  ddph_error_free(e);
  return st.bytes_in;
}

void first_done(void* user, ddph_error_t* e) {
  auto* probe = static_cast<Probe*>(user);
  if (e != nullptr) probe->failures++;
  ddph_error_free(e);
  probe->other_thread = std::this_thread::get_id() != probe->submitter;
  // Bucket 0 has stepped; its done holds the step thread. If the session
  // had waited for this done before starting bucket 1, bucket 1's bytes
  // would never arrive while we wait here.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (bytes_in(probe->s) < 2 * kNumel * sizeof(float) &&
         std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  probe->saw_next_bucket = bytes_in(probe->s) >= 2 * kNumel * sizeof(float);
  probe->dones++;
}

void later_done(void* user, ddph_error_t* e) {
  auto* probe = static_cast<Probe*>(user);
  if (e != nullptr) probe->failures++;
  ddph_error_free(e);
  probe->dones++;
}

}  // namespace

TEST(Pipelined, TheNextBucketsInnerHookRunsWhileThisBucketSteps) {
  const std::string text = yaml();
  ddph_session_options_t o{};
  o.struct_size = sizeof o;
  o.yaml_text = text.c_str();
  o.rank = -1;
  o.world_size = -1;
  Probe probe;
  probe.submitter = std::this_thread::get_id();
  ddph_error_t* e = ddph_session_open(&o, &probe.s);
  ASSERT_EQ(e, nullptr) << ddph_error_message(e);

  Bucket b0(0, 2.0f, 1.0f), b1(1, 4.0f, 1.0f), b2(2, 8.0f, 1.0f);
  ASSERT_EQ(ddph_session_submit(probe.s, &b0.b, &first_done, &probe), nullptr);
  ASSERT_EQ(ddph_session_submit(probe.s, &b1.b, &later_done, &probe), nullptr);
  ASSERT_EQ(ddph_session_submit(probe.s, &b2.b, &later_done, &probe), nullptr);
  e = ddph_session_flush(probe.s);
  EXPECT_EQ(e, nullptr) << ddph_error_message(e);
  ddph_error_free(e);
  EXPECT_EQ(probe.dones.load(), 3);
  EXPECT_EQ(probe.failures.load(), 0);
  EXPECT_TRUE(probe.saw_next_bucket.load());
  EXPECT_TRUE(probe.other_thread.load());
  // Every bucket stepped once with its own gradient (world of one: the
  // average is the gradient): p = 1 - lr * g.
  for (int64_t i = 0; i < kNumel; i += 97) {
    EXPECT_EQ(b0.param_data[size_t(i)], 1.0f - kLr * 2.0f);
    EXPECT_EQ(b1.param_data[size_t(i)], 1.0f - kLr * 4.0f);
    EXPECT_EQ(b2.param_data[size_t(i)], 1.0f - kLr * 8.0f);
  }

  // A checkpoint right after submitting waits for the bucket's step.
  Bucket again(0, 2.0f, 0.0f);
  ASSERT_EQ(ddph_session_submit(probe.s, &again.b, &later_done, &probe), nullptr);
  std::string blob;
  e = ddph_session_save_state(
      probe.s,
      [](void* sink, const void* bytes, size_t n) {
        static_cast<std::string*>(sink)->append(static_cast<const char*>(bytes), n);
      },
      &blob);
  EXPECT_EQ(e, nullptr) << ddph_error_message(e);
  ddph_error_free(e);
  EXPECT_EQ(probe.dones.load(), 4);
  EXPECT_EQ(again.param_data[0], -kLr * 2.0f);
  ddph_session_close(probe.s);
}
