// The config reader on YAML anchors and aliases: a node that contains itself,
// alias bombs and deep nesting stop at a stated limit with one problem line;
// ordinary sharing through aliases still works; the problem list is capped.
#include <gtest/gtest.h>

#include "config_problems.h"
#include "core/base/error.h"
#include "core/base/options.h"
#include "loader/job/job.h"
#include "loader/job/yaml_limits.h"

using ddph::loader::ConfigSource;
using ddph_test::joined;
using ddph_test::problems_of;
using ddph_test::text_source;
using ddph_test::with_plugins;

namespace {

// `levels` nested option maps: {a: {a: ... {a: 1}}}.
std::string nested_options(int levels) {
  std::string open, close;
  for (int i = 1; i < levels; ++i) {
    open += "{a: ";
    close += "}";
  }
  return open + "1" + close;
}

#define EXPECT_HAS(text, part) \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << "in: " << (text)

}  // namespace

TEST(ConfigLimits, AnAliasInsideItsOwnAnchorIsAnErrorWithItsLine) {
  // Issue 21: this recursed until the stack overflowed.
  auto problems = problems_of("hook: &h {family: default, name: allreduce, options: {x: *h}}\n");
  ASSERT_EQ(problems.size(), 1u) << joined(problems);
  EXPECT_HAS(problems[0], "<yaml text>:1:58: alias '*h' refers to the node anchored at line 1");
  EXPECT_HAS(problems[0], "a node cannot contain itself");

  // Deeper inside, on another line, through a list.
  problems =
      problems_of(with_plugins("hook:\n  family: fixture_sum\n  name: sum\n"
                               "rules: &r\n  - when: {max_bytes: 1}\n    hook: *r\n"));
  ASSERT_EQ(problems.size(), 1u) << joined(problems);
  EXPECT_HAS(problems[0], "<yaml text>:8:11: alias '*r' refers to the node anchored at line 6");
}

TEST(ConfigLimits, TheAliasBombStopsAtTheNodeLimit) {
  // Issue 21: 4.8 million problem lines. (tool_test bounds its time and memory.)
  const std::string bomb = ddph_test::alias_bomb();
  ASSERT_LT(bomb.size(), 700u);
  auto problems = problems_of(bomb);
  ASSERT_EQ(problems.size(), 1u) << problems.size() << " problems, first " << problems[0];
  EXPECT_HAS(problems[0], "grows past 100000 nodes with its aliases expanded");
  // Levels a to d expand to 16,600 nodes; each alias of d on line 9 adds 14,762.
  EXPECT_HAS(problems[0], "<yaml text>:9:");
}

TEST(ConfigLimits, NestingDeeperThan64LevelsIsRefused) {
  const std::string hook = "hook: {family: fixture_sum, name: sum, options: ";
  // The top map and hook's map, then options' own n levels: 2 + n levels.
  auto problems = problems_of(with_plugins(hook + nested_options(63) + "}\n"));
  ASSERT_EQ(problems.size(), 1u) << joined(problems);
  EXPECT_HAS(problems[0], "nests deeper than 64 levels");
  // 64 levels in all is within the limit: the option is merely unknown.
  problems = problems_of(with_plugins(hook + nested_options(62) + "}\n"));
  ASSERT_EQ(problems.size(), 1u) << joined(problems);
  EXPECT_HAS(problems[0], "hook.options.a.a.a");
  EXPECT_HAS(problems[0], "unknown option");
  // Through an alias, the aliased node's levels count from where the alias
  // sits: 3 + 60 levels under the main hook, 5 + 60 in a rule's hook.
  const std::string anchored =
      "hook: {family: fixture_sum, name: sum, options: {x: &d " + nested_options(60) + "}}\n";
  problems = problems_of(with_plugins(anchored));
  EXPECT_EQ(joined(problems).find("deeper"), std::string::npos) << joined(problems);
  problems = problems_of(with_plugins(anchored + "rules:\n  - when: {max_bytes: 1}\n"
                                                 "    hook: {family: fixture_sum, name: sum, "
                                                 "options: {x: *d}}\n"));
  ASSERT_EQ(problems.size(), 1u) << joined(problems);
  EXPECT_HAS(problems[0], "<yaml text>:6:");
  EXPECT_HAS(problems[0], "nests deeper than 64 levels");
}

