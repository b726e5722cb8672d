// The YAML config: every problem reported with source, line, column and key.
#include <gtest/gtest.h>

#include "config_problems.h"
#include "core/base/error.h"
#include "core/base/options.h"
#include "loader/job/job.h"

using ddph::loader::check_job;
using ddph::loader::ConfigSource;
using ddph_test::fixture_dir;
using ddph_test::joined;
using ddph_test::problems_of;
using ddph_test::with_plugins;

namespace {

#define EXPECT_ONE_PROBLEM(yaml, part)                                     \
  do {                                                                     \
    auto problems_ = problems_of(yaml);                                    \
    ASSERT_EQ(problems_.size(), 1u) << joined(problems_);                  \
    EXPECT_NE(problems_[0].find(part), std::string::npos) << problems_[0]; \
  } while (0)

}  // namespace

TEST(Config, ValidConfigHasNoProblems) {
  auto problems = problems_of(with_plugins(
      "hook:\n"
      "  family: fixture_sum\n"
      "  name: scale\n"
      "  options: {factor: 2}\n"
      "  wrap: {family: fixture_sum, name: sum, options: {level: 3, tuning: {depth: 4}}}\n"
      "rules:\n"
      "  - when: {max_bytes: 1024}\n"
      "    hook: {family: fixture_sum, name: sum}\n"));
  EXPECT_TRUE(problems.empty()) << joined(problems);
}

TEST(Config, LoadJobResolvesOptionsWithDefaults) {
  ConfigSource source;
  source.is_text = true;
  source.text = with_plugins(
      "hook: {family: fixture_sum, name: sum, options: {level: 2, tuning: {depth: 5}}}\n");
  ddph::loader::Job job = ddph::loader::load_job(source);
  ASSERT_NE(job.hook, nullptr);
  ddph::Options opts(job.hook->options.data(), job.hook->options.size());
  EXPECT_EQ(opts.get_int("level"), 2);
  EXPECT_EQ(opts.get_int("tuning.depth"), 5);
  EXPECT_EQ(opts.get_string("mode"), "fast");
  EXPECT_EQ(job.config.comm.timeout_ms, 300000);
  ASSERT_NE(job.comm.factory, nullptr);
  EXPECT_STREQ(job.comm.factory->backend, "fake");
}

TEST(Config, MalformedYamlNamesTheLine) {
  EXPECT_ONE_PROBLEM("comm: {backend: fake}\nhook:\n  family: [unclosed\n  name: x\n",
                     "<yaml text>:");
  auto problems = problems_of("comm: {backend: fake}\nhook:\n  family: [unclosed\n  name: x\n");
  EXPECT_NE(problems[0].find("malformed YAML"), std::string::npos) << problems[0];
  // The position is yaml-cpp's mark: on or after the line of the '['.
  int line = std::atoi(problems[0].substr(std::string("<yaml text>:").size()).c_str());
  EXPECT_GE(line, 3) << problems[0];
}

// yaml-cpp says "illegal map value" for a tab; the problem names the tab.
TEST(Config, ATabInTheIndentationIsNamedWithItsLine) {
  auto problems = problems_of("comm: {backend: fake}\nhook:\n  family: default\n\tname: x\n");
  ASSERT_EQ(problems.size(), 1u) << joined(problems);
  EXPECT_EQ(problems[0],
            "<yaml text>:4:1: malformed YAML: a tab in the indentation; YAML indents with "
            "spaces only");
}

// A repeated key would silently win over the first (yaml-cpp keeps both).
TEST(Config, ADuplicateKeyIsAProblemAtEveryLevel) {
  auto problems = problems_of(
      with_plugins("hook:\n  family: fixture_sum\n  name: sum\n  options: {add: 1, add: 2}\n"
                   "hook: {family: fixture_sum, name: sum}\n"));
  ASSERT_EQ(problems.size(), 2u) << joined(problems);
  EXPECT_NE(problems[0].find(":6:21: hook.options.add: duplicate key 'add' (first at line 6)"),
            std::string::npos)
      << joined(problems);
  EXPECT_NE(problems[1].find(":7:1: hook: duplicate key 'hook' (first at line 3)"),
            std::string::npos)
      << joined(problems);
}

