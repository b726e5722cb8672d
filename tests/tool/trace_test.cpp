// ddph train --trace FILE.json (docs/cli.md): every rank's buckets as a
// Chrome trace, a queue span and a hook span per bucket, and inside the hook
// span the phases the hook ran (ABI 1.7), read back as JSON.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "tests/support/multiprocess.h"
#include "tests/tool/run_ddph.h"

namespace {

using ddph_tool_test::ddph;
using ddph_tool_test::describe;
using ddph_tool_test::kConfigs;
using ddph_tool_test::Result;
using ddph_tool_test::slurp;

constexpr int kSteps = 6;

TEST(ToolTrace, EveryRanksBucketsAreAQueueAndAHookSpanWithItsPhasesInside) {
  const std::string dir = ddph_test::make_temp_dir("ddph-trace");
  const std::string path = dir + "/trace.json";
  // configs/quantization_rs8.yaml with every bucket quantized (it leaves
  // buckets under 64 KiB to plain allreduce, which has no codec phases).
  const std::string config = dir + "/q8.yaml";
  {
    std::ofstream f(config);
    f << "comm: {backend: gloo, rendezvous: \"file:///tmp/ddph-job\", timeout: 30s}\n"
         "hook:\n  family: quantization\n  name: per_channel\n"
         "  options: {protocol: reduce_scatter, channel_size: 512, bits: 8, min_bytes: 0}\n";
  }
  const Result r = ddph("train --config " + config + " --world 2 --steps " +
                        std::to_string(kSteps) + " --log-every 3 --json --trace " + path);
  ASSERT_EQ(r.code, 0) << describe(r);
  // The buckets a rank reduced, from the run's own summary line.
  const auto summary = nlohmann::json::parse(r.out.substr(r.out.rfind("{\"event\":\"summary\"")));
  const int buckets_per_rank = summary.at("buckets").get<int>();
  ASSERT_EQ(buckets_per_rank % kSteps, 0) << summary;
  const int per_step = buckets_per_rank / kSteps;
  ASSERT_GE(per_step, 2) << "the config's buckets should be several";

  const auto trace = nlohmann::json::parse(slurp(path));
  // (rank, step, bucket) -> the queue span's end and the hook span's start
  // and end; and the phases' (name, start, end).
  std::map<std::tuple<int, int, int>, double> queue_end, hook_start, hook_end;
  std::map<std::tuple<int, int, int>, std::vector<std::tuple<std::string, double, double>>> phases;
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
    if (e.at("cat") == "ddph.phase") {
      const double ts = e["ts"].get<double>();
      phases[key].emplace_back(e.at("name").get<std::string>(), ts, ts + e["dur"].get<double>());
      continue;
    }
    EXPECT_TRUE(e.at("args").at("ok").get<bool>()) << e;
    if (e.at("name") == "queue") {
      EXPECT_TRUE(queue_end.emplace(key, e["ts"].get<double>() + e["dur"].get<double>()).second)
          << "two queue spans for one bucket: " << e;
    } else {
      EXPECT_EQ(e.at("name"), "quantization/per_channel") << e;
      EXPECT_TRUE(hook_start.emplace(key, e["ts"].get<double>()).second) << e;
      hook_end[key] = e["ts"].get<double>() + e["dur"].get<double>();
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
        // The 8-bit reduce-scatter's phases, nested in the hook span (up to
        // the microsecond doubles' rounding), its encoding before its first
        // collective and its last decoding after its last collective.
        const auto& found = phases[key];
        std::map<std::string, std::pair<double, double>> first_last;  // first start, last end
        for (const auto& [name, ts, end] : found) {
          EXPECT_GE(ts, hook_start[key] - 1e-3) << name << " starts before its hook span";
          EXPECT_LE(end, hook_end[key] + 1e-3) << name << " ends after its hook span";
          EXPECT_LE(ts, end);
          auto it = first_last.emplace(name, std::make_pair(ts, end)).first;
          it->second.first = std::min(it->second.first, ts);
          it->second.second = std::max(it->second.second, end);
        }
        for (const char* name : {"compress", "collective", "decompress"})
          ASSERT_TRUE(first_last.count(name))
              << name << " missing for rank " << rank << " step " << step << " bucket " << b;
        EXPECT_LE(first_last["compress"].first, first_last["collective"].first);
        EXPECT_GE(first_last["decompress"].second, first_last["collective"].second);
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
