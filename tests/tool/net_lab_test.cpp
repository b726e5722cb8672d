// The network lab of `ddph lab` and `ddph bench --link`
// (tool/lab/net_lab.h): its flag, and, where the kernel lets this process
// make namespaces, the calibration issue 22 asks for: on a 1 Gbit/s link a
// raw TCP stream reaches 0.9-1.0 Gbit/s, and Gloo's raw fp32 allreduce of
// 25 MB at world 2 takes between 1x and 1.15x its wire bound.
#include "tool/lab/net_lab.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/tool/run_ddph.h"

namespace {

using ddph::tool::LinkSpec;
using ddph::tool::parse_link;
using ddph_tool_test::ddph;
using ddph_tool_test::describe;
using ddph_tool_test::json_lines;
using ddph_tool_test::kConfigs;
using ddph_tool_test::Result;

TEST(LinkFlag, ReadsRateAndLatencyInTcsUnits) {
  LinkSpec l = parse_link("1gbit");
  EXPECT_EQ(l.rate_bits_per_s, 1e9);
  EXPECT_EQ(l.latency_s, 0);
  l = parse_link("10Gbit,50us");
  EXPECT_EQ(l.rate_bits_per_s, 1e10);
  EXPECT_DOUBLE_EQ(l.latency_s, 50e-6);
  EXPECT_EQ(l.text, "10Gbit,50us");
  l = parse_link("2.5mbit,1ms");
  EXPECT_EQ(l.rate_bits_per_s, 2.5e6);
  EXPECT_DOUBLE_EQ(l.latency_s, 1e-3);
  // 25 MiB at 1 Gbit/s.
  EXPECT_DOUBLE_EQ(ddph::tool::wire_seconds(parse_link("1gbit"), 26214400), 0.2097152);
}

TEST(LinkFlag, RejectsWhatTcWouldMisread) {
  for (const char* bad : {"", "1", "1gb", "1gbps", "gbit", "-1gbit", "0gbit", "1kbit", "1tbit",
                          "1gbit,", "1gbit,50", "1gbit,-1ms", "1gbit,1h", "nangbit"}) {
    try {
      parse_link(bad);
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("--link '" + std::string(bad) + "'"), std::string::npos)
          << e.what();
    }
  }
}

// A schedule of rates for `ddph lab` (issue 42: a link that slows down and
// recovers): the first rate from 0s, each later one from its time.
TEST(LinkSchedule, ReadsEachRateAndItsTimeInTcsUnits) {
  LinkSpec l = parse_link("10gbit@0s,100mbit@20s,1gbit@40s", true);
  EXPECT_EQ(l.rate_bits_per_s, 1e10);
  EXPECT_EQ(l.latency_s, 0);
  ASSERT_EQ(l.changes.size(), 2u);
  EXPECT_EQ(l.changes[0].at_s, 20);
  EXPECT_EQ(l.changes[0].rate_bits_per_s, 1e8);
  EXPECT_EQ(l.changes[1].at_s, 40);
  EXPECT_EQ(l.changes[1].rate_bits_per_s, 1e9);
  EXPECT_EQ(l.text, "10gbit@0s,100mbit@20s,1gbit@40s");
  // Every unit, the bounds of each, and a latency last.
  l = parse_link("400Gbit@0ms,2.5mbit@250ms,40Mbit@1500000us,8kbit@1e6s,2ms", true);
  EXPECT_EQ(l.rate_bits_per_s, 4e11);
  EXPECT_DOUBLE_EQ(l.latency_s, 2e-3);
  ASSERT_EQ(l.changes.size(), 3u);
  EXPECT_DOUBLE_EQ(l.changes[0].at_s, 0.25);
  EXPECT_EQ(l.changes[0].rate_bits_per_s, 2.5e6);
  EXPECT_DOUBLE_EQ(l.changes[1].at_s, 1.5);
  EXPECT_EQ(l.changes[1].rate_bits_per_s, 4e7);
  EXPECT_EQ(l.changes[2].at_s, 1e6);
  EXPECT_EQ(l.changes[2].rate_bits_per_s, 8e3);
  // One piece at 0s is a fixed rate; 64 rates are the most.
  l = parse_link("1gbit@0s", true);
  EXPECT_EQ(l.rate_bits_per_s, 1e9);
  EXPECT_TRUE(l.changes.empty());
  std::string most = "1gbit@0s";
  for (int i = 1; i < 64; ++i) most += ",1gbit@" + std::to_string(i) + "s";
  EXPECT_EQ(parse_link(most, true).changes.size(), 63u);
  // The same text without @ is the fixed link it always was.
  l = parse_link("10gbit,50us", true);
  EXPECT_EQ(l.rate_bits_per_s, 1e10);
  EXPECT_DOUBLE_EQ(l.latency_s, 50e-6);
  EXPECT_TRUE(l.changes.empty());
  // A change is printed in tc's units, the largest that holds one.
  EXPECT_EQ(ddph::tool::format_rate(4e7), "40mbit");
  EXPECT_EQ(ddph::tool::format_rate(1.5e9), "1.5gbit");
  EXPECT_EQ(ddph::tool::format_rate(8e3), "8kbit");
  EXPECT_EQ(ddph::tool::format_rate(2.5e6), "2.5mbit");
  EXPECT_EQ(ddph::tool::format_rate(4e11), "400gbit");
}