// Keys that are maps or lists do not compare by text: two are no repeat.
TEST(Config, TwoNonScalarKeysAreNoDuplicate) {
  auto problems = problems_of(
      with_plugins("hook: {family: fixture_sum, name: sum, options: {[a]: 1, [b]: 2}}\n"));
  EXPECT_FALSE(problems.empty());  // such keys are unknown options
  for (const auto& p : problems) EXPECT_EQ(p.find("duplicate key"), std::string::npos) << p;
}

TEST(Config, ProblemInAFileNamesTheFileLineAndColumn) {
  std::string path = ddph_test::write_temp_file(
      "bad_type.yaml", with_plugins("hook:\n  family: fixture_sum\n  name: sum\n"
                                    "  options: {level: two}\n"));
  ConfigSource source;
  source.path = path;
  auto problems = check_job(source);
  ASSERT_EQ(problems.size(), 1u) << joined(problems);
  EXPECT_EQ(problems[0], path + ":6:20: hook.options.level: expects an int, got 'two'");
}

TEST(Config, RelativePluginPathIsRelativeToTheFile) {
  // The file sits in fixtures/, so "good" means fixtures/good.
  std::string path = fixture_dir("relative.yaml");
  std::ofstream(path) << "plugin_path: good\ncomm: {backend: fake}\n"
                         "hook: {family: fixture_sum, name: sum}\n";
  ConfigSource source;
  source.path = path;
  auto problems = check_job(source);
  EXPECT_TRUE(problems.empty()) << joined(problems);
}

// Issue 21: it used to resolve against the current directory, whoever chose it.
TEST(Config, RelativePluginPathInTextIsAnError) {
  auto problems = problems_of(
      "plugin_path: [/abs, rel/dir]\nhook: {family: default, name: "
      "allreduce}\n");
  ASSERT_FALSE(problems.empty());
  EXPECT_NE(problems[0].find("<yaml text>:1:21: plugin_path[1]: 'rel/dir' is relative, but this "
                             "config is text, with no file to be relative to: give an absolute "
                             "path"),
            std::string::npos)
      << joined(problems);
  problems = problems_of("plugin_path: ./mine\nhook: {family: default, name: allreduce}\n");
  ASSERT_FALSE(problems.empty());
  EXPECT_NE(problems[0].find("plugin_path: './mine' is relative"), std::string::npos)
      << joined(problems);
}

TEST(Config, ReplaceBuiltinIsAListOfFamilyNames) {
  ConfigSource source;
  source.is_text = true;
  source.text = with_plugins(
      "replace_builtin: [comm_gloo, default]\n"
      "hook: {family: fixture_sum, name: sum}\n");
  ddph::loader::Job job = ddph::loader::load_job(source);
  EXPECT_EQ(job.config.replace_builtin, (std::vector<std::string>{"comm_gloo", "default"}));
  source.text = with_plugins("replace_builtin: default\nhook: {family: fixture_sum, name: sum}\n");
  EXPECT_EQ(ddph::loader::load_job(source).config.replace_builtin,
            (std::vector<std::string>{"default"}));
  EXPECT_ONE_PROBLEM(with_plugins("replace_builtin: [../lib/evil]\n"
                                  "hook: {family: fixture_sum, name: sum}\n"),
                     "<yaml text>:3:19: replace_builtin[0]: '../lib/evil' is not a family name");
  EXPECT_ONE_PROBLEM(with_plugins("replace_builtin: {comm_gloo: yes}\n"
                                  "hook: {family: fixture_sum, name: sum}\n"),
                     "replace_builtin: expects a single value, got a map");
}

TEST(Config, UnknownOptionListsKnownOnes) {
  EXPECT_ONE_PROBLEM(with_plugins("hook: {family: fixture_sum, name: sum, options: {lvl: 1}}\n"),
                     "hook.options.lvl: unknown option (known: add, fail_step, level, mode, "
                     "verbose, tuning.depth)");
}

