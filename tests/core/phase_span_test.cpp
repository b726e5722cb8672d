// core's PhaseSpan (ABI 1.7): one ddph_host_t.span call per phase, with the
// monotonic times around it; none under a loader whose host table predates
// span (a 1.0-sized table with a span pointer past its end must not be
// read); and spans of a helper thread reported from the owner's thread.
#include "core/base/phase_span.h"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "core/base/host.h"
#include "core/comm/pipeline.h"

namespace {

struct Call {
  const ddph_bucket_t* bucket;
  ddph_phase_t phase;
  uint64_t start_ns, end_ns;
  std::thread::id thread;
};
std::mutex g_mu;
std::vector<Call> g_calls;

void record(const struct ddph_bucket* b, ddph_phase_t phase, uint64_t start, uint64_t end) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_calls.push_back({b, phase, start, end, std::this_thread::get_id()});
}
std::vector<Call> take() {
  std::lock_guard<std::mutex> lock(g_mu);
  std::vector<Call> out;
  out.swap(g_calls);
  return out;
}
void log_nothing(ddph_log_level_t, const char*, const char*) {}

ddph_host_t host_of_size(size_t size) {
  ddph_host_t h{};
  h.struct_size = size;
  h.abi_major = DDPH_ABI_MAJOR;
  h.abi_minor = size >= DDPH_HOST_SIZE_V1_7 ? 7 : 0;
  h.log = &log_nothing;
  h.span = &record;  // past the end of a 1.0-sized table: must not be called
  return h;
}

uint64_t steady_ns() {
  return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now().time_since_epoch())
                      .count());
}

TEST(PhaseSpan, ReportsOncePerPhaseWithTheMonotonicTimesAroundIt) {
  static const ddph_host_t host = host_of_size(sizeof(ddph_host_t));
  ASSERT_TRUE(ddph::set_host(&host));
  take();
  ddph_bucket_t bucket{};
  const uint64_t before = steady_ns();
  {
    ddph::PhaseSpan span(DDPH_PHASE_COLLECTIVE, &bucket);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const uint64_t after = steady_ns();
  const std::vector<Call> calls = take();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0].bucket, &bucket);
  EXPECT_EQ(calls[0].phase, DDPH_PHASE_COLLECTIVE);
  EXPECT_LE(before, calls[0].start_ns);
  EXPECT_GE(calls[0].end_ns, calls[0].start_ns + 2000000u);  // slept 2 ms inside
  EXPECT_LE(calls[0].end_ns, after);
}

TEST(PhaseSpan, AHostTableOlderThan1_7IsNeverCalled) {
  static const ddph_host_t old_host = host_of_size(DDPH_HOST_SIZE_V1_0);
  ASSERT_TRUE(ddph::set_host(&old_host));
  take();
  { ddph::PhaseSpan span(DDPH_PHASE_COMPRESS); }
  ddph::report_span(nullptr, DDPH_PHASE_DECOMPRESS, 1, 2);
  EXPECT_TRUE(take().empty());
}

TEST(PhaseSpan, AHelperThreadsSpansAreReportedFromTheOwnersThread) {
  static const ddph_host_t host = host_of_size(sizeof(ddph_host_t));
  ASSERT_TRUE(ddph::set_host(&host));
  take();
  ddph::DeferredSpans kept;
  std::thread helper([&] {
    ddph::DeferredSpans::Collect collect(kept);
    { ddph::PhaseSpan span(DDPH_PHASE_COMPRESS); }
    { ddph::PhaseSpan span(DDPH_PHASE_DECOMPRESS); }
  });
  helper.join();
  EXPECT_TRUE(take().empty()) << "reported from the helper thread";
  kept.report();
  const std::vector<Call> calls = take();
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0].phase, DDPH_PHASE_COMPRESS);
  EXPECT_EQ(calls[1].phase, DDPH_PHASE_DECOMPRESS);
  EXPECT_LE(calls[0].end_ns, calls[1].start_ns);
  for (const Call& c : calls) EXPECT_EQ(c.thread, std::this_thread::get_id());
  kept.report();  // reported once
  EXPECT_TRUE(take().empty());
}

// The compress and decompress stages of run_pipelined run on its helper
// thread, where the loader could not tell their bucket: they are reported
// from the caller's thread (the session's worker) before it returns.
TEST(PhaseSpan, RunPipelinedReportsItsHelpersPhasesFromTheCaller) {
  static const ddph_host_t host = host_of_size(sizeof(ddph_host_t));
  ASSERT_TRUE(ddph::set_host(&host));
  take();
  ddph::PipelineStages stages;
  stages.before = [](size_t) { ddph::PhaseSpan span(DDPH_PHASE_COMPRESS); };
  stages.transfer = [](size_t) { ddph::PhaseSpan span(DDPH_PHASE_COLLECTIVE); };
  stages.after = [](size_t) { ddph::PhaseSpan span(DDPH_PHASE_DECOMPRESS); };
  ddph::run_pipelined(3, stages);
  const std::vector<Call> calls = take();
  ASSERT_EQ(calls.size(), 9u);
  int per_phase[3] = {0, 0, 0};
  for (const Call& c : calls) {
    EXPECT_EQ(c.thread, std::this_thread::get_id()) << "phase " << c.phase;
    ++per_phase[c.phase];
  }
  EXPECT_EQ(per_phase[DDPH_PHASE_COMPRESS], 3);
  EXPECT_EQ(per_phase[DDPH_PHASE_COLLECTIVE], 3);
  EXPECT_EQ(per_phase[DDPH_PHASE_DECOMPRESS], 3);
}

}  // namespace
