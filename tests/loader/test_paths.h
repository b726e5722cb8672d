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
    if (had_)
      setenv(name_, old_.c_str(), 1);
    else
      unsetenv(name_);
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

// An alias bomb ("billion laughs"), 636 bytes: 8 levels of 9-key maps, each
// level 9 aliases of the one above, under hook.options, where the config
// reader flattens nested maps into option names: 9^7 = 4.8 million unknown
// options once expanded.
inline std::string alias_bomb() {
  std::string text = "hook:\n  family: default\n  name: allreduce\n  options:\n";
  const std::string keys = "abcdefghi";
  text += "    a: &a {a: 1, b: 1, c: 1, d: 1, e: 1, f: 1, g: 1, h: 1, i: 1}\n";
  for (char level = 'b'; level <= 'h'; ++level) {
    const std::string below(1, char(level - 1));
    text += std::string("    ") + level + ": &" + level + " {";
    for (size_t k = 0; k < keys.size(); ++k)
      text += (k ? ", " : "") + std::string(1, keys[k]) + ": *" + below;
    text += "}\n";
  }
  return text;
}

}  // namespace ddph_test
