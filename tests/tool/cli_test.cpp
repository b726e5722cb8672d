// `ddph train` and `ddph bench` end to end: the built binary as a
// subprocess, real ranks as separate processes, real Gloo on loopback.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/multiprocess.h"
#include "tests/tool/run_ddph.h"

namespace {

using ddph_tool_test::ddph;
using ddph_tool_test::describe;
using ddph_tool_test::json_lines;
using ddph_tool_test::kConfigs;
using ddph_tool_test::kDdph;
using ddph_tool_test::one_json_row;
using ddph_tool_test::Result;
using ddph_tool_test::slurp;

class ToolCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access(kDdph.c_str(), X_OK) != 0) GTEST_SKIP() << kDdph << " is not built";
  }
};

struct LogLine {
  int step;
  double loss, test_acc;
};

std::vector<LogLine> progress(const std::string& out) {
  std::vector<LogLine> lines;
  std::regex re(
      R"(step\s+(\d+)\s+loss\s+([0-9.]+)\s+train-acc\s+[0-9.]+%\s+test-acc\s+([0-9.]+)%)");
  for (std::sregex_iterator it(out.begin(), out.end(), re), end; it != end; ++it)
    lines.push_back({std::stoi((*it)[1]), std::stod((*it)[2]), std::stod((*it)[3])});
  return lines;
}

void expect_learned(const Result& r, int world) {
  ASSERT_EQ(r.code, 0) << describe(r);
  std::vector<LogLine> log = progress(r.out);
  ASSERT_GE(log.size(), 3u) << r.out;
  EXPECT_LT(log.back().loss, 0.6 * log.front().loss) << r.out;
  EXPECT_GT(log.back().test_acc, 75.0) << "chance is 33%\n" << r.out;
  EXPECT_NE(r.out.find("bit-identical on all " + std::to_string(world) + " ranks"),
            std::string::npos)
      << r.out;
}

TEST_F(ToolCli, TrainWithAllreduceLearnsAndRanksAgree) {
  expect_learned(ddph("train --config " + kConfigs + "allreduce.yaml"), 2);
}

TEST_F(ToolCli, TrainOnThreeRanks) {
  expect_learned(ddph("train --config " + kConfigs + "allreduce.yaml --world 3 --steps 600"), 3);
}

TEST_F(ToolCli, TrainWithFp16CompressionLearnsAndRanksAgree) {
  expect_learned(ddph("train --config " + kConfigs + "fp16.yaml --bucket-size 1KiB --steps 600"),
                 2);
}

TEST_F(ToolCli, TrainOneRankPerCommandLikeAMultiMachineJob) {
  std::string dir = ddph_test::make_temp_dir("ddph-cli-store");
  std::string common = " train --config " + kConfigs + "allreduce.yaml --world 2 --steps 50 " +
                       "--rendezvous file://" + dir + " --rank ";
  std::string env = "DDPH_PLUGIN_PATH=" + std::string(DDPH_PLUGIN_DIR) + " ";
  std::string cmd = "sh -c '" + env + kDdph + common + "1 >" + dir + "/r1 2>&1 & p=$!; " + env +
                    kDdph + common + "0 >" + dir + "/r0 2>&1; a=$?; wait $p; b=$?; exit $((a|b))'";
  int status = std::system(cmd.c_str());
  std::string r0 = slurp(dir + "/r0"), r1 = slurp(dir + "/r1");
  std::system(("rm -rf " + dir).c_str());
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << r0 << "\n" << r1;
  EXPECT_NE(r0.find("bit-identical on all 2 ranks"), std::string::npos) << r0;
  EXPECT_EQ(r1.find("step"), std::string::npos) << "only rank 0 reports:\n" << r1;
}

// noop does not average, so ranks training on different shards drift apart:
// the hash check must catch it rather than print a false "bit-identical".
TEST_F(ToolCli, TrainFailsWhenRanksDiverge) {
  Result r = ddph("train --config " + kConfigs + "noop.yaml --steps 20");
  EXPECT_NE(r.code, 0) << describe(r);
  EXPECT_NE(r.out.find("parameters DIFFER"), std::string::npos) << describe(r);
}

