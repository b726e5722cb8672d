// What the ddph tool says about `hook: {family: auto}` (docs/auto.md), end
// to end on 2 local ranks over Gloo: `ddph train`'s per-step choices (JSON,
// the --metrics CSV, the --trace), `ddph bench`'s and `ddph choose`'s
// answer.
#include <gtest/gtest.h>
#include <sys/stat.h>
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
#include "tool/choose/answer.h"
#include "tool/ranks/auto_choices.h"

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

TEST_F(ToolAuto, BenchSaysWhichCandidatesRanTheTimedIterations) {
  // Past the warm-up (2 steps) the chooser explores: every timed iteration
  // is one of the candidates, counted once.
  const Result r = ddph("bench --json --bucket-size 256KiB --warmup 2 --iters 8 " + auto_config());
  ASSERT_EQ(r.code, 0) << describe(r);
  const std::vector<nlohmann::json> rows = json_events(r.out);
  ASSERT_EQ(rows.size(), 1u) << r.out;
  int iterations = 0;
  for (const auto& c : rows[0].at("choices")) {
    const std::vector<std::string> parts = split(c.at("choice").get<std::string>(), ':');
    ASSERT_EQ(parts.size(), 2u) << c;
    EXPECT_TRUE(kCandidates.count(parts[0])) << c;
    EXPECT_NE(parts[1], "warmup") << "the 2 untimed iterations are the warm-up: " << c;
    iterations += c.at("iterations").get<int>();
  }
  EXPECT_EQ(iterations, 8) << rows[0];

  // A warm-up longer than the run: every timed iteration is allreduce's,
  // and the text row says so.
  const std::string long_warmup =
      write("warm.yaml",
            "comm: {backend: gloo, timeout: 30s}\n"
            "hook: {family: auto, name: auto, options: {warmup_steps: 100}}\n");
  const Result text = ddph("bench --bucket-size 256KiB --warmup 1 --iters 4 " + long_warmup);
  ASSERT_EQ(text.code, 0) << describe(text);
  EXPECT_NE(text.out.find("auto chose allreduce:warmup x4 (of 4 timed iterations)"),
            std::string::npos)
      << text.out;

  // A fixed hook chose nothing.
  const Result fixed =
      ddph("bench --json --bucket-size 256KiB --iters 2 " + kConfigs + "fp16.yaml");
  ASSERT_EQ(fixed.code, 0) << describe(fixed);
  EXPECT_EQ(json_events(fixed.out).at(0).at("choices"), nlohmann::json::array()) << fixed.out;
}

// The hook line of a job file `ddph choose` printed: "family/name".
std::string hook_of(const std::string& yaml) {
  const size_t at = yaml.find("\nhook: {family: ");
  if (at == std::string::npos) return "";
  const size_t family = at + std::string("\nhook: {family: ").size();
  const size_t comma = yaml.find(", name: ", family);
  const size_t end = yaml.find_first_of(",}", comma + 8);
  return yaml.substr(family, comma - family) + "/" + yaml.substr(comma + 8, end - comma - 8);
}

