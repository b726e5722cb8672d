// Helpers of the config tests: YAML text on the fixture plugins, checked as a
// session would check it.
#pragma once

#include <string>
#include <vector>

#include "loader/job/job.h"
#include "test_paths.h"

namespace ddph_test {

// YAML that finds the fixture plugins, followed by body.
inline std::string with_plugins(const std::string& body) {
  return "plugin_path: [" + fixture_dir("good") + "]\ncomm: {backend: fake}\n" + body;
}

inline ddph::loader::ConfigSource text_source(const std::string& yaml) {
  ddph::loader::ConfigSource source;
  source.text = yaml;
  source.is_text = true;
  return source;
}

inline std::vector<std::string> problems_of(const std::string& yaml) {
  return ddph::loader::check_job(text_source(yaml));
}

inline std::string joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

}  // namespace ddph_test