// Local SGD's replicas differ between averages by design: the shipped config
// reports their distance and succeeds; averaged at the end they agree.
TEST_F(ToolCli, TrainWithLocalSgdReportsTheDriftAndSucceeds) {
  const std::string train = "train --config " + kConfigs + "local_sgd_averaging.yaml --steps 150";
  Result r = ddph(train);
  EXPECT_EQ(r.code, 0) << describe(r);
  EXPECT_NE(r.out.find("parameters differ across ranks, as the replicas of a "
                       "parameter-averaging hook do between averages"),
            std::string::npos)
      << describe(r);
  Result averaged = ddph(train + " --final-average");
  EXPECT_EQ(averaged.code, 0) << describe(averaged);
  EXPECT_NE(averaged.out.find("bit-identical on all 2 ranks"), std::string::npos)
      << describe(averaged);
}

TEST_F(ToolCli, TrainFailsAndNamesTheRankWhenTheHookIsUnknown) {
  std::string dir = ddph_test::make_temp_dir("ddph-cli-bad");
  std::string bad = dir + "/bad.yaml";
  std::ofstream(bad) << "hook: {family: default, name: no_such_hook}\n";
  Result r = ddph("train --config " + bad + " --steps 5");
  std::system(("rm -rf " + dir).c_str());
  EXPECT_NE(r.code, 0) << describe(r);
  EXPECT_NE(r.err.find("rank 1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no_such_hook"), std::string::npos) << r.err;
}

TEST_F(ToolCli, TrainRejectsBadFlags) {
  EXPECT_NE(ddph("train").code, 0);
  EXPECT_NE(ddph("train --config " + kConfigs + "allreduce.yaml --world 0").code, 0);
  EXPECT_NE(ddph("train --config " + kConfigs + "allreduce.yaml --bogus 1").code, 0);
}

TEST_F(ToolCli, BenchJsonHasEveryKeyAndFp16HalvesTheWire) {
  Result r = ddph("bench --config " + kConfigs + "allreduce.yaml --config " + kConfigs +
                  "fp16.yaml --world 2 --bucket-size 2MiB --iters 5 --warmup 1 --json");
  ASSERT_EQ(r.code, 0) << describe(r);
  auto rows = json_lines(r.out);
  ASSERT_EQ(rows.size(), 2u) << r.out;
  for (auto& row : rows) {
    for (const char* key : {"hook", "world", "bucket_bytes", "median_s",
                            "baseline_allreduce_median_s", "wire_bytes_per_rank"})
      EXPECT_EQ(row.count(key), 1u) << key << " missing in\n" << r.out;
    EXPECT_EQ(row["world"], "2");
    EXPECT_EQ(std::stoll(row["bucket_bytes"]), 2 << 20);
    EXPECT_GT(std::stod(row["median_s"]), 0);
    EXPECT_GT(std::stod(row["baseline_allreduce_median_s"]), 0);
    EXPECT_GT(std::stod(row["wire_bytes_per_rank"]), 0);
  }
  EXPECT_EQ(rows[0]["hook"], "\"default/allreduce\"");
  EXPECT_EQ(rows[1]["hook"], "\"default/fp16_compress\"");
  double ratio =
      std::stod(rows[1]["wire_bytes_per_rank"]) / std::stod(rows[0]["wire_bytes_per_rank"]);
  EXPECT_NEAR(ratio, 0.5, 0.05) << r.out;
  // Any fp32 allreduce of N=2 ranks must send at least half the buffer (a
  // ring sends 2 (N-1)/N of it); far more would mean the count is wrong.
  double fp32_share = std::stod(rows[0]["wire_bytes_per_rank"]) / (2 << 20);
  EXPECT_GE(fp32_share, 0.5) << r.out;
  EXPECT_LE(fp32_share, 3.0) << r.out;
}

// How busy the cores were during the hook and the baseline: shares of the
// whole machine, which the ranks' own copying keeps above zero. (The
// timed windows must span many clock ticks: 16 MiB takes tens of ms.)
TEST_F(ToolCli, BenchSaysHowBusyTheCoresWere) {
  std::string out;
  auto row = one_json_row("bench --config " + kConfigs +
                              "allreduce.yaml --world 2 --bucket-size 16MiB --iters 5 --json",
                          &out);
  ASSERT_FALSE(row.empty());
  for (const char* key : {"cores_busy", "baseline_cores_busy"}) {
    ASSERT_EQ(row.count(key), 1u) << key << " missing in\n" << out;
    EXPECT_GT(std::stod(row[key]), 0) << key << " in\n" << out;
    EXPECT_LE(std::stod(row[key]), 1) << key << " in\n" << out;
  }
}

