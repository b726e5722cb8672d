// The shipped quantization configs: `ddph validate` accepts them and
// `ddph train` trains with them (a few steps, on 2 local ranks).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <string>

namespace {

int run(const std::string& cmd) {
  const int rc = std::system((cmd + " >/dev/null 2>&1").c_str());
  return rc == -1 ? -1 : WEXITSTATUS(rc);
}

class Configs : public ::testing::TestWithParam<const char*> {};

TEST_P(Configs, ValidateAndTrain) {
  const std::string ddph = std::string(DDPH_BIN_DIR) + "/ddph";
  const std::string file = std::string(DDPH_SOURCE_DIR) + "/configs/" + GetParam() + ".yaml";
  EXPECT_EQ(run(ddph + " validate " + file), 0) << file;
  EXPECT_EQ(run(ddph + " train --config " + file + " --world 2 --steps 20"), 0) << file;
}

INSTANTIATE_TEST_SUITE_P(Shipped, Configs,
                         ::testing::Values("quantization_per_tensor", "quantization_per_channel",
                                           "quantization_rs8", "quantization_rs4_ef"));

}  // namespace
