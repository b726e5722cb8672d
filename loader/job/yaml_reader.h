// Reading a YAML document with the position of every problem: the checks
// yaml-cpp does not make (a NUL byte, a document past yaml_limits.h, a tab in
// the indentation, a repeated key, a NUL inside a quoted scalar), and the
// typed reads of its nodes that a job file's sections share. config.cpp's
// parser walks the job file's sections on top of it.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>

#include "loader/job/config.h"

namespace ddph {
namespace loader {

class YamlReader {
 public:
  // base_dir: the folder relative paths in the document are relative to;
  // empty for YAML given as text, which has none.
  YamlReader(std::string source, std::string base_dir, Problems& problems)
      : source_(std::move(source)), base_dir_(std::move(base_dir)), problems_(problems) {}

  // The document's root, or false (with the problem added) when the text is
  // not YAML this reader walks: a NUL byte, past the limits, malformed, or
  // with a NUL in a key or value. A repeated key is a problem but the root
  // is still returned, so the walk reports the rest.
  bool load(const std::string& text, YAML::Node* root);

 protected:
  Location at(const YAML::Mark& mark) const {
    if (mark.is_null()) return Location{source_};
    return Location{source_, mark.line + 1, mark.column + 1};
  }
  Location at(const YAML::Node& node) const { return at(node.Mark()); }

  void problem(const YAML::Node& node, const std::string& key, const std::string& message,
               ddph_code_t code = DDPH_INVALID_ARGUMENT) {
    problems_.add(at(node), key, code, message);
  }
  // An unknown key, or a YAML merge key, which yaml-cpp reads as a plain key.
  void unknown(const YAML::Node& key_node, const std::string& key, const std::string& message);
  static std::string key_text(const YAML::Node& key) {
    return key.IsScalar() ? key.Scalar() : std::string("<non-scalar key>");
  }
  // A scalar's text, or a problem (and false) for maps, lists and nulls.
  bool scalar(const YAML::Node& node, const std::string& key, std::string* out);
  bool integer(const YAML::Node& node, const std::string& key, int64_t lo, int64_t hi,
               int64_t* out);
  bool expect_map(const YAML::Node& node, const std::string& key, const char* what);
  // A string or a list of strings; for_each gets each entry and its key.
  template <typename F>
  void each_entry(const YAML::Node& node, const std::string& key, F for_each) {
    if (!node.IsSequence()) return for_each(node, key);
    for (size_t i = 0; i < node.size(); ++i) for_each(node[i], key + "[" + std::to_string(i) + "]");
  }

  std::string source_, base_dir_;
  Problems& problems_;

 private:
  // The line and column (1-based, in bytes) of text[offset].
  Location position_of(const std::string& text, size_t offset) const;
  // The first tab among a line's leading whitespace; line 0 if none.
  Location indentation_tab(const std::string& text) const;
  void duplicate_keys(const YAML::Node& node, const std::string& path);
  bool nul_bytes(const YAML::Node& node, const std::string& path);
};

}  // namespace loader
}  // namespace ddph
