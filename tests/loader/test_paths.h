// Paths and small helpers shared by the loader tests.
#pragma once

#include <cstdlib>
#include <fstream>
#include <string>

namespace ddph_test {

inline std::string fixture_dir(const std::string& name) {
  return std::string(DDPH_TEST_FIXTURE_DIR) + "/" + name;
}

// Sets an environment variable for one scope, restoring it afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) {
      had_ = true;
      old_ = old;
    }
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

inline std::string write_temp_file(const std::string& name, const std::string& text) {
  const char* tmp = std::getenv("TMPDIR");
  std::string path = std::string(tmp ? tmp : "/tmp") + "/ddph_loader_test_" + name;
  std::ofstream(path) << text;
  return path;
}

}  // namespace ddph_test