TEST(LinkSchedule, RefusesEachBadPieceByNumber) {
  const std::string rate =
      "the rate before @ is a number with kbit, mbit or gbit, from 8kbit to "
      "400gbit";
  const std::string time =
      "the time after @ is a number with us, ms or s, from 0s to 1e6s (e.g. 20s)";
  const std::string no_time =
      "no @TIME (every rate of a schedule says when it starts, e.g. 100mbit@20s; a latency "
      "comes last)";
  const std::string order = "'s time (times increase)";
  std::string many = "1gbit@0s";
  for (int i = 1; i < 65; ++i) many += ",1gbit@" + std::to_string(i) + "s";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"1gbit@0s,,2gbit@1s", "piece 2 is empty"},
      {"1gbit@0s,2gbit@1s,", "piece 3 is empty"},
      {",1gbit@0s", "piece 1 is empty"},
      {"@0s,1gbit@1s", "piece 1 '@0s': " + rate},
      {"1gbit@0s,2gbps@1s", "piece 2 '2gbps@1s': " + rate},
      {"1gbit@0s,2@1s", "piece 2 '2@1s': " + rate},
      {"1gbit@0s,0mbit@1s", "piece 2 '0mbit@1s': " + rate},
      {"1gbit@0s,-1mbit@1s", "piece 2 '-1mbit@1s': " + rate},
      {"1gbit@0s,nanmbit@1s", "piece 2 'nanmbit@1s': " + rate},
      {"1gbit@0s,1kbit@1s", "piece 2 '1kbit@1s': " + rate},
      {"1gbit@0s,1tbit@1s", "piece 2 '1tbit@1s': " + rate},
      {"1gbit@0s,2gbit@1", "piece 2 '2gbit@1': " + time},
      {"1gbit@0s,2gbit@", "piece 2 '2gbit@': " + time},
      {"1gbit@0s,2gbit@1h", "piece 2 '2gbit@1h': " + time},
      {"1gbit@0s,2gbit@-1s", "piece 2 '2gbit@-1s': " + time},
      {"1gbit@-0s,2gbit@1s", "piece 1 '1gbit@-0s': " + time},
      {"1gbit@0s,2gbit@nans", "piece 2 '2gbit@nans': " + time},
      {"1gbit@0s,2gbit@infs", "piece 2 '2gbit@infs': " + time},
      {"1gbit@0s,2gbit@1.1e6s", "piece 2 '2gbit@1.1e6s': " + time},
      {"1gbit@0s,2gbit@1s@2s", "piece 2 '2gbit@1s@2s': " + time},
      {"1gbit@1s,2gbit@2s", "piece 1 '1gbit@1s': the first rate starts at 0s (e.g. 10gbit@0s)"},
      {"1gbit@0s,2gbit@0s", "piece 2 '2gbit@0s': not after piece 1" + order},
      {"1gbit@0s,2gbit@2s,3gbit@2000ms", "piece 3 '3gbit@2000ms': not after piece 2" + order},
      {"1gbit@0s,2gbit@2s,3gbit@1s", "piece 3 '3gbit@1s': not after piece 2" + order},
      {"1gbit,2gbit@1s", "piece 1 '1gbit': " + no_time},
      {"1gbit@0s,2gbit", "piece 2 '2gbit': " + no_time},
      {"1gbit@0s,50us,2gbit@1s", "piece 2 '50us': " + no_time},
      {"1gbit@0s,2gbit@1s,50",
       "piece 3 '50': neither RATE@TIME nor a latency (a number with us, "
       "ms or s, at most 10s)"},
      {"1gbit@0s,2gbit@1s,11s",
       "piece 3 '11s': neither RATE@TIME nor a latency (a number with "
       "us, ms or s, at most 10s)"},
      {many, "65 rates; a schedule has at most 64"},
  };
  for (const auto& c : cases) {
    try {
      parse_link(c.first, true);
      ADD_FAILURE() << "'" << c.first << "' was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()), "--link '" + c.first + "': " + c.second);
    }
  }
  // bench and train keep one rate: a schedule is refused there by name.
  try {
    parse_link("1gbit@0s,2gbit@1s");
    ADD_FAILURE() << "a schedule was accepted without `schedule`";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()),
              "--link '1gbit@0s,2gbit@1s': a schedule of rates (RATE@TIME) is for ddph lab; this "
              "command takes one RATE[,LATENCY]");
  }
}