// --overlap on a plain hook times the reduction against the simulated
// backward, as DDP overlaps them: every variant with a backward lasts at
// least its sleeps, and the row says which work it hides.
TEST_F(ToolCli, BenchOverlapTimesAnyHooksReductionAgainstTheBackward) {
  std::string out;
  auto row = one_json_row("bench --config " + kConfigs +
                              "quantization_rs8.yaml --world 2 --bucket-size 1MiB --overlap 4 "
                              "--backward-ms 20 --iters 3 --warmup 1 --json",
                          &out);
  ASSERT_FALSE(row.empty());
  EXPECT_EQ(row["hidden_work"], "\"reduction\"") << out;
  EXPECT_EQ(row["buckets"], "4");
  EXPECT_EQ(std::stoll(row["bucket_bytes"]), (1 << 20) / 4);
  const double backward = 4 * 0.020;
  EXPECT_GE(std::stod(row["overlap_step_s"]), backward) << out;
  EXPECT_GE(std::stod(row["separate_step_s"]), backward) << out;
  // The reduction alone is part of the separate step (backward, then
  // reduction), which also holds the 80 ms of backward. Not compared with
  // the 80 ms itself: under ThreadSanitizer the four quantized buckets
  // alone took 84 ms on a 2-core machine.
  EXPECT_GT(std::stod(row["reduction_pass_s"]), 0) << out;
  EXPECT_LT(std::stod(row["reduction_pass_s"]), std::stod(row["separate_step_s"])) << out;
  EXPECT_EQ(row.count("optimizer_pass_s"), 0u) << out;
}

// --overlap on hook_then_optimizer times the optimizer against the inner
// hook alone: the row says what the optimizer added to the step, and the
// hidden share is 1 - added / optimizer pass (a pass of debugging/noop
// subtracted), not the share of a step with a second session's pass.
TEST_F(ToolCli, BenchOverlapOfAnOptimizerHookSaysWhatTheOptimizerAdds) {
  std::string out;
  auto row = one_json_row("bench --config " + kConfigs +
                              "hook_then_optimizer_sgd.yaml --world 2 --bucket-size 1MiB "
                              "--overlap 4 --backward-ms 20 --iters 3 --warmup 1 --json",
                          &out);
  ASSERT_FALSE(row.empty());
  EXPECT_EQ(row["hidden_work"], "\"optimizer\"") << out;
  const double backward = 4 * 0.020;
  EXPECT_GE(std::stod(row["overlap_step_s"]), backward) << out;
  EXPECT_GE(std::stod(row["inner_step_s"]), backward) << out;
  const double pass = std::stod(row["optimizer_pass_s"]);
  const double added = std::stod(row["optimizer_added_s"]);
  EXPECT_NEAR(std::stod(row["separate_step_s"]), std::stod(row["inner_step_s"]) + pass, 1e-8)
      << out;
  if (pass > 0) {
    EXPECT_NEAR(std::stod(row["hidden_fraction"]), 1 - added / pass, 1e-4) << out;
  }
}

