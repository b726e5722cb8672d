// What the ddph tool says about `hook: {family: auto}` (docs/auto.md), end
// to end on 2 local ranks over Gloo: `ddph train`'s per-step choices (JSON,
// the --metrics CSV, the --trace), `ddph bench`'s and `ddph choose`'s
// answer.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/multiprocess.h"
#include "tests/tool/run_ddph.h"

namespace {

using ddph_tool_test::ddph;
using ddph_tool_test::describe;
using ddph_tool_test::kConfigs;
using ddph_tool_test::kDdph;
using ddph_tool_test::Result;
using ddph_tool_test::slurp;

// The auto hook's default candidates (loader/auto/candidates.cpp) and the
// reasons a timed run gives (no deterministic mode here).
const std::set<std::string> kCandidates = {"allreduce", "fp16", "bf16", "q8", "q4ef", "powersgd4"};
const std::set<std::string> kReasons = {"warmup", "explore", "fastest", "critical"};

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, sep);) out.push_back(item);
  return out;
}

std::vector<nlohmann::json> json_events(const std::string& out) {
  std::vector<nlohmann::json> events;
  for (const std::string& line : split(out, '\n'))
    if (!line.empty()) events.push_back(nlohmann::json::parse(line));
  return events;
}

class ToolAuto : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access(kDdph.c_str(), X_OK) != 0) GTEST_SKIP() << kDdph << " is not built";
    dir_ = ddph_test::make_temp_dir("ddph-auto");
  }
  void TearDown() override {
    if (!dir_.empty()) std::system(("rm -rf " + dir_).c_str());
  }
  std::string write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  // An auto hook that warms up for 2 steps and compares every 2.
  std::string auto_config() {
    return write(
        "auto.yaml",
        "comm: {backend: gloo, timeout: 30s}\n"
        "hook: {family: auto, name: auto, options: {warmup_steps: 2, recheck_steps: 2}}\n");
  }
  std::string dir_;
};

constexpr int kSteps = 20;

TEST_F(ToolAuto, TrainNamesEachBucketsCandidateAndReasonInJsonCsvAndTrace) {
  const std::string csv = dir_ + "/m.csv", trace = dir_ + "/t.json";
  const Result r =
      ddph("train --config " + auto_config() + " --world 2 --steps " + std::to_string(kSteps) +
           " --log-every 1 --json --metrics " + csv + " --trace " + trace);
  ASSERT_EQ(r.code, 0) << describe(r);
  const std::vector<nlohmann::json> events = json_events(r.out);
  ASSERT_FALSE(events.empty());
  const size_t buckets = events.front().at("buckets").get<size_t>();
  ASSERT_GE(buckets, 2u) << events.front();
  // step (1-based) -> its buckets' choices, from the JSON step events.
  std::map<int, std::vector<std::string>> choices;
  for (const auto& e : events) {
    if (e.at("event") != "step") continue;
    const int step = e.at("step").get<int>();
    choices[step] = split(e.at("choices").get<std::string>(), ';');
    ASSERT_EQ(choices[step].size(), buckets) << e;
    for (const std::string& c : choices[step]) {
      const std::vector<std::string> parts = split(c, ':');
      ASSERT_EQ(parts.size(), 2u) << e;
      EXPECT_TRUE(kCandidates.count(parts[0])) << e;
      EXPECT_TRUE(kReasons.count(parts[1])) << e;
      // warmup_steps: 2, on the least compressed candidate.
      if (step <= 2) {
        EXPECT_EQ(c, "allreduce:warmup") << e;
      }
    }
  }
  ASSERT_EQ(choices.size(), size_t(kSteps));
  std::set<std::string> tried;
  for (const auto& [step, list] : choices)
    for (const std::string& c : list) tried.insert(split(c, ':')[0]);
  EXPECT_GE(tried.size(), 2u) << "20 steps past a 2-step warm-up explore\n" << r.out;

  // The CSV's choices column: the same per step, after the hook column.
  const std::vector<std::string> rows = split(slurp(csv), '\n');
  ASSERT_EQ(rows.size(), size_t(kSteps) + 1);
  EXPECT_EQ(rows[0].substr(rows[0].rfind(",hook,")), ",hook,choices");
  for (size_t i = 1; i < rows.size(); ++i) {
    const std::vector<std::string> cells = split(rows[i], ',');
    const int step = std::stoi(cells.front());
    std::string joined;
    for (const std::string& c : choices[step]) joined += (joined.empty() ? "" : ";") + c;
    EXPECT_EQ(cells.back(), joined) << rows[i];
  }

  // The trace: each hook span named after the candidate that ran it, the
  // same as the step's choices (rank 0 logs them; both ranks agree).
  const auto t = nlohmann::json::parse(slurp(trace));
  int spans = 0;
  for (const auto& e : t.at("traceEvents")) {
    if (e.at("ph") != "X" || e.at("cat") != "ddph" || e.at("name") == "queue") continue;
    const int step = e.at("args").at("step").get<int>() + 1;
    const size_t bucket = e.at("args").at("bucket").get<size_t>();
    ASSERT_LT(bucket, choices[step].size()) << e;
    EXPECT_EQ(e.at("name").get<std::string>() + ":" + e.at("args").at("reason").get<std::string>(),
              choices[step][bucket])
        << e;
    EXPECT_EQ(e.at("args").at("candidate"), e.at("name")) << e;
    ++spans;
  }
  EXPECT_EQ(spans, int(2 * kSteps * buckets));
}

TEST_F(ToolAuto, TrainWithAFixedHookLeavesTheChoicesEmpty) {
  const std::string csv = dir_ + "/m.csv";
  const Result r = ddph("train --config " + kConfigs + "allreduce.yaml --world 2 --steps 3 " +
                        "--log-every 1 --json --metrics " + csv);
  ASSERT_EQ(r.code, 0) << describe(r);
  int steps = 0;
  for (const auto& e : json_events(r.out))
    if (e.at("event") == "step") {
      EXPECT_EQ(e.at("choices"), "") << e;
      ++steps;
    }
  EXPECT_EQ(steps, 3);
  for (const std::string& row : split(slurp(csv), '\n')) {
    if (row.rfind("step,", 0) != 0) {
      EXPECT_EQ(row.back(), ',') << row;  // choices empty
    }
  }
}

}  // namespace