TEST(LabCli, BadFlagsFailBeforeAnyNamespaceIsMade) {
  Result r = ddph("lab --link 1gbt -- true");
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("--link '1gbt'"), std::string::npos) << describe(r);
  r = ddph("lab --link 1gbit");
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("no command after --"), std::string::npos) << describe(r);
  r = ddph("lab --link 1gbit --world 255 -- true");
  EXPECT_EQ(r.code, 2) << describe(r);
  r = ddph("bench --link 10 --config " + kConfigs + "allreduce.yaml");
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("--link '10'"), std::string::npos) << describe(r);
  // A bad schedule: code 2, not the lab's 3, and nothing run.
  r = ddph("lab --link 1gbit@0s,2gbit@0s -- true");
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_EQ(r.err,
            "ddph lab: --link '1gbit@0s,2gbit@0s': piece 2 '2gbit@0s': not after piece 1's time "
            "(times increase)\n")
      << describe(r);
  EXPECT_EQ(r.out, "") << describe(r);
  r = ddph("bench --link 1gbit@0s,2gbit@1s --config " + kConfigs + "allreduce.yaml");
  EXPECT_EQ(r.code, 2) << describe(r);
  EXPECT_NE(r.err.find("a schedule of rates (RATE@TIME) is for ddph lab"), std::string::npos)
      << describe(r);
}

// The lab needs namespaces and iproute2; where this kernel or user lacks
// them every test below skips with ddph's one-line reason.
class Lab : public ::testing::Test {
 protected:
  void SetUp() override {
    const Result probe = ddph("lab --link 1gbit -- true");
    if (probe.code == 3) GTEST_SKIP() << probe.err.substr(0, probe.err.find('\n'));
    ASSERT_EQ(probe.code, 0) << describe(probe);
  }
};

TEST_F(Lab, ARawTcpStreamReachesTheLinkRateFromTheSendersOwnAddress) {
  const Result r = ddph("lab --link 1gbit --port 29611 -- python3 " + std::string(DDPH_SOURCE_DIR) +
                        "/tests/tool/lab_tcp_stream.py");
  ASSERT_EQ(r.code, 0) << describe(r);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex("from (\\S+): ([0-9.]+) Gbit/s")))
      << describe(r);
  EXPECT_EQ(m[1].str(), "127.0.0.2");  // rank 1 sends from its own address
  const double gbit = std::stod(m[2].str());
  // Well below the rate only when the shaping is wrong (a unit off reads 0.1
  // or 0.001); a loaded 2-core machine reaches 0.85-0.95 of it.
  EXPECT_GE(gbit, 0.5) << describe(r);
  EXPECT_LE(gbit, 1.0) << describe(r);  // above it, the link is not shaped
}