TEST(Config, WrongTypeOutOfRangeAndChoices) {
  auto problems =
      problems_of(with_plugins("hook:\n  family: fixture_sum\n  name: sum\n"
                               "  options: {level: 7, add: abc, mode: slow, verbose: maybe}\n"));
  ASSERT_EQ(problems.size(), 4u) << joined(problems);
  std::string all = joined(problems);
  EXPECT_NE(all.find("hook.options.level: is 7, outside its range [0, 3]"), std::string::npos)
      << all;
  EXPECT_NE(all.find("hook.options.add: expects a finite float, got 'abc'"), std::string::npos)
      << all;
  EXPECT_NE(all.find("hook.options.mode: is 'slow'; expected one of fast|exact"), std::string::npos)
      << all;
  EXPECT_NE(all.find("hook.options.verbose: expects a bool"), std::string::npos) << all;
}

TEST(Config, UnknownKeys) {
  auto problems =
      problems_of(with_plugins("hook: {family: fixture_sum, name: sum, colour: red}\nextra: 1\n"));
  ASSERT_EQ(problems.size(), 2u) << joined(problems);
  std::string all = joined(problems);
  EXPECT_NE(all.find("hook.colour: unknown key"), std::string::npos) << all;
  EXPECT_NE(all.find("<yaml text>:4:1: extra: unknown top-level key"), std::string::npos) << all;
}

TEST(Config, MissingFamilyAndName) {
  auto problems = problems_of(with_plugins("hook: {options: {}}\n"));
  std::string all = joined(problems);
  ASSERT_EQ(problems.size(), 2u) << all;
  EXPECT_NE(all.find("hook.family: missing"), std::string::npos) << all;
  EXPECT_NE(all.find("hook.name: missing"), std::string::npos) << all;
  EXPECT_ONE_PROBLEM(with_plugins(""), "hook: missing");
}

TEST(Config, UnknownFamilyListsSearchedDirectories) {
  EXPECT_ONE_PROBLEM(with_plugins("hook: {family: nope, name: sum}\n"),
                     "hook.family: plugin family 'nope' not found: no libddph_nope.so in any of");
  EXPECT_ONE_PROBLEM(with_plugins("hook: {family: nope, name: sum}\n"), fixture_dir("good"));
}

TEST(Config, UnknownHookListsTheFamilysHooks) {
  EXPECT_ONE_PROBLEM(with_plugins("hook: {family: fixture_sum, name: average}\n"),
                     "<yaml text>:3:35: hook.name: family 'fixture_sum' has no hook 'average' "
                     "(its hooks: sum, scale)");
}

TEST(Config, WrapMisuse) {
  EXPECT_ONE_PROBLEM(with_plugins("hook: {family: fixture_sum, name: scale}\n"),
                     "hook.wrap: missing: 'scale' is a wrapper");
  EXPECT_ONE_PROBLEM(
      with_plugins(
          "hook: {family: fixture_sum, name: sum, wrap: {family: fixture_sum, name: sum}}\n"),
      "hook.wrap: 'sum' does not wrap another hook");
  // Problems inside the inner hook are reported with its own key.
  EXPECT_ONE_PROBLEM(with_plugins("hook:\n  family: fixture_sum\n  name: scale\n"
                                  "  wrap: {family: fixture_sum, name: sum, options: {x: 1}}\n"),
                     "hook.wrap.options.x: unknown option");
}

TEST(Config, CommProblems) {
  auto problems = problems_of(
      "plugin_path: [" + fixture_dir("good") +
      "]\ncomm: {backend: fake, timeout: soon, rendezvous: 'ftp://x', options: {fail_after: -5}}\n"
      "hook: {family: fixture_sum, name: sum}\n");
  std::string all = joined(problems);
  ASSERT_EQ(problems.size(), 3u) << all;
  EXPECT_NE(all.find("comm.timeout: 'soon' is not a timeout"), std::string::npos) << all;
  EXPECT_NE(all.find("comm.rendezvous: 'ftp://x' is not a rendezvous"), std::string::npos) << all;
  EXPECT_NE(all.find("comm.options.fail_after: is -5, outside its range"), std::string::npos)
      << all;
  EXPECT_ONE_PROBLEM(
      "plugin_path: [" + fixture_dir("good") +
          "]\ncomm: {backend: carrier_pigeon}\nhook: {family: fixture_sum, name: sum}\n",
      "comm.backend: plugin family 'comm_carrier_pigeon' not found");
}