TEST(ConfigLimits, MoreThan1000AliasesAreRefused) {
  std::string options = "{v: &v 1";
  for (int i = 0; i < 1001; ++i) options += ", k" + std::to_string(i) + ": *v";
  auto problems = problems_of(
      with_plugins("hook: {family: fixture_sum, name: sum, options: " + options + "}}\n"));
  ASSERT_EQ(problems.size(), 1u) << joined(problems).substr(0, 2000);
  EXPECT_HAS(problems[0], "more than 1000 aliases");
}

TEST(ConfigLimits, TheCheckCountsExactlyTheExpandedTree) {
  // The map, 2 keys, a 3-node list, and an alias of it: 1 + 2 + 3 + 3 = 9 nodes.
  ddph::loader::YamlLimits limits;
  ddph::loader::YamlLimitBreach breach;
  const std::string text = "a: &l [1, 2]\nb: *l\n";
  limits.max_nodes = 8;
  EXPECT_FALSE(ddph::loader::check_yaml_limits(text, limits, &breach));
  EXPECT_EQ(breach.mark.line, 1);  // stops at the alias
  limits.max_nodes = 9;
  EXPECT_TRUE(ddph::loader::check_yaml_limits(text, limits, &breach)) << breach.message;
  // 3 levels: the map, the list, its items; through the alias as well.
  limits.max_depth = 2;
  EXPECT_FALSE(ddph::loader::check_yaml_limits(text, limits, &breach));
  limits.max_depth = 3;
  EXPECT_TRUE(ddph::loader::check_yaml_limits(text, limits, &breach)) << breach.message;
  limits.max_aliases = 0;
  EXPECT_FALSE(ddph::loader::check_yaml_limits(text, limits, &breach));
  EXPECT_HAS(breach.message, "more than 0 aliases");
}

TEST(ConfigLimits, AliasesThatShareOptionsStillWork) {
  // One options map for the main hook and a rule's hook.
  ConfigSource source = text_source(with_plugins(
      "hook: {family: fixture_sum, name: sum, options: &shared {level: 2, tuning: {depth: 7}}}\n"
      "rules:\n"
      "  - when: {max_bytes: 1024}\n"
      "    hook: {family: fixture_sum, name: sum, options: *shared}\n"));
  ddph::loader::Job job = ddph::loader::load_job(source);
  ASSERT_EQ(job.rules.size(), 1u);
  for (const ddph::loader::ResolvedHook* hook : {job.hook.get(), job.rules[0].hook.get()}) {
    ASSERT_NE(hook, nullptr);
    ddph::Options opts(hook->options.data(), hook->options.size());
    EXPECT_EQ(opts.get_int("level"), 2);
    EXPECT_EQ(opts.get_int("tuning.depth"), 7);
  }
  // A whole hook map reused, and a scalar.
  auto problems =
      problems_of(with_plugins("hook: &h {family: fixture_sum, name: sum, options: {level: &l 3}}\n"
                               "rules:\n  - when: {max_bytes: 1}\n    hook: *h\n"
                               "  - when: {max_bytes: 2}\n    hook: {family: fixture_sum, name: "
                               "sum, options: {level: *l}}\n"));
  EXPECT_TRUE(problems.empty()) << joined(problems);
}

TEST(ConfigLimits, AMergeKeyIsExplained) {
  auto problems = problems_of(
      with_plugins("hook: {family: fixture_sum, name: sum, options: &o {level: 2}}\n"
                   "rules:\n  - when: {max_bytes: 1}\n"
                   "    hook: {family: fixture_sum, name: sum, options: {<<: *o, mode: exact}}\n"));
  ASSERT_EQ(problems.size(), 1u) << joined(problems);
  EXPECT_HAS(problems[0], "rules[0].hook.options.<<: YAML merge keys (<<) are not supported");
}

