// The plugin contract on every libddph_*.so in the plugin directory: the
// checks of `ddph validate-plugin` (conformance/plugin_checks.h),
// each in its own child process, must all pass or be skipped.
#include <dirent.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "conformance/plugin_checks.h"

namespace {

std::vector<std::string> plugin_files() {
  std::vector<std::string> v;
  DIR* d = opendir(DDPH_PLUGIN_DIR);
  if (d == nullptr) return v;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name, pre = "libddph_", post = ".so";
    if (name.size() > pre.size() + post.size() && name.compare(0, pre.size(), pre) == 0 &&
        name.compare(name.size() - post.size(), post.size(), post) == 0)
      v.push_back(name);
  }
  closedir(d);
  std::sort(v.begin(), v.end());
  return v;
}

TEST(Conformance, PluginsAreFound) {
  EXPECT_FALSE(plugin_files().empty()) << "no plugins in " << DDPH_PLUGIN_DIR;
}

class PluginConformance : public ::testing::TestWithParam<std::string> {};

TEST_P(PluginConformance, EveryCheckPasses) {
  ddph::plugin_checks::ValidateOptions opt;
  opt.timeout_s = 60;  // generous: CI machines are loaded
  const auto rows =
      ddph::plugin_checks::validate_plugin(std::string(DDPH_PLUGIN_DIR) + "/" + GetParam(), opt);
  ASSERT_GE(rows.size(), 5u);
  int hook_rows = 0;
  for (const auto& r : rows) {
    EXPECT_NE(r.status, ddph::plugin_checks::Status::kFail)
        << r.check << " [" << r.hook << "]: " << r.detail;
    hook_rows += r.hook != "-";
  }
  EXPECT_GT(hook_rows, 0) << "no hook or communicator was checked";
}

INSTANTIATE_TEST_SUITE_P(AllPlugins, PluginConformance, ::testing::ValuesIn(plugin_files()),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string n = i.param.substr(8, i.param.size() - 11);
                           for (char& c : n)
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(PluginConformance);

}  // namespace