// PowerSGD on a flat bucket, or before its start_iter, sends every byte:
// the figure is plain allreduce's, and the tool says so before the run
// (the warning comes before the table's header), with what to pass
// instead; the run then shows it right (every byte handed in went out).
// Once it factors matrices, no warning, and it hands collectives less than
// it was given. Before (fca5d5f) the warning came after the run only.
TEST_F(ToolCli, BenchWarnsBeforeTheRunWhenPowerSgdWillCompressNothing) {
  const std::string psgd = "bench --config " + kConfigs + "powersgd.yaml --world 2 ";
  // stderr and stdout into one pipe, in the order they were written.
  Result table = ddph(psgd + "--bucket-size 1MiB --iters 2 --warmup 10 2>&1 | cat");
  const size_t warned = table.out.find(
      "warning: powersgd/powersgd will compress nothing in the timed iterations: the bucket is "
      "one flat gradient");
  std::smatch header_line;
  const bool has_header =
      std::regex_search(table.out, header_line, std::regex("hook +world +bucket +median"));
  ASSERT_TRUE(has_header) << describe(table);
  const size_t header = size_t(header_line.position(0));
  ASSERT_NE(warned, std::string::npos) << describe(table);
  EXPECT_LT(warned, header) << describe(table);
  EXPECT_NE(table.out.find("pass --matrix ROWSxCOLS"), std::string::npos) << describe(table);
  EXPECT_NE(table.out.find("name: batched_powersgd"), std::string::npos) << describe(table);
  EXPECT_EQ(table.out.find("compressed nothing"), std::string::npos)  // said once, before
      << describe(table);

  Result flat = ddph(psgd + "--json --bucket-size 1MiB --iters 2 --warmup 10");
  ASSERT_EQ(flat.code, 0) << describe(flat);
  EXPECT_NE(flat.err.find("powersgd/powersgd will compress nothing"), std::string::npos)
      << describe(flat);
  auto flat_rows = json_lines(flat.out);
  ASSERT_EQ(flat_rows.size(), 1u) << flat.out;
  EXPECT_EQ(flat_rows[0]["hook_bytes_out"], flat_rows[0]["hook_bytes_in"]) << flat.out;

  // start_iter 10 after --warmup 1: every timed step is plain allreduce.
  Result early = ddph(psgd + "--json --bucket-size 1MiB --matrix 256x256 --iters 2 --warmup 1");
  ASSERT_EQ(early.code, 0) << describe(early);
  EXPECT_NE(early.err.find("will compress nothing in the timed iterations: its steps before "
                           "start_iter (10) are plain allreduce, and none of the 2 timed"),
            std::string::npos)
      << describe(early);
  EXPECT_NE(early.err.find("pass --warmup 10"), std::string::npos) << describe(early);
  auto early_rows = json_lines(early.out);
  ASSERT_EQ(early_rows.size(), 1u) << early.out;
  EXPECT_EQ(early_rows[0]["hook_bytes_out"], early_rows[0]["hook_bytes_in"]) << early.out;
  // --warmup 8 --iters 4: steps 8 and 9 plain, 10 and 11 compressed.
  Result part = ddph(psgd + "--json --bucket-size 1MiB --matrix 256x256 --iters 4 --warmup 8");
  ASSERT_EQ(part.code, 0) << describe(part);
  EXPECT_NE(part.err.find("will compress in only some timed iterations"), std::string::npos)
      << describe(part);
  EXPECT_NE(part.err.find("only 2 of the 4 timed iterations"), std::string::npos) << describe(part);

  // The batched hook factors the flat bucket itself: no warning, and it
  // gives collectives less than it was handed.
  Result batched = ddph("bench --config " + kConfigs +
                        "powersgd_batched.yaml --world 2 --json --bucket-size 1MiB --iters 2 "
                        "--warmup 10");
  ASSERT_EQ(batched.code, 0) << describe(batched);
  EXPECT_EQ(batched.err.find("ddph bench: warning"), std::string::npos) << describe(batched);
  auto batched_rows = json_lines(batched.out);
  ASSERT_EQ(batched_rows.size(), 1u) << batched.out;
  EXPECT_LT(std::stoll(batched_rows[0]["hook_bytes_out"]),
            std::stoll(batched_rows[0]["hook_bytes_in"]))
      << batched.out;

  Result factored = ddph(psgd + "--json --bucket-size 1MiB --matrix 256x256 --iters 2 --warmup 10");
  ASSERT_EQ(factored.code, 0) << describe(factored);
  EXPECT_EQ(factored.err.find("ddph bench: warning"), std::string::npos) << describe(factored);
  auto rows = json_lines(factored.out);
  ASSERT_EQ(rows.size(), 1u) << factored.out;
  // 4 matrices of 256 x 256 at rank 2 (PowerSGD's config): P and Q are
  // 2 x 256 x 2 floats each, 8 KiB a step, against 1 MiB handed in.
  EXPECT_EQ(std::stoll(rows[0]["hook_bytes_in"]), 2 * (1 << 20));
  EXPECT_EQ(std::stoll(rows[0]["hook_bytes_out"]), 2 * 4 * (256 * 2 + 256 * 2) * 4);
  // allreduce is not meant to compress: no warning.
  Result plain = ddph("bench --config " + kConfigs +
                      "allreduce.yaml --world 2 --bucket-size 1MiB "
                      "--iters 2 --warmup 0");
  ASSERT_EQ(plain.code, 0) << describe(plain);
  EXPECT_EQ(plain.err.find("warning"), std::string::npos) << describe(plain);
}