// Rank 0's store: tcp://host:port is checked whole here; env:// names
// variables that only the ranks' environment holds, so it is read there.
TEST(Config, TcpAndEnvRendezvous) {
  auto with_rendezvous = [](const std::string& url) {
    return "plugin_path: [" + fixture_dir("good") + "]\ncomm: {backend: fake, rendezvous: '" + url +
           "'}\nhook: {family: fixture_sum, name: sum}\n";
  };
  for (const char* good : {"tcp://10.0.0.1:29500", "tcp://[fd00::1]:29500", "env://"}) {
    auto problems = problems_of(with_rendezvous(good));
    EXPECT_TRUE(problems.empty()) << good << ": " << joined(problems);
  }
  EXPECT_ONE_PROBLEM(with_rendezvous("tcp://x"), "comm.rendezvous: 'tcp://x': no port");
  EXPECT_ONE_PROBLEM(with_rendezvous("tcp://x:99999"),
                     "comm.rendezvous: 'tcp://x:99999': port '99999' is not a number");
}

// A job of fixture_sum on the fake communicator whose comm section ends
// with `comm` (", key: value").
ConfigSource with_comm(const std::string& comm) {
  ConfigSource source;
  source.is_text = true;
  source.text = "plugin_path: [" + fixture_dir("good") + "]\ncomm: {backend: fake" + comm +
                "}\nhook: {family: fixture_sum, name: sum}\n";
  return source;
}

TEST(Config, BucketCheck) {
  auto job_with = [](const std::string& comm) { return ddph::loader::load_job(with_comm(comm)); };
  using ddph::loader::BucketCheck;
  EXPECT_EQ(job_with("").config.comm.bucket_check, BucketCheck::kAuto);
  EXPECT_EQ(job_with(", bucket_check: auto").config.comm.bucket_check, BucketCheck::kAuto);
  EXPECT_EQ(job_with(", bucket_check: strict").config.comm.bucket_check, BucketCheck::kStrict);
  EXPECT_EQ(job_with(", bucket_check: off").config.comm.bucket_check, BucketCheck::kOff);
  EXPECT_ONE_PROBLEM("plugin_path: [" + fixture_dir("good") +
                         "]\ncomm: {backend: fake, bucket_check: sometimes}\n"
                         "hook: {family: fixture_sum, name: sum}\n",
                     "<yaml text>:2:37: comm.bucket_check: 'sometimes' is not a bucket check: use "
                     "auto, strict or off");
  EXPECT_ONE_PROBLEM("plugin_path: [" + fixture_dir("good") +
                         "]\ncomm: {backend: fake, bucket_check: [auto]}\n"
                         "hook: {family: fixture_sum, name: sum}\n",
                     "comm.bucket_check: expects a single value, got a list");
}

TEST(Config, Lanes) {
  const auto& job_with = with_comm;
  EXPECT_EQ(ddph::loader::load_job(job_with("")).config.comm.lanes, -1);  // not given
  EXPECT_EQ(ddph::loader::load_job(job_with(", lanes: 1")).config.comm.lanes, 1);
  EXPECT_EQ(ddph::loader::load_job(job_with(", lanes: 16")).config.comm.lanes, 16);
  EXPECT_ONE_PROBLEM(job_with(", lanes: 0").text, "comm.lanes: is 0, outside its range [1, 16]");
  EXPECT_ONE_PROBLEM(job_with(", lanes: 17").text, "comm.lanes: is 17, outside its range [1, 16]");
  EXPECT_ONE_PROBLEM(job_with(", lanes: two").text, "comm.lanes: expects an int, got 'two'");
}

TEST(Config, Durations) {
  int64_t ms = 0;
  EXPECT_TRUE(ddph::loader::parse_duration_ms("500ms", &ms));
  EXPECT_EQ(ms, 500);
  EXPECT_TRUE(ddph::loader::parse_duration_ms("30s", &ms));
  EXPECT_EQ(ms, 30000);
  EXPECT_TRUE(ddph::loader::parse_duration_ms("2m", &ms));
  EXPECT_EQ(ms, 120000);
  EXPECT_TRUE(ddph::loader::parse_duration_ms("1.5", &ms));
  EXPECT_EQ(ms, 1500);
  EXPECT_FALSE(ddph::loader::parse_duration_ms("30 parsecs", &ms));
  EXPECT_FALSE(ddph::loader::parse_duration_ms("-1s", &ms));
  EXPECT_FALSE(ddph::loader::parse_duration_ms("", &ms));
}