TEST(ConfigLimits, TheProblemListIsCapped) {
  std::string body = "hook: {family: fixture_sum, name: sum}\n";
  for (int i = 0; i < 250; ++i) body += "extra" + std::to_string(i) + ": 1\n";
  auto problems = problems_of(with_plugins(body));
  ASSERT_EQ(problems.size(), 101u);
  EXPECT_HAS(problems[0], "extra0: unknown top-level key");
  EXPECT_HAS(problems[99], "extra99: unknown top-level key");
  EXPECT_EQ(problems[100], "... and 150 more problems");

  // One enormous value is cut, not echoed whole.
  const std::string huge(100000, 'x');
  problems = problems_of(
      with_plugins("hook: {family: fixture_sum, name: sum, options: {level: " + huge + "}}\n"));
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_LT(problems[0].size(), 2100u);
  EXPECT_HAS(problems[0], "hook.options.level: expects an int");
  EXPECT_HAS(problems[0], "more bytes)");

  // The error a session gets is capped the same way.
  try {
    ddph::loader::load_job(text_source(with_plugins(body)));
    FAIL() << "accepted a bad config";
  } catch (const ddph::Error& e) {
    EXPECT_LT(std::string(e.what()).size(), 100u * 2100u);
    EXPECT_HAS(e.what(), "\n... and 150 more problems");
  }
}

// Issue 38 case 19: `ddph validate` printed a key's ANSI escapes as-is (the
// terminal obeyed them) and a NUL in a key cut the message short.
TEST(ConfigLimits, ControlCharactersInKeysAndValuesAreShownEscaped) {
  auto problems =
      problems_of(with_plugins("hook: {family: fixture_sum, name: sum}\n"
                               "\"\\e[31mred\\e]0;title\\a\": 1\n"
                               "\"csi\\u009b2J\": 1\n"
                               "\"tab\\tnewline\\n\\x7f\": 1\n"));
  ASSERT_EQ(problems.size(), 3u) << joined(problems);
  for (const std::string& p : problems) {
    for (unsigned char c : p)
      EXPECT_TRUE(c >= 0x20 && c != 0x7f) << "raw control byte " << int(c) << " in: " << p;
    EXPECT_EQ(p.find("\xC2\x9B"), std::string::npos) << "raw U+009B in: " << p;
  }
  EXPECT_HAS(problems[0], ":4:1: \\x1b[31mred\\x1b]0;title\\x07: unknown top-level key");
  EXPECT_HAS(problems[1], ":5:1: csi\\u009b2J: unknown top-level key");
  EXPECT_HAS(problems[2], ":6:1: tab\\x09newline\\x0a\\x7f: unknown top-level key");
  // UTF-8 text is not a control: it stays as written.
  EXPECT_EQ(ddph::loader::printable("caf\xC3\xA9 \xE2\x82\xAC"), "caf\xC3\xA9 \xE2\x82\xAC");
  // A byte that is not UTF-8 is shown, not passed to the terminal.
  EXPECT_EQ(ddph::loader::printable("a\x9b"
                                    "b\xC3"),
            "a\\x9bb\\xc3");
}

TEST(ConfigLimits, ANulInAKeyOrValueIsReportedWhole) {
  auto problems = problems_of(
      with_plugins("hook: {family: fixture_sum, name: sum, options: {\"level\\0junk\": 2}}\n"
                   "comm2: \"a\\0b\"\n"));
  ASSERT_EQ(problems.size(), 2u) << joined(problems);
  EXPECT_HAS(problems[0],
             ":3:50: hook.options.level\\x00junk: the key 'level\\x00junk' holds a NUL byte");
  EXPECT_HAS(problems[1], ":4:8: comm2: the value 'a\\x00b' holds a NUL byte");
  // A raw NUL byte in the text: yaml-cpp stopped there with words about
  // an escape character; now it is named with its place.
  problems = problems_of(
      with_plugins(std::string("hook: {family: fixture_sum, name: sum}\nab") + '\0' + "cd: 1\n"));
  ASSERT_EQ(problems.size(), 1u) << joined(problems);
  EXPECT_HAS(problems[0], "<yaml text>:4:3: a NUL byte in the file");
}

// Before, YAML::Load read the first document and dropped the rest silently.
TEST(ConfigLimits, ASecondDocumentIsRefusedWithTheLineWhereItStarts) {
  auto problems =
      problems_of(with_plugins("hook: {family: fixture_sum, name: sum}\n"
                               "---\n"
                               "hook: {family: fixture_sum, name: scale}\n"));
  ASSERT_EQ(problems.size(), 1u) << joined(problems);
  EXPECT_HAS(problems[0], "<yaml text>:4:1: a second YAML document starts here");
  // One document, with its start and end markers, is fine.
  problems = problems_of("---\n" + with_plugins("hook: {family: fixture_sum, name: sum}\n...\n"));
  EXPECT_TRUE(problems.empty()) << joined(problems);
}
