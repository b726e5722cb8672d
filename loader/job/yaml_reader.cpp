#include "loader/job/yaml_reader.h"

#include <cerrno>
#include <cstdlib>
#include <map>

#include "loader/job/yaml_limits.h"

namespace ddph {
namespace loader {

bool YamlReader::load(const std::string& text, YAML::Node* root_out) {
  YAML::Node& root = *root_out;
  // yaml-cpp stops at a raw NUL byte with words about something else
  // ("unknown escape character"); YAML text may not hold one.
  const size_t nul = text.find('\0');
  if (nul != std::string::npos) {
    problems_.add(position_of(text, nul), "", DDPH_INVALID_ARGUMENT,
                  "a NUL byte in the file, which YAML text may not hold");
    return false;
  }
  try {
    // Bounded first: a walk visits every aliased node once per alias.
    YamlLimitBreach breach;
    if (!check_yaml_limits(text, YamlLimits{}, &breach)) {
      problems_.add(at(breach.mark), "", DDPH_INVALID_ARGUMENT, breach.message);
      return false;
    }
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    // yaml-cpp's words for a tab in the indentation ("illegal map value")
    // do not say what is wrong.
    const Location tab = indentation_tab(text);
    if (tab.line > 0)
      problems_.add(tab, "", DDPH_INVALID_ARGUMENT,
                    "malformed YAML: a tab in the indentation; YAML indents with spaces only");
    else
      problems_.add(at(e.mark), "", DDPH_INVALID_ARGUMENT, "malformed YAML: " + e.msg);
    return false;
  }
  duplicate_keys(root, "");
  if (nul_bytes(root, "")) return false;
  return true;
}

Location YamlReader::position_of(const std::string& text, size_t offset) const {
  int line = 1, column = 1;
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return Location{source_, line, column};
}

Location YamlReader::indentation_tab(const std::string& text) const {
  int line = 1, column = 1;
  bool leading = true;
  for (char c : text) {
    if (c == '\n') {
      ++line;
      column = 1;
      leading = true;
      continue;
    }
    if (leading && c == '\t') return Location{source_, line, column};
    leading = leading && c == ' ';
    ++column;
  }
  return Location{source_};
}

// YAML lets a map repeat a key and yaml-cpp keeps every pair, so a walk
// of the sections would let the last one win silently: each repeat is a problem.
// (check_yaml_limits has bounded the tree, aliases expanded.)
void YamlReader::duplicate_keys(const YAML::Node& node, const std::string& path) {
  if (node.IsMap()) {
    std::map<std::string, int> first_line;
    for (const auto& kv : node) {
      const std::string key = key_text(kv.first);
      const std::string where = path.empty() ? key : path + "." + key;
      // Only scalar keys compare by their text; the walk names others.
      auto seen = first_line.emplace(key, kv.first.Mark().line + 1);
      if (!seen.second && kv.first.IsScalar())
        problem(kv.first, where,
                "duplicate key '" + key + "' (first at line " + std::to_string(seen.first->second) +
                    "); YAML would keep only the last one: remove one of them");
      duplicate_keys(kv.second, where);
    }
  } else if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i)
      duplicate_keys(node[i], path + "[" + std::to_string(i) + "]");
  }
}

// A NUL ("\0" in a quoted scalar) would cut the key or value short where
// it reaches C (a path, a URL, an option passed to a plugin), so the job
// would run with other text than the file's: each is a problem, reported
// alone (a walk of the sections would only add problems about the cut text).
bool YamlReader::nul_bytes(const YAML::Node& node, const std::string& path) {
  bool found = false;
  auto check = [&](const YAML::Node& scalar, const std::string& where, const char* what) {
    if (!scalar.IsScalar() || scalar.Scalar().find('\0') == std::string::npos) return;
    problem(scalar, where,
            std::string(what) + " '" + scalar.Scalar() +
                "' holds a NUL byte (\\x00); no key or value of a job file may");
    found = true;
  };
  if (node.IsMap()) {
    for (const auto& kv : node) {
      const std::string key = key_text(kv.first);
      const std::string where = path.empty() ? key : path + "." + key;
      check(kv.first, where, "the key");
      check(kv.second, where, "the value");
      found |= nul_bytes(kv.second, where);
    }
  } else if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i) {
      const std::string where = path + "[" + std::to_string(i) + "]";
      check(node[i], where, "the value");
      found |= nul_bytes(node[i], where);
    }
  } else if (path.empty()) {
    check(node, path, "the document");
  }
  return found;
}

void YamlReader::unknown(const YAML::Node& key_node, const std::string& key,
                         const std::string& message) {
  if (key_node.IsScalar() && key_node.Scalar() == "<<")
    return problem(key_node, key,
                   "YAML merge keys (<<) are not supported; alias the whole map instead "
                   "(options: *shared) or write the keys out");
  problem(key_node, key, message);
}

bool YamlReader::scalar(const YAML::Node& node, const std::string& key, std::string* out) {
  if (!node.IsScalar()) {
    problem(node, key,
            node.IsNull()
                ? "has no value"
                : "expects a single value, got a " + std::string(node.IsMap() ? "map" : "list"));
    return false;
  }
  *out = node.Scalar();
  return true;
}

bool YamlReader::integer(const YAML::Node& node, const std::string& key, int64_t lo, int64_t hi,
                         int64_t* out) {
  std::string text;
  if (!scalar(node, key, &text)) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text.c_str(), &end, 0);
  if (text.empty() || *end != '\0' || errno != 0) {
    problem(node, key, "expects an int, got '" + text + "'");
    return false;
  }
  if (v < lo || v > hi) {
    problem(node, key,
            "is " + text + ", outside its range [" + std::to_string(lo) + ", " +
                std::to_string(hi) + "]");
    return false;
  }
  *out = v;
  return true;
}

bool YamlReader::expect_map(const YAML::Node& node, const std::string& key, const char* what) {
  if (node.IsMap()) return true;
  problem(node, key, std::string("expects a map (") + what + ")");
  return false;
}

}  // namespace loader
}  // namespace ddph