TEST_F(Lab, GloosRawAllreduceOf25MbTakesAtMost115xItsWireBound) {
  const Result r = ddph(
      "bench --link 1gbit --world 2 --bucket-size 25MiB --iters 5 --warmup 1 "
      "--json --config " +
      kConfigs + "allreduce.yaml");
  ASSERT_EQ(r.code, 0) << describe(r);
  auto rows = json_lines(r.out);
  ASSERT_EQ(rows.size(), 1u) << describe(r);
  const double median = std::stod(rows[0]["baseline_allreduce_median_s"]);
  const double bound = std::stod(rows[0]["baseline_wire_bound_s"]);
  // A ring at world 2 sends the whole 25 MiB once.
  EXPECT_NEAR(bound, 0.2097152, 0.01) << describe(r);
  EXPECT_GE(median / bound, 1.0) << describe(r);  // below it, the link is not shaped
  EXPECT_LE(median / bound, 1.15) << describe(r);
  EXPECT_EQ(rows[0]["link"], "\"1gbit\"") << describe(r);
}

// A host without PyTorch meets its peers as torchrun's ranks do: the lab
// sets MASTER_ADDR and MASTER_PORT, and env:// makes rank 0 serve the
// rendezvous there (no shared directory, no Redis). Each rank checks its
// mean against NumPy's and says ok.
TEST_F(Lab, NumpyRanksMeetOverEnvAtTheAddressTheLabSets) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitized libddph.so cannot load into Debian's Python without its "
                  "runtime preloaded; python.tcp_rendezvous runs env:// under ASan's Python pass";
#endif
  const Result r = ddph(
      "lab --link 1gbit --world 2 --port 29612 -- env DDPH_LIBRARY=" + std::string(DDPH_LIB_DIR) +
      "/libddph.so /usr/bin/python3 " + std::string(DDPH_SOURCE_DIR) +
      "/examples/python/numpy_allreduce.py --rendezvous env:// --job lab-env");
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_NE(r.out.find("rank 0: ok (1000 elements averaged over 2 ranks"), std::string::npos)
      << describe(r);
  EXPECT_NE(r.out.find("rank 1: ok (1000 elements averaged over 2 ranks"), std::string::npos)
      << describe(r);
}

TEST_F(Lab, ALatencyIsAddedOrRefusedInOneLine) {
  const Result r = ddph("lab --link 1gbit,2ms -- true");
  if (r.code == 0) return;  // this kernel has netem
  EXPECT_EQ(r.code, 3) << describe(r);
  EXPECT_NE(r.err.find("a latency needs the netem qdisc"), std::string::npos) << describe(r);
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "more than one line: " << r.err;
}

TEST_F(Lab, ARankThatFailsIsReportedAndTheOthersStillEnd) {
  const Result r = ddph("lab --link 100mbit --world 3 -- sh -c 'exit $RANK'");
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_NE(r.err.find("rank 1 exited with code 1"), std::string::npos) << describe(r);
  EXPECT_NE(r.err.find("rank 2 exited with code 2"), std::string::npos) << describe(r);
  EXPECT_EQ(r.err.find("rank 0"), std::string::npos) << describe(r);
}

