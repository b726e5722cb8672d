#include "loader/tool/bench_label.h"

#include <stdexcept>

#include "core/base/error.h"
#include "loader/config.h"

namespace ddph_tool {
namespace {
std::string chain(const ddph::loader::HookSpec& h) {
  std::string s = h.family + "/" + h.name;
  if (h.wrap) s += "(" + chain(*h.wrap) + ")";
  return s;
}
}  // namespace

std::string hook_label(const std::string& config_path) {
  ddph::loader::Problems problems;
  ddph::loader::Config config;
  try {
    config = ddph::loader::parse_config_file(config_path, problems);
  } catch (const std::exception& e) {
    throw std::runtime_error(config_path + ": " + e.what());
  }
  if (!problems.empty()) throw std::runtime_error(problems.text());
  std::string label = chain(config.hook);
  for (const ddph::loader::RuleSpec& rule : config.rules)
    label += " | <=" + std::to_string(rule.max_bytes) + "B: " + chain(rule.hook);
  return label;
}

}  // namespace ddph_tool
