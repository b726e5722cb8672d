// DDP-style bucketing: every parameter lands in exactly one bucket, in
// reverse order, contiguously, and no bucket passes the cap unless a single
// parameter alone does.
#include <gtest/gtest.h>

#include <map>

#include "tool/ranks/buckets.h"

namespace ddph::tool {
namespace {

// The 2-64-64-3 MLP of `ddph train`: W1 b1 W2 b2 W3 b3.
const std::vector<int64_t> kMlp = {128, 64, 4096, 64, 192, 3};

void expect_valid(const std::vector<int64_t>& numels, int64_t cap_bytes,
                  const std::vector<BucketPlan>& plans) {
  std::map<int, int> seen;
  int expected_next = static_cast<int>(numels.size()) - 1;
  for (const BucketPlan& b : plans) {
    ASSERT_FALSE(b.slots.empty());
    int64_t offset = 0;
    for (const BucketSlot& s : b.slots) {
      EXPECT_EQ(s.param, expected_next--) << "parameters must come in reverse order";
      EXPECT_EQ(s.offset, offset) << "views must tile the buffer";
      EXPECT_EQ(s.numel, numels[s.param]);
      offset += s.numel;
      ++seen[s.param];
    }
    EXPECT_EQ(b.numel, offset);
    if (cap_bytes > 0 && b.slots.size() > 1) {
      EXPECT_LE(b.numel * 4, cap_bytes);
    }
  }
  EXPECT_EQ(seen.size(), numels.size());
  for (const auto& [param, count] : seen) EXPECT_EQ(count, 1) << "param " << param;
}

TEST(TrainBuckets, MlpAtDefaultCapMakesSeveralBuckets) {
  auto plans = plan_buckets(kMlp, 4096);
  expect_valid(kMlp, 4096, plans);
  ASSERT_EQ(plans.size(), 3u);
  EXPECT_EQ(plans[0].numel, 3 + 192 + 64);  // b3 W3 b2: the last layer first
  EXPECT_EQ(plans[1].numel, 4096);          // W2 alone, over the cap by itself
  EXPECT_EQ(plans[2].numel, 64 + 128);      // b1 W1
}

TEST(TrainBuckets, EveryCapCoversEveryParamOnce) {
  for (int64_t cap : {1, 4, 100, 256, 1024, 4096, 16384, 17000, 18188, 1 << 20})
    expect_valid(kMlp, cap, plan_buckets(kMlp, cap));
  std::vector<int64_t> odd = {1, 7, 1000, 3, 3, 3, 50000, 2};
  for (int64_t cap : {4, 12, 40, 4000, 1 << 20}) expect_valid(odd, cap, plan_buckets(odd, cap));
}

TEST(TrainBuckets, NoCapOrBigCapMeansOneBucket) {
  EXPECT_EQ(plan_buckets(kMlp, 0).size(), 1u);
  EXPECT_EQ(plan_buckets(kMlp, 1 << 30).size(), 1u);
  EXPECT_TRUE(plan_buckets({}, 4096).empty());
}

TEST(TrainBuckets, TinyCapGivesEachParamItsOwnBucket) {
  EXPECT_EQ(plan_buckets(kMlp, 4).size(), kMlp.size());
}

TEST(TrainBuckets, GradBucketFillsTheAbiView) {
  std::vector<int64_t> w = {3, 4}, b = {3};
  auto plans = plan_buckets({12, 3}, 0);
  ASSERT_EQ(plans.size(), 1u);
  GradBucket bucket(5, plans[0], {&w, &b});
  const ddph_bucket_t* v = bucket.bucket(17, true);
  EXPECT_EQ(v->struct_size, sizeof(ddph_bucket_t));
  EXPECT_EQ(v->index, 5u);
  EXPECT_EQ(v->step, 17u);
  EXPECT_NE(v->is_last, 0);
  EXPECT_EQ(v->buffer.data, bucket.data());
  EXPECT_EQ(v->buffer.ndim, 1);
  EXPECT_EQ(v->buffer.shape[0], 15);
  EXPECT_EQ(v->buffer.dtype.code, kDLFloat);
  EXPECT_EQ(v->buffer.dtype.bits, 32);
  EXPECT_EQ(v->stream, nullptr);
  ASSERT_EQ(v->num_params, 2u);
  // Reverse order: b (param 1) first at offset 0, then W at offset 3.
  EXPECT_EQ(v->params[0].offset, 0);
  EXPECT_EQ(v->params[0].ndim, 1);
  EXPECT_EQ(v->params[0].shape[0], 3);
  EXPECT_EQ(v->params[1].offset, 3);
  EXPECT_EQ(v->params[1].ndim, 2);
  EXPECT_EQ(v->params[1].shape[1], 4);
  EXPECT_EQ(v->params[1].data.data, nullptr);
  EXPECT_EQ(bucket.bucket(18, false)->is_last, 0);
}

}  // namespace
}  // namespace ddph::tool