// Once the ranks end, the lab says what each did, one line per rank, on
// stdout: its exit, its wall time, and the bytes its card sent. Rank 1
// sends exactly 4 MiB of payload to rank 0, which then waits 1 s: rank 1's
// card carries the payload and its headers (TCP/IP/Ethernet, under 10% at
// 1500-byte frames), rank 0's only acknowledgements; no rank's wall time
// exceeds the whole command's, measured here. Before, a successful lab
// printed nothing.
TEST_F(Lab, EachRankIsSummedUpInOneLineWithItsExitTimeAndBytesSent) {
  const int64_t payload = 4 << 20;
  const auto t0 = std::chrono::steady_clock::now();
  const Result r =
      ddph("lab --link 100mbit --port 29613 -- python3 " + std::string(DDPH_SOURCE_DIR) +
           "/tests/tool/lab_send_bytes.py " + std::to_string(payload) + " 1");
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_NE(r.out.find("received " + std::to_string(payload) + " bytes"), std::string::npos)
      << describe(r);
  const std::regex line(
      R"(ddph lab: rank (\d+): exit 0, ([0-9.]+) s, sent ([0-9.]+) MiB on its 100mbit link\n)");
  std::vector<double> seconds, mib;
  for (std::sregex_iterator it(r.out.begin(), r.out.end(), line), end; it != end; ++it) {
    EXPECT_EQ(std::stoi((*it)[1]), int(seconds.size())) << describe(r);
    seconds.push_back(std::stod((*it)[2]));
    mib.push_back(std::stod((*it)[3]));
  }
  ASSERT_EQ(seconds.size(), 2u) << describe(r);
  const double sent1 = mib[1] * 1048576.0;
  EXPECT_GE(sent1, payload - 0.005 * 1048576) << describe(r);  // printed to 0.01 MiB
  EXPECT_LE(sent1, payload * 1.1) << describe(r);
  EXPECT_LT(mib[0] * 1048576.0, payload / 10.0) << describe(r);
  EXPECT_GE(seconds[0], 1.0) << describe(r);
  EXPECT_GE(seconds[0], seconds[1] + 0.5) << describe(r);  // rank 0 waited 1 s after rank 1
  for (double s : seconds) EXPECT_LE(s, elapsed) << describe(r);
  // --json carries the same per rank; nothing else is on stdout but the
  // command's own lines.
  const Result j =
      ddph("lab --json --link 100mbit --port 29613 -- python3 " + std::string(DDPH_SOURCE_DIR) +
           "/tests/tool/lab_send_bytes.py " + std::to_string(payload) + " 0");
  ASSERT_EQ(j.code, 0) << describe(j);
  EXPECT_EQ(j.out.find("ddph lab: rank"), std::string::npos) << describe(j);
  EXPECT_NE(j.out.find("\"seconds\":"), std::string::npos) << describe(j);
  const std::regex bytes1(R"(\{"rank":1,[^}]*"bytes_sent":([0-9]+)\})");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(j.out, m, bytes1)) << describe(j);
  EXPECT_GE(std::stoll(m[1]), payload) << describe(j);
  EXPECT_LE(std::stoll(m[1]), payload * 1.1) << describe(j);
}

// A link that slows down (issue 42): rank 1 streams to rank 0 for 5.5 s on
// 400mbit@0s,40mbit@4s, and rank 0 measures what it received up to 3.9 s
// (from its first byte: a loaded machine may start the ranks a second or
// more late) and from 4.5 to 5.5 s, on the lab's clock
// (DDPH_LAB_START_MONOTONIC), clear of the change and of the queue it
// leaves. The second window is several times slower than the first (10x by
// the rates; 10.1x measured), each within its link's rate; the lab printed
// the change when it made it, not before 4 s. Before, `--link
// 400mbit@0s,...` was refused.
TEST_F(Lab, AScheduledRateChangeSlowsTheStreamByTheRatesRatio) {
  const Result r =
      ddph("lab --link 400mbit@0s,40mbit@4s --port 29614 -- python3 " +
           std::string(DDPH_SOURCE_DIR) + "/tests/tool/lab_link_phases.py 5.5 0-3.9 4.5-5.5");
  ASSERT_EQ(r.code, 0) << describe(r);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex("window 0-3.9 s: ([0-9.]+) Mbit/s")))
      << describe(r);
  const double fast = std::stod(m[1]);
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex("window 4.5-5.5 s: ([0-9.]+) Mbit/s")))
      << describe(r);
  const double slow = std::stod(m[1]);
  EXPECT_GE(fast / slow, 4.0) << describe(r);
  EXPECT_LE(fast, 400 * 1.05) << describe(r);  // above it, the link is not shaped
  EXPECT_LE(slow, 40 * 1.1) << describe(r);    // above it, the change did not take
  EXPECT_GE(slow, 40 * 0.5) << describe(r);    // below it, the rate is not 40mbit
  ASSERT_TRUE(std::regex_search(
      r.out, m, std::regex(R"(ddph lab: at ([0-9.]+) s, every rank's link is now 40mbit\n)")))
      << describe(r);
  EXPECT_GE(std::stod(m[1]), 4.0) << describe(r);
  EXPECT_LT(r.out.find(m[0]), r.out.find("ddph lab: rank 0:")) << describe(r);
  EXPECT_NE(r.out.find("ddph lab: rank 1: exit 0, "), std::string::npos) << describe(r);
  EXPECT_EQ(r.err, "") << describe(r);
}