TEST(Config, BadRulesEntries) {
  auto problems =
      problems_of(with_plugins("hook: {family: fixture_sum, name: sum}\n"
                               "rules:\n"
                               "  - when: {max_bytes: lots}\n"
                               "    hook: {family: fixture_sum, name: sum}\n"
                               "  - when: {min_bytes: 3}\n"
                               "    hook: {family: fixture_sum, name: sum}\n"
                               "  - hook: {family: fixture_sum, name: sum}\n"));
  std::string all = joined(problems);
  EXPECT_NE(all.find("rules[0].when.max_bytes: expects an int, got 'lots'"), std::string::npos)
      << all;
  EXPECT_NE(all.find("rules[1].when.min_bytes: unknown condition"), std::string::npos) << all;
  EXPECT_NE(all.find("rules[2].when: missing"), std::string::npos) << all;
  EXPECT_ONE_PROBLEM(with_plugins("hook: {family: fixture_sum, name: sum}\nrules: {a: 1}\n"),
                     "rules: expects a list");
}

TEST(Config, CollectsAllProblemsAtOnce) {
  auto problems = problems_of(with_plugins(
      "hook:\n  family: fixture_sum\n  name: sum\n  options: {level: 9, bogus: 1}\n"
      "rules:\n  - when: {max_bytes: 10}\n    hook: {family: fixture_sum, name: nope}\n"
      "unknown: 1\n"));
  EXPECT_EQ(problems.size(), 4u) << joined(problems);
}

TEST(Config, LoadJobThrowsAllProblemsOnePerLine) {
  ConfigSource source;
  source.is_text = true;
  source.text = with_plugins("hook: {family: fixture_sum, name: sum, options: {a: 1, b: 2}}\n");
  try {
    ddph::loader::load_job(source);
    FAIL() << "accepted a bad config";
  } catch (const ddph::Error& e) {
    EXPECT_EQ(e.code(), DDPH_INVALID_ARGUMENT);
    std::string text = e.what();
    EXPECT_NE(text.find("hook.options.a"), std::string::npos) << text;
    EXPECT_NE(text.find("\n"), std::string::npos) << text;
    EXPECT_NE(text.find("hook.options.b"), std::string::npos) << text;
  }
}

// Issue 38 case 19: -1e-320 is a finite double (a subnormal) and was refused
// as "not a finite float", because strtod reports its underflow in errno.
TEST(Config, AFloatBelowTheSmallestNormalDoubleIsTakenAndOneBeyondItsRangeIsNamed) {
  ConfigSource source;
  source.is_text = true;
  source.text = with_plugins(
      "hook: {family: fixture_sum, name: scale, options: {factor: -1e-320}, "
      "wrap: {family: fixture_sum, name: sum}}\n");
  ddph::loader::Job job = ddph::loader::load_job(source);
  ASSERT_NE(job.hook, nullptr);
  ddph::Options opts(job.hook->options.data(), job.hook->options.size());
  EXPECT_EQ(opts.get_float("factor"), -1e-320);  // the subnormal strtod reads, as Python does
  EXPECT_LT(opts.get_float("factor"), 0.0);

  EXPECT_ONE_PROBLEM(
      with_plugins("hook: {family: fixture_sum, name: scale, options: {factor: -1e400}, "
                   "wrap: {family: fixture_sum, name: sum}}\n"),
      "hook.options.factor: is -1e400, outside the range of a float (a double: magnitudes up to "
      "1.79769e+308)");
  EXPECT_ONE_PROBLEM(
      with_plugins("hook: {family: fixture_sum, name: scale, options: {factor: nan}, "
                   "wrap: {family: fixture_sum, name: sum}}\n"),
      "hook.options.factor: expects a finite float, got 'nan'");
}