TEST_F(ToolCli, BenchOnThreeRanksNamesTheWrapperChain) {
  std::string out;
  auto row = one_json_row("bench --config " + kConfigs +
                              "fp16_wrapper.yaml --world 3 --bucket-size 1MiB --iters 3 --warmup 1 "
                              "--json",
                          &out);
  ASSERT_FALSE(row.empty());
  EXPECT_EQ(row["hook"], "\"default/fp16_wrapper(default/allreduce)\"") << out;
  EXPECT_EQ(row["world"], "3");
  EXPECT_GT(std::stod(row["wire_bytes_per_rank"]), 0);
}

TEST_F(ToolCli, BenchHumanTableNamesEveryConfig) {
  Result r = ddph("bench --config " + kConfigs + "noop.yaml --config " + kConfigs +
                  "bf16.yaml --bucket-size 1MiB --iters 3");
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_NE(r.out.find("debugging/noop"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("default/bf16_compress"), std::string::npos) << r.out;
}

// The rows' names, in order: the first group of `row` on each line.
std::vector<std::string> row_names(const std::string& out, const std::string& row) {
  std::vector<std::string> names;
  const std::regex re(row);
  std::istringstream in(out);
  std::smatch m;
  for (std::string line; std::getline(in, line);)
    if (std::regex_search(line, m, re)) names.push_back(m[1]);
  return names;
}

// Two configs of one hook with different options (8-bit reduce_scatter,
// 8-bit allgather: both quantization/per_channel) are two rows the text
// table tells apart, by the config file's stem; the same file twice, by
// its path and its place. --json keeps hook and config apart. Before
// (fca5d5f) both rows read "quantization/per_channel".
TEST_F(ToolCli, BenchNamesRowsOfOneHookByTheirConfig) {
  const std::string kTableRow = R"(^(\S.*\S) +2 +[0-9.]+ Mi?B )";  // name, world, bucket
  const std::string rs8 = kConfigs + "quantization_rs8.yaml";
  const std::string ag8 = kConfigs + "quantization_per_channel.yaml";
  const std::string fp16 = kConfigs + "fp16.yaml";
  const std::string flags = " --world 2 --bucket-size 256KiB --iters 1 --warmup 0";
  Result r = ddph("bench " + rs8 + " " + ag8 + " " + fp16 + flags);
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_EQ(row_names(r.out, kTableRow),
            (std::vector<std::string>{"quantization/per_channel (quantization_rs8)",
                                      "quantization/per_channel (quantization_per_channel)",
                                      "default/fp16_compress"}))
      << r.out;
  Result twice = ddph("bench " + rs8 + " " + rs8 + flags);
  ASSERT_EQ(twice.code, 0) << describe(twice);
  EXPECT_EQ(row_names(twice.out, kTableRow),
            (std::vector<std::string>{"quantization/per_channel (" + rs8 + ") #1",
                                      "quantization/per_channel (" + rs8 + ") #2"}))
      << twice.out;
  Result overlap = ddph("bench " + rs8 + " " + ag8 + flags + " --overlap 2 --backward-ms 0");
  ASSERT_EQ(overlap.code, 0) << describe(overlap);
  EXPECT_EQ(row_names(overlap.out, "^(\\S.*): world 2, "),
            (std::vector<std::string>{"quantization/per_channel (quantization_rs8)",
                                      "quantization/per_channel (quantization_per_channel)"}))
      << overlap.out;
  Result json = ddph("bench --json " + rs8 + " " + ag8 + flags);
  ASSERT_EQ(json.code, 0) << describe(json);
  auto rows = json_lines(json.out);
  ASSERT_EQ(rows.size(), 2u) << json.out;
  EXPECT_EQ(rows[0]["hook"], "\"quantization/per_channel\"");
  EXPECT_EQ(rows[0]["config"], "\"" + rs8 + "\"");
  EXPECT_EQ(rows[1]["config"], "\"" + ag8 + "\"");
}

// Every size the tool prints is in MiB (2^20 bytes) and says so
// (docs/cli.md, "Units"): bench's bucket, wire and state columns, and
// train's "sent", whose figure is the summary's wire_bytes / 2^20. Before
// (fca5d5f) bench printed "MB" for MiB and train "MB" for 10^6 bytes.
TEST_F(ToolCli, BenchAndTrainPrintEverySizeInMiB) {
  Result bench = ddph("bench --config " + kConfigs +
                      "quantization_rs4_ef.yaml --world 2 --bucket-size 1MiB --iters 1 --warmup 0 "
                      "--machines 2");
  ASSERT_EQ(bench.code, 0) << describe(bench);
  EXPECT_EQ(bench.out.find(" MB"), std::string::npos) << bench.out;
  EXPECT_NE(bench.out.find(" 1.00 MiB "), std::string::npos) << bench.out;  // the bucket
  EXPECT_NE(bench.out.find(" MiB per rank, peak resident memory "), std::string::npos) << bench.out;
  EXPECT_NE(bench.out.find(" MiB between machines per bucket"), std::string::npos) << bench.out;

  const std::string train =
      "train --config " + kConfigs + "allreduce.yaml --steps 20 --log-every 10";
  Result text = ddph(train);
  Result json = ddph(train + " --json");
  ASSERT_EQ(text.code, 0) << describe(text);
  ASSERT_EQ(json.code, 0) << describe(json);
  EXPECT_EQ(text.out.find(" MB"), std::string::npos) << text.out;
  std::smatch wire, sent;
  ASSERT_TRUE(std::regex_search(json.out, wire, std::regex(R"("wire_bytes":([0-9]+),"buckets")")))
      << json.out;
  ASSERT_TRUE(std::regex_search(text.out, sent, std::regex(R"(, ([0-9.]+ MiB) sent per rank)")))
      << text.out;
  char want[64];
  std::snprintf(want, sizeof want, "%.2f MiB", std::stod(wire[1]) / 1048576.0);
  EXPECT_EQ(sent[1].str(), want) << text.out << json.out;
}

// --device cuda keeps the bucket in GPU memory. Without a usable GPU (or in
// a build without CUDA) every rank stops, saying why; with one, the hook's
// row comes out as on the host.
TEST_F(ToolCli, BenchOnTheGpuRunsOrSaysWhyNot) {
  Result r =
      ddph("bench --config " + kConfigs + "fp16.yaml --device cuda --bucket-size 1MiB --iters 2");
  const bool no_gpu =
      r.err.find("--device cuda: no usable CUDA device") != std::string::npos ||
      r.err.find("--device cuda: this build of ddphooks has no CUDA") != std::string::npos;
  if (no_gpu) {
    EXPECT_NE(r.code, 0) << describe(r);
  } else {
    ASSERT_EQ(r.code, 0) << describe(r);
    EXPECT_NE(r.out.find("default/fp16_compress"), std::string::npos) << r.out;
  }
  Result bad = ddph("bench --config " + kConfigs + "fp16.yaml --device tpu");
  EXPECT_EQ(bad.code, 2) << describe(bad);
  EXPECT_NE(bad.err.find("--device: tpu not in {cpu,cuda}"), std::string::npos) << bad.err;
}

TEST_F(ToolCli, BenchFailsWhenAConfigFails) {
  std::string dir = ddph_test::make_temp_dir("ddph-cli-bad");
  std::string bad = dir + "/bad.yaml";
  std::ofstream(bad) << "comm: {backend: gloo, timeout: 10s}\n"
                        "hook: {family: default, name: no_such_hook}\n";
  Result r = ddph("bench --config " + kConfigs + "allreduce.yaml --config " + bad +
                  " --bucket-size 1MiB --iters 2 --json");
  EXPECT_NE(r.code, 0) << describe(r);
  EXPECT_NE(r.err.find("rank"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no_such_hook"), std::string::npos) << r.err;

  Result missing = ddph("bench --config " + dir + "/missing.yaml --iters 1");
  EXPECT_NE(missing.code, 0) << describe(missing);
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