// Ranks that end before a change is due end the lab then: the change at
// 0.3 s is made (under --json its line goes to stderr and the object lists
// it), the one at 600 s is not, and the lab ends in far less than 600 s.
TEST_F(Lab, AChangeNotYetDueWhenTheRanksEndIsNotMade) {
  const auto t0 = std::chrono::steady_clock::now();
  const Result r = ddph("lab --json --link 100mbit@0s,50mbit@0.3s,1gbit@600s -- sleep 2");
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(r.code, 0) << describe(r);
  EXPECT_LT(elapsed, 300) << describe(r);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      r.err, m, std::regex(R"(^ddph lab: at ([0-9.]+) s, every rank's link is now 50mbit\n$)")))
      << describe(r);
  EXPECT_GE(std::stod(m[1]), 0.3) << describe(r);
  ASSERT_TRUE(std::regex_search(
      r.out, m,
      std::regex(
          R"("link_changes":\[\{"at_s":([0-9.]+),"rate":"50mbit","bits_per_s":50000000.0,"ok":true\}\]\}\n$)")))
      << describe(r);
  EXPECT_GE(std::stod(m[1]), 0.3) << describe(r);
}

// A change that tc refuses is said on stderr, with rank and tc's own line,
// and fails the lab (its ranks ran on another link than asked); the summary
// still comes. Here a `tc` first on PATH refuses `tc class change` only.
TEST_F(Lab, AFailedRateChangeIsReportedAndFailsTheLab) {
  const std::string dir = ddph_test::make_temp_dir("ddph-fake-tc");
  {
    std::ofstream tc(dir + "/tc");
    tc << "#!/bin/sh\n"
          "if [ \"$1 $2\" = 'class change' ]; then echo 'Error: refused by the test' >&2; exit 2; "
          "fi\n"
          "exec /usr/sbin/tc \"$@\"\n";
  }
  ASSERT_EQ(chmod((dir + "/tc").c_str(), 0755), 0);
  const char* path = std::getenv("PATH");
  const std::string saved = path != nullptr ? path : "/usr/bin:/bin";
  setenv("PATH", (dir + ":" + saved).c_str(), 1);
  const Result r = ddph("lab --link 100mbit@0s,10mbit@0.2s,1gbit@0.4s -- sleep 2");
  setenv("PATH", saved.c_str(), 1);
  std::system(("rm -rf " + dir).c_str());
  EXPECT_EQ(r.code, 1) << describe(r);
  EXPECT_TRUE(std::regex_search(
      r.err, std::regex(R"(^ddph lab: at [0-9.]+ s, the link could not change to 10mbit, and )"
                        R"(keeps its rate from then on: rank 0: `tc class change dev ddph0 )"
                        R"([^`]*` failed: Error: refused by the test\n$)")))
      << describe(r);
  EXPECT_EQ(r.out.find("link is now"), std::string::npos) << describe(r);  // nor 1gbit after it
  EXPECT_NE(r.out.find("ddph lab: rank 1: exit 0, "), std::string::npos) << describe(r);
}

// The lab changes the links, never the numbers: a training through it ends
// with the parameters of the same training on plain loopback.
TEST_F(Lab, ATrainingThroughTheLabEndsWithTheSameParameters) {
  const std::string run = "train --config " + kConfigs + "allreduce.yaml --steps 40 --log-every 40";
  const Result plain = ddph(run);
  const Result shaped = ddph(run + " --link 100mbit");
  ASSERT_EQ(plain.code, 0) << describe(plain);
  ASSERT_EQ(shaped.code, 0) << describe(shaped);
  const std::regex hash("bit-identical on all 2 ranks: fnv1a ([0-9a-f]+)");
  std::smatch a, b;
  ASSERT_TRUE(std::regex_search(plain.out, a, hash)) << describe(plain);
  ASSERT_TRUE(std::regex_search(shaped.out, b, hash)) << describe(shaped);
  EXPECT_EQ(a[1].str(), b[1].str());
  const Result both = ddph("train --config " + kConfigs + "allreduce.yaml --rank 0 --link 1gbit");
  EXPECT_EQ(both.code, 2) << describe(both);
  EXPECT_NE(both.err.find("does not combine with --rank"), std::string::npos) << describe(both);
}

}  // namespace