TEST_F(ToolAuto, ChoosePrintsAJobFileThatValidatesAndRunsOneOfTheCandidates) {
  const Result r = ddph("choose --world 2 --bucket-size 256KiB --candidates allreduce,fp16");
  ASSERT_EQ(r.code, 0) << describe(r);
  const std::string hook = hook_of(r.out);
  EXPECT_TRUE(hook == "default/allreduce" || hook == "default/fp16_compress") << r.out;
  // A comment giving both candidates' times for the size, and its choice.
  EXPECT_NE(r.out.find("# 256KiB: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" allreduce "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" fp16 "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("rules:"), std::string::npos) << "one size, no rules\n" << r.out;
  const std::string job = write("chosen.yaml", r.out);
  const Result v = ddph("validate " + job);
  EXPECT_EQ(v.code, 0) << r.out << describe(v);
}

TEST_F(ToolAuto, ChooseJsonNamesTheChoiceAndTheTimesOfEverySize) {
  const Result r =
      ddph("choose --json --bucket-size 64KiB,1MiB --candidates allreduce,bf16,q8 --steps 400");
  ASSERT_EQ(r.code, 0) << describe(r);
  const std::vector<nlohmann::json> lines = json_events(r.out);
  ASSERT_EQ(lines.size(), 1u) << r.out;
  const nlohmann::json& j = lines[0];
  EXPECT_TRUE(j.at("settled").get<bool>()) << j;
  EXPECT_EQ(j.at("world"), 2) << j;
  const std::map<std::string, std::string> hooks = {{"allreduce", "default/allreduce"},
                                                    {"bf16", "default/bf16_compress"},
                                                    {"q8", "quantization/per_channel"}};
  ASSERT_EQ(j.at("buckets").size(), 2u) << j;
  EXPECT_EQ(j["buckets"][0].at("bucket_bytes"), 65536) << j;
  EXPECT_EQ(j["buckets"][1].at("bucket_bytes"), 1048576) << j;
  for (const auto& b : j["buckets"]) {
    const std::string chosen = b.at("candidate").get<std::string>();
    ASSERT_TRUE(hooks.count(chosen)) << j;
    EXPECT_EQ(b.at("reason"), "fastest") << j;
    ASSERT_TRUE(b.at("seconds").at(chosen).is_number()) << "the choice was timed: " << j;
  }
  // The largest size's choice is the hook; the smaller one a rule where it differs.
  const auto& big = j["buckets"][1];
  const nlohmann::json& h = j.at("hook");
  EXPECT_EQ(h.at("family").get<std::string>() + "/" + h.at("name").get<std::string>(),
            hooks.at(big.at("candidate").get<std::string>()))
      << j;
  const bool differ = j["buckets"][0].at("candidate") != big.at("candidate");
  ASSERT_EQ(j.at("rules").size(), differ ? 1u : 0u) << j;
  if (differ) {
    EXPECT_EQ(j["rules"][0].at("max_bytes"), 65536) << j;
  }
}

// answer.h alone, on a result it is given: sizes that choose differently
// print rules by size, smallest first (the loader takes the first match),
// and a job file that `ddph validate` accepts.
TEST_F(ToolAuto, ChooseAnswerPrintsRulesWhereSizesChooseDifferently) {
  const std::string auto_job =
      write("candidates.yaml",
            "hook: {family: auto, name: auto, options: {candidates: \"allreduce,q4ef,fp16\"}}\n");
  const auto specs = ddph::tool::auto_candidates(auto_job);
  ASSERT_EQ(specs.size(), 3u);
  ddph::tool::ChooseOptions o;
  ddph::tool::ChooseResult r;
  r.steps = 30;
  r.settled = true;
  // 4KiB and 64KiB: allreduce; 1MiB: fp16; 25MiB: q4ef.
  const std::vector<std::pair<int64_t, int>> sizes = {
      {4096, 0}, {65536, 0}, {1 << 20, 2}, {25 << 20, 1}};
  for (const auto& [bytes, candidate] : sizes)
    r.sizes.push_back({bytes, candidate, DDPH_CHOICE_FASTEST, {0.003, 0.002, 0.001}});
  const std::string yaml = ddph::tool::choice_yaml(o, specs, r);
  EXPECT_EQ(hook_of(yaml), "quantization/per_channel") << yaml;
  EXPECT_NE(yaml.find("bits: 4"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("error_feedback: true"), std::string::npos) << yaml;
  const std::string rules =
      "rules:\n"
      "  - when: {max_bytes: 65536}\n"
      "    hook: {family: default, name: allreduce}\n"
      "  - when: {max_bytes: 1048576}\n"
      "    hook: {family: default, name: fp16_compress}\n";
  EXPECT_NE(yaml.find(rules), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("# 25MiB: q4ef (fastest); allreduce 3.000 ms, q4ef 2.000 ms, fp16 1.000 ms"),
            std::string::npos)
      << yaml;
  const Result v = ddph("validate " + write("rules.yaml", yaml));
  EXPECT_EQ(v.code, 0) << yaml << describe(v);
}

TEST_F(ToolAuto, ChooseRunsOneRankPerCommandLikeAMultiMachineJob) {
  // Two commands meeting at a store, as two machines would: both measure,
  // rank 0 alone prints the answer, and it names the network it measured.
  const std::string common =
      " choose --world 2 --bucket-size 256KiB --candidates allreduce,fp16 "
      "--rendezvous file://" +
      dir_ + "/store --rank ";
  // Made here, as a cluster's shared store is before its ranks start.
  ASSERT_EQ(mkdir((dir_ + "/store").c_str(), 0700), 0);
  const std::string env = "DDPH_PLUGIN_PATH=" + std::string(DDPH_PLUGIN_DIR) + " ";
  const std::string cmd = "sh -c '" + env + kDdph + common + "1 >" + dir_ + "/r1 2>" + dir_ +
                          "/e1 & p=$!; " + env + kDdph + common + "0 >" + dir_ + "/r0 2>" + dir_ +
                          "/e0; a=$?; wait $p; b=$?; exit $((a|b))'";
  const int status = std::system(cmd.c_str());
  const std::string r0 = slurp(dir_ + "/r0"), r1 = slurp(dir_ + "/r1");
  const std::string errors = slurp(dir_ + "/e0") + slurp(dir_ + "/e1");
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << r0 << r1 << errors;
  const std::string hook = hook_of(r0);
  EXPECT_TRUE(hook == "default/allreduce" || hook == "default/fp16_compress") << r0;
  EXPECT_NE(r0.find("# ddph choose: 2 ranks, link the network between the ranks"),
            std::string::npos)
      << r0;
  EXPECT_EQ(r1, "") << "only rank 0 prints";
  const Result v = ddph("validate " + write("chosen.yaml", r0));
  EXPECT_EQ(v.code, 0) << r0 << describe(v);
}

TEST_F(ToolAuto, ChooseRefusesBadFlagsByName) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"--bucket-size 1MiB,1MiB", "--bucket-size 1MiB is given twice"},
      {"--bucket-size 2B", "--bucket-size must be at least 4B"},
      {"--candidates allreduce,nope", "--candidates allreduce,nope: "},
      {"--candidates allreduce,,fp16", "an empty candidate"},
      {"--bucket-size 1MiB --matrix 1024x1024", "--matrix 1024x1024 is more than the smallest"},
      {"--link 1zbit", "--link"},
      {"--no-such-flag", "--no-such-flag"},
      {"--rank 0", "--rank needs --rendezvous URL"},
      {"--rank 2 --rendezvous file:///tmp/x", "--rank 2 is not below --world 2"},
      {"--rendezvous file:///tmp/x", "--rendezvous goes with --rank"},
      {"--rank 1 --rendezvous file:///tmp/x --link 1gbit", "does not combine with --rank"},
      {"--rank -1 --rendezvous file:///tmp/x", "--rank"},
  };
  for (const auto& [flags, message] : bad) {
    const Result r = ddph("choose " + flags);
    EXPECT_EQ(r.code, 2) << flags << "\n" << describe(r);
    EXPECT_NE(r.err.find(message), std::string::npos) << flags << "\n" << describe(r);
    EXPECT_EQ(r.out, "") << flags;
  }
}

}  // namespace
