// ddph train --trace FILE.json (docs/cli.md): every rank's buckets as a
// Chrome trace, a queue span and a hook span per bucket, read back as JSON.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>

#include "tests/support/multiprocess.h"
#include "tests/tool/run_ddph.h"

namespace {

using ddph_tool_test::ddph;
using ddph_tool_test::describe;
using ddph_tool_test::kConfigs;
using ddph_tool_test::Result;
using ddph_tool_test::slurp;

constexpr int kSteps = 6;

TEST(ToolTrace, EveryRanksBucketsAreAQueueAndAHookSpan) {
  const std::string dir = ddph_test::make_temp_dir("ddph-trace");
  const std::string path = dir + "/trace.json";
  const Result r = ddph("train --config " + kConfigs + "quantization_rs8.yaml --world 2 --steps " +
                        std::to_string(kSteps) + " --log-every 3 --json --trace " + path);
  ASSERT_EQ(r.code, 0) << describe(r);
  // The buckets a rank reduced, from the run's own summary line.
  const auto summary = nlohmann::json::parse(r.out.substr(r.out.rfind("{\"event\":\"summary\"")));
  const int buckets_per_rank = summary.at("buckets").get<int>();
  ASSERT_EQ(buckets_per_rank % kSteps, 0) << summary;
  const int per_step = buckets_per_rank / kSteps;
  ASSERT_GE(per_step, 2) << "the config's buckets should be several";

  const auto trace = nlohmann::json::parse(slurp(path));
  // (rank, step, bucket) -> the queue span's end and the hook span's start.
  std::map<std::tuple<int, int, int>, double> queue_end, hook_start;
  std::set<int> named_ranks;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") == "M") {
      named_ranks.insert(e.at("pid").get<int>());
      continue;
    }
    ASSERT_EQ(e.at("ph"), "X") << e;
    const auto key = std::make_tuple(e.at("pid").get<int>(), e.at("args").at("step").get<int>(),
                                     e.at("args").at("bucket").get<int>());
    EXPECT_EQ(e.at("tid"), "bucket " + std::to_string(std::get<2>(key))) << e;
    EXPECT_GE(e.at("dur").get<double>(), 0) << e;
    EXPECT_GE(e.at("ts").get<double>(), 0) << e;
    EXPECT_TRUE(e.at("args").at("ok").get<bool>()) << e;
    if (e.at("name") == "queue") {
      EXPECT_TRUE(queue_end.emplace(key, e["ts"].get<double>() + e["dur"].get<double>()).second)
          << "two queue spans for one bucket: " << e;
    } else {
      EXPECT_EQ(e.at("name"), "quantization/per_channel") << e;
      EXPECT_TRUE(hook_start.emplace(key, e["ts"].get<double>()).second) << e;
    }
  }
  EXPECT_EQ(named_ranks, (std::set<int>{0, 1}));
  // Every bucket of every step on both ranks, once, its hook right after its wait.
  ASSERT_EQ(queue_end.size(), size_t(2 * buckets_per_rank));
  ASSERT_EQ(hook_start.size(), size_t(2 * buckets_per_rank));
  for (int rank = 0; rank < 2; ++rank)
    for (int step = 0; step < kSteps; ++step)
      for (int b = 0; b < per_step; ++b) {
        const auto key = std::make_tuple(rank, step, b);
        ASSERT_TRUE(queue_end.count(key) && hook_start.count(key))
            << "rank " << rank << " step " << step << " bucket " << b;
        EXPECT_NEAR(queue_end[key], hook_start[key], 1e-3);
      }
  std::system(("rm -rf " + dir).c_str());
}

TEST(ToolTrace, AFileThatCannotBeWrittenFailsBeforeAnyRankStarts) {
  const std::string dir = ddph_test::make_temp_dir("ddph-trace");
  const Result r = ddph("train --config " + kConfigs + "allreduce.yaml --steps 5 --trace " + dir +
                        "/missing/t.json");
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("--trace: cannot create " + dir + "/missing/t.json"), std::string::npos)
      << describe(r);
  EXPECT_EQ(r.out, "") << "a rank ran: " << describe(r);
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
