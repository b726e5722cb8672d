// The ring that keeps a session's bucket records: the latest kMetricsKept,
// handed out oldest first, against a std::deque model of the same rule.
#include "loader/session/metrics_ring.h"

#include <gtest/gtest.h>

#include <deque>

namespace {

using ddph::loader::kMetricsKept;
using ddph::loader::MetricsRing;

ddph_bucket_metrics_t record(uint64_t n) {
  ddph_bucket_metrics_t r{};
  r.struct_size = sizeof r;
  r.step = n;
  r.bytes_in = 3 * n + 1;
  return r;
}

TEST(MetricsRing, KeepsTheLatest65536AndDropsTheOldest) {
  EXPECT_EQ(kMetricsKept, 65536u);  // the figure ddph.h promises
  MetricsRing ring;
  const uint64_t pushed = kMetricsKept + 10;
  for (uint64_t i = 0; i < pushed; ++i) ring.push(record(i));
  EXPECT_EQ(ring.dropped(), 10u);
  ddph_bucket_metrics_t r;
  for (uint64_t want = 10; want < pushed; ++want) {
    ASSERT_TRUE(ring.take(&r)) << "ran out at " << want;
    ASSERT_EQ(r.step, want);
    ASSERT_EQ(r.bytes_in, 3 * want + 1);
  }
  EXPECT_FALSE(ring.take(&r));
}

// Pushes and takes interleaved across growth and wrap-around, with a small
// capacity: the ring hands out exactly what a bounded deque would.
TEST(MetricsRing, MatchesABoundedQueueAcrossGrowthAndWrap) {
  for (size_t capacity : {1u, 5u, 64u, 100u, 300u}) {
    MetricsRing ring(capacity);
    std::deque<uint64_t> model;
    uint64_t next = 0, dropped = 0;
    for (int round = 0; round < 40; ++round) {
      for (int i = 0; i < (round * 37) % 211; ++i) {
        ring.push(record(next));
        model.push_back(next++);
        if (model.size() > capacity) model.pop_front(), ++dropped;
      }
      for (int i = 0; i < (round * 53) % 97; ++i) {
        ddph_bucket_metrics_t r;
        const bool took = ring.take(&r);
        ASSERT_EQ(took, !model.empty()) << "capacity " << capacity << " round " << round;
        if (!took) break;
        ASSERT_EQ(r.step, model.front()) << "capacity " << capacity << " round " << round;
        model.pop_front();
      }
    }
    EXPECT_EQ(ring.dropped(), dropped) << "capacity " << capacity;
  }
}

}  // namespace
