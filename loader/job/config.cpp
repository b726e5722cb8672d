#include "loader/job/config.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "core/base/error.h"
#include "core/comm/rendezvous_url.h"
#include "loader/job/job_id.h"
#include "loader/job/yaml_limits.h"
#include "loader/registry/registry.h"
#include "loader/registry/search_path.h"

namespace ddph {
namespace loader {

std::string to_string(const Location &at) {
  if (at.line <= 0)
    return at.source;
  return at.source + ":" + std::to_string(at.line) + ":" +
         std::to_string(at.column);
}

namespace {

// Cuts line to at most max bytes, not inside a UTF-8 sequence, and says so.
std::string shortened(std::string line, size_t max) {
  if (line.size() <= max)
    return line;
  size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80)
    --cut;
  const size_t left = line.size() - cut;
  line.resize(cut);
  return line + "... (" + std::to_string(left) + " more bytes)";
}

// The length of the UTF-8 sequence at s[i], 0 if it is not one.
size_t utf8_length(const std::string &s, size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  const size_t n = c >= 0xF0 && c <= 0xF4  ? 4
                   : c >= 0xE0             ? 3
                   : c >= 0xC2 && c < 0xE0 ? 2
                                           : 0;
  if (n == 0 || i + n > s.size())
    return 0;
  for (size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80)
      return 0;
  return n;
}

} // namespace

std::string printable(const std::string &text) {
  std::string out;
  char esc[8];
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7F) {
      out += char(c);
      ++i;
      continue;
    }
    const size_t n = c >= 0x80 ? utf8_length(text, i) : 0;
    const unsigned char next =
        n == 2 ? static_cast<unsigned char>(text[i + 1]) : 0;
    if (n == 2 && c == 0xC2 && next < 0xA0) { // a C1 control, e.g. U+009B (CSI)
      std::snprintf(esc, sizeof esc, "\\u%04x", unsigned(next));
      out += esc;
    } else if (n > 0) {
      out.append(text, i, n);
    } else {
      std::snprintf(esc, sizeof esc, "\\x%02x", unsigned(c));
      out += esc;
    }
    i += n > 0 ? n : 1;
  }
  return out;
}

void Problems::add(const Location &at, const std::string &key, ddph_code_t code,
                   const std::string &message) {
  if (lines_.empty())
    first_code_ = code;
  if (lines_.size() >= kMaxProblemLines) {
    ++dropped_;
    return;
  }
  lines_.push_back(
      shortened(printable(to_string(at) + ": " +
                          (key.empty() ? "" : key + ": ") + message),
                kMaxProblemLineBytes));
}

std::vector<std::string> Problems::lines() const {
  std::vector<std::string> out = lines_;
  if (dropped_ > 0)
    out.push_back("... and " + std::to_string(dropped_) + " more problems");
  return out;
}

std::string Problems::text() const {
  std::string out;
  for (const std::string &line : lines())
    out += (out.empty() ? "" : "\n") + line;
  return out;
}

void Problems::throw_if_any() const {
  if (!lines_.empty())
    throw Error(first_code_, text());
}

const char *bucket_check_name(BucketCheck check) {
  switch (check) {
  case BucketCheck::kStrict:
    return "strict";
  case BucketCheck::kOff:
    return "off";
  case BucketCheck::kAuto:
    break;
  }
  return "auto";
}

bool parse_bucket_check(const std::string &text, BucketCheck *out) {
  for (BucketCheck c :
       {BucketCheck::kAuto, BucketCheck::kStrict, BucketCheck::kOff})
    if (text == bucket_check_name(c)) {
      *out = c;
      return true;
    }
  return false;
}

bool parse_duration_ms(const std::string &text, int64_t *ms) {
  if (text.empty())
    return false;
  errno = 0;
  char *end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || errno != 0 || !std::isfinite(value) || value < 0)
    return false;
  std::string unit(end);
  double scale;
  if (unit.empty() || unit == "s")
    scale = 1000;
  else if (unit == "ms")
    scale = 1;
  else if (unit == "m")
    scale = 60 * 1000;
  else if (unit == "h")
    scale = 3600 * 1000;
  else
    return false;
  double total = value * scale;
  if (total > 1e15)
    return false;
  *ms = int64_t(std::llround(total));
  return true;
}

namespace {

constexpr const char kCommKeys[] =
    "backend, rendezvous, job, secret_file, timeout, rank, world_size, "
    "bucket_check, options";

// Walks one YAML document, reporting problems with positions.
class Parser {
public:
  Parser(std::string source, std::string base_dir, Problems &problems)
      : source_(std::move(source)), base_dir_(std::move(base_dir)),
        problems_(problems) {}

  Config parse(const std::string &text) {
    Config config;
    config.source = source_;
    YAML::Node root;
    // yaml-cpp stops at a raw NUL byte with words about something else
    // ("unknown escape character"); YAML text may not hold one.
    const size_t nul = text.find('\0');
    if (nul != std::string::npos) {
      problems_.add(position_of(text, nul), "", DDPH_INVALID_ARGUMENT,
                    "a NUL byte in the file, which YAML text may not hold");
      return config;
    }
    try {
      // Bounded first: the walk below visits every aliased node once per alias.
      YamlLimitBreach breach;
      if (!check_yaml_limits(text, YamlLimits{}, &breach)) {
        problems_.add(at(breach.mark), "", DDPH_INVALID_ARGUMENT,
                      breach.message);
        return config;
      }
      root = YAML::Load(text);
    } catch (const YAML::Exception &e) {
      // yaml-cpp's words for a tab in the indentation ("illegal map value")
      // do not say what is wrong.
      const Location tab = indentation_tab(text);
      if (tab.line > 0)
        problems_.add(tab, "", DDPH_INVALID_ARGUMENT,
                      "malformed YAML: a tab in the indentation; YAML indents "
                      "with spaces only");
      else
        problems_.add(at(e.mark), "", DDPH_INVALID_ARGUMENT,
                      "malformed YAML: " + e.msg);
      return config;
    }
    duplicate_keys(root, "");
    if (nul_bytes(root, ""))
      return config;
    if (!root.IsDefined() || root.IsNull()) {
      problems_.add(Location{source_}, "", DDPH_INVALID_ARGUMENT,
                    "the file is empty; it needs at least a 'hook' section");
      return config;
    }
    if (!root.IsMap()) {
      problem(root, "",
              "the top level must be a map (plugin_path, replace_builtin, "
              "comm, hook, rules)");
      return config;
    }
    config.readable = true;
    bool has_hook = false;
    for (const auto &kv : root) {
      const std::string key = key_text(kv.first);
      if (key == "plugin_path") {
        read_plugin_path(kv.second, config);
      } else if (key == "replace_builtin") {
        read_replace_builtin(kv.second, config);
      } else if (key == "comm") {
        read_comm(kv.second, config.comm);
      } else if (key == "hook") {
        has_hook = true;
        read_hook(kv.second, "hook", config.hook);
      } else if (key == "rules") {
        read_rules(kv.second, config);
      } else {
        unknown(kv.first, key,
                "unknown top-level key (expected plugin_path, replace_builtin, "
                "comm, hook, rules)");
      }
    }
    if (!has_hook)
      problem(root, "hook", "missing: name the hook to run (family and name)");
    return config;
  }

private:
  Location at(const YAML::Mark &mark) const {
    if (mark.is_null())
      return Location{source_};
    return Location{source_, mark.line + 1, mark.column + 1};
  }
  Location at(const YAML::Node &node) const { return at(node.Mark()); }

  // The line and column (1-based, in bytes) of text[offset].
  Location position_of(const std::string &text, size_t offset) const {
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

  // The first tab among a line's leading whitespace; line 0 if none.
  Location indentation_tab(const std::string &text) const {
    int line = 1, column = 1;
    bool leading = true;
    for (char c : text) {
      if (c == '\n') {
        ++line;
        column = 1;
        leading = true;
        continue;
      }
      if (leading && c == '\t')
        return Location{source_, line, column};
      leading = leading && c == ' ';
      ++column;
    }
    return Location{source_};
  }

  // YAML lets a map repeat a key and yaml-cpp keeps every pair, so the walk
  // below would let the last one win silently: each repeat is a problem.
  // (check_yaml_limits has bounded the tree, aliases expanded.)
  void duplicate_keys(const YAML::Node &node, const std::string &path) {
    if (node.IsMap()) {
      std::map<std::string, int> first_line;
      for (const auto &kv : node) {
        const std::string key = key_text(kv.first);
        const std::string where = path.empty() ? key : path + "." + key;
        // Only scalar keys compare by their text; the walk names others.
        auto seen = first_line.emplace(key, kv.first.Mark().line + 1);
        if (!seen.second && kv.first.IsScalar())
          problem(
              kv.first, where,
              "duplicate key '" + key + "' (first at line " +
                  std::to_string(seen.first->second) +
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
  // alone (the walk below would only add problems about the cut text).
  bool nul_bytes(const YAML::Node &node, const std::string &path) {
    bool found = false;
    auto check = [&](const YAML::Node &scalar, const std::string &where,
                     const char *what) {
      if (!scalar.IsScalar() || scalar.Scalar().find('\0') == std::string::npos)
        return;
      problem(
          scalar, where,
          std::string(what) + " '" + scalar.Scalar() +
              "' holds a NUL byte (\\x00); no key or value of a job file may");
      found = true;
    };
    if (node.IsMap()) {
      for (const auto &kv : node) {
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

  void problem(const YAML::Node &node, const std::string &key,
               const std::string &message,
               ddph_code_t code = DDPH_INVALID_ARGUMENT) {
    problems_.add(at(node), key, code, message);
  }

  // An unknown key, or a YAML merge key, which yaml-cpp reads as a plain key.
  void unknown(const YAML::Node &key_node, const std::string &key,
               const std::string &message) {
    if (key_node.IsScalar() && key_node.Scalar() == "<<")
      return problem(
          key_node, key,
          "YAML merge keys (<<) are not supported; alias the whole map instead "
          "(options: *shared) or write the keys out");
    problem(key_node, key, message);
  }

  static std::string key_text(const YAML::Node &key) {
    return key.IsScalar() ? key.Scalar() : std::string("<non-scalar key>");
  }

  // A scalar's text, or a problem (and false) for maps, lists and nulls.
  bool scalar(const YAML::Node &node, const std::string &key,
              std::string *out) {
    if (!node.IsScalar()) {
      problem(node, key,
              node.IsNull() ? "has no value"
                            : "expects a single value, got a " +
                                  std::string(node.IsMap() ? "map" : "list"));
      return false;
    }
    *out = node.Scalar();
    return true;
  }

  bool integer(const YAML::Node &node, const std::string &key, int64_t lo,
               int64_t hi, int64_t *out) {
    std::string text;
    if (!scalar(node, key, &text))
      return false;
    errno = 0;
    char *end = nullptr;
    long long v = std::strtoll(text.c_str(), &end, 0);
    if (text.empty() || *end != '\0' || errno != 0) {
      problem(node, key, "expects an int, got '" + text + "'");
      return false;
    }
    if (v < lo || v > hi) {
      problem(node, key,
              "is " + text + ", outside its range [" + std::to_string(lo) +
                  ", " + std::to_string(hi) + "]");
      return false;
    }
    *out = v;
    return true;
  }

  bool expect_map(const YAML::Node &node, const std::string &key,
                  const char *what) {
    if (node.IsMap())
      return true;
    problem(node, key, std::string("expects a map (") + what + ")");
    return false;
  }

  // A string or a list of strings; for_each gets each entry and its key.
  template <typename F>
  void each_entry(const YAML::Node &node, const std::string &key, F for_each) {
    if (!node.IsSequence())
      return for_each(node, key);
    for (size_t i = 0; i < node.size(); ++i)
      for_each(node[i], key + "[" + std::to_string(i) + "]");
  }

  void read_plugin_path(const YAML::Node &node, Config &config) {
    each_entry(node, "plugin_path",
               [&](const YAML::Node &entry, const std::string &key) {
                 std::string dir;
                 if (!scalar(entry, key, &dir))
                   return;
                 if (dir.empty())
                   return problem(entry, key, "is an empty path");
                 if (dir[0] != '/') {
                   // Relative to the YAML file, so a job folder can carry its
                   // own plugins; text has no folder, and the current one is
                   // nobody's choice.
                   if (base_dir_.empty())
                     return problem(entry, key,
                                    "'" + dir +
                                        "' is relative, but this config is "
                                        "text, with no file to be "
                                        "relative to: give an absolute path");
                   dir = base_dir_ + "/" + dir;
                 }
                 append_unique(config.plugin_path, dir);
               });
  }

  void read_replace_builtin(const YAML::Node &node, Config &config) {
    if (node.IsNull())
      return; // `replace_builtin:` with nothing after it
    each_entry(
        node, "replace_builtin",
        [&](const YAML::Node &entry, const std::string &key) {
          std::string family;
          if (!scalar(entry, key, &family))
            return;
          if (!is_valid_family_name(family))
            return problem(
                entry, key,
                "'" + family +
                    "' is not a family name (letters, digits, '_', '-'), e.g. "
                    "comm_gloo");
          append_unique(config.replace_builtin, family);
        });
  }

  void read_options(const YAML::Node &node, const std::string &key,
                    const std::string &prefix, std::vector<OptionValue> &out) {
    if (node.IsNull())
      return; // `options:` with nothing after it
    if (!expect_map(node, key, "option names to values"))
      return;
    for (const auto &kv : node) {
      const std::string name = prefix + key_text(kv.first);
      if (key_text(kv.first) == "<<") {
        unknown(kv.first, key + ".<<", "");
        continue;
      }
      if (kv.second.IsMap()) {
        // Nested maps flatten: {optimizer: {lr: 0.1}} is the option
        // "optimizer.lr".
        read_options(kv.second, key + "." + key_text(kv.first), name + ".",
                     out);
        continue;
      }
      std::string text;
      if (!scalar(kv.second, key + "." + key_text(kv.first), &text))
        continue;
      out.push_back(OptionValue{name, text, at(kv.second), at(kv.first)});
    }
  }

  void read_comm(const YAML::Node &node, CommSpec &comm) {
    comm.at = at(node);
    if (!expect_map(node, "comm", kCommKeys))
      return;
    for (const auto &kv : node) {
      const std::string name = key_text(kv.first);
      const std::string key = "comm." + name;
      const YAML::Node &v = kv.second;
      if (name == "backend") {
        comm.backend_at = at(v);
        if (scalar(v, key, &comm.backend) && comm.backend.empty())
          problem(v, key, "is empty (gloo, nccl, mpi, host, ...)");
      } else if (name == "rendezvous") {
        comm.rendezvous_at = at(v);
        if (!scalar(v, key, &comm.rendezvous))
          continue;
        const std::string &r = comm.rendezvous;
        if (r != "host" && !is_rendezvous_url(r))
          problem(
              v, key,
              "'" + r +
                  "' is not a rendezvous: use file:///dir, redis://host:port, "
                  "tcp://host:port, env:// or host");
        else if (r.rfind("tcp://", 0) == 0)
          // env:// is read where each rank runs; a tcp:// address is whole
          // here.
          try {
            parse_rendezvous_url(r, "");
          } catch (const Error &e) {
            problem(v, key, e.what());
          }
      } else if (name == "timeout") {
        std::string text;
        if (scalar(v, key, &text) &&
            (!parse_duration_ms(text, &comm.timeout_ms) ||
             comm.timeout_ms <= 0))
          problem(v, key,
                  "'" + text +
                      "' is not a timeout: use seconds (30) or a duration "
                      "(500ms, 30s, 2m)");
      } else if (name == "job") {
        comm.job_at = at(v);
        if (scalar(v, key, &comm.job) && !is_valid_job_id(comm.job))
          problem(v, key,
                  "'" + comm.job +
                      "' is not a job id: use 1 to 64 letters, digits, '.', "
                      "'_' or '-'");
      } else if (name == "secret_file") {
        comm.secret_file_at = at(v);
        if (!scalar(v, key, &comm.secret_file))
          continue;
        if (comm.secret_file.empty()) {
          problem(v, key, "is an empty path");
        } else if (comm.secret_file[0] != '/') {
          // Relative to the YAML file, like plugin_path; text has no file.
          if (base_dir_.empty())
            problem(
                v, key,
                "'" + comm.secret_file +
                    "' is relative, and YAML given as text has no file to be "
                    "relative to: give an absolute path");
          else
            comm.secret_file = base_dir_ + "/" + comm.secret_file;
        }
      } else if (name == "rank") {
        int64_t r;
        if (integer(v, key, 0, INT32_MAX, &r))
          comm.rank = int32_t(r);
      } else if (name == "world_size") {
        int64_t w;
        if (integer(v, key, 1, INT32_MAX, &w))
          comm.world_size = int32_t(w);
      } else if (name == "options") {
        comm.options_at = at(v);
        read_options(v, key, "", comm.options);
      } else if (name == "bucket_check") {
        read_bucket_check(v, key, comm);
      } else {
        unknown(kv.first, key,
                std::string("unknown key (expected ") + kCommKeys + ")");
      }
    }
    if (comm.rank >= 0 && comm.world_size > 0 && comm.rank >= comm.world_size)
      problem(node, "comm.rank",
              "is " + std::to_string(comm.rank) + ", not below world_size " +
                  std::to_string(comm.world_size));
  }

  void read_bucket_check(const YAML::Node &node, const std::string &key,
                         CommSpec &comm) {
    std::string text;
    if (scalar(node, key, &text) &&
        !parse_bucket_check(text, &comm.bucket_check))
      problem(node, key,
              "'" + text + "' is not a bucket check: use auto, strict or off");
  }

  void read_hook(const YAML::Node &node, const std::string &key,
                 HookSpec &hook) {
    hook.key = key;
    hook.at = at(node);
    if (!expect_map(node, key, "family, name, options, wrap"))
      return;
    bool has_family = false, has_name = false;
    for (const auto &kv : node) {
      const std::string name = key_text(kv.first);
      const std::string sub = key + "." + name;
      const YAML::Node &v = kv.second;
      if (name == "family") {
        hook.family_at = at(v);
        has_family = scalar(v, sub, &hook.family);
      } else if (name == "name") {
        hook.name_at = at(v);
        has_name = scalar(v, sub, &hook.name);
      } else if (name == "options") {
        hook.options_at = at(v);
        read_options(v, sub, "", hook.options);
      } else if (name == "wrap") {
        hook.wrap = std::make_unique<HookSpec>();
        read_hook(v, sub, *hook.wrap);
      } else {
        unknown(kv.first, sub,
                "unknown key (expected family, name, options, wrap)");
      }
    }
    if (!has_family || hook.family.empty())
      problem(node, key + ".family",
              "missing: which plugin family holds the hook");
    if (!has_name || hook.name.empty())
      problem(node, key + ".name", "missing: which hook of the family to run");
  }

  void read_rules(const YAML::Node &node, Config &config) {
    if (node.IsNull())
      return;
    if (!node.IsSequence()) {
      problem(node, "rules",
              "expects a list of {when: {max_bytes: N}, hook: {...}}");
      return;
    }
    for (size_t i = 0; i < node.size(); ++i) {
      const YAML::Node &entry = node[i];
      const std::string key = "rules[" + std::to_string(i) + "]";
      RuleSpec rule;
      rule.at = at(entry);
      if (!expect_map(entry, key, "when, hook"))
        continue;
      bool has_when = false, has_hook = false;
      for (const auto &kv : entry) {
        const std::string name = key_text(kv.first);
        if (name == "when") {
          has_when = true;
          read_when(kv.second, key + ".when", rule);
        } else if (name == "hook") {
          has_hook = true;
          read_hook(kv.second, key + ".hook", rule.hook);
        } else {
          unknown(kv.first, key + "." + name,
                  "unknown key (expected when, hook)");
        }
      }
      if (!has_when)
        problem(entry, key + ".when",
                "missing: e.g. when: {max_bytes: 1048576}");
      if (!has_hook)
        problem(entry, key + ".hook", "missing: the hook for matching buckets");
      config.rules.push_back(std::move(rule));
    }
  }

  void read_when(const YAML::Node &node, const std::string &key,
                 RuleSpec &rule) {
    if (!expect_map(node, key, "max_bytes"))
      return;
    bool has_max = false;
    for (const auto &kv : node) {
      const std::string name = key_text(kv.first);
      if (name == "max_bytes") {
        int64_t v;
        if (integer(kv.second, key + ".max_bytes", 0, INT64_MAX, &v)) {
          rule.max_bytes = uint64_t(v);
          has_max = true;
        }
      } else {
        unknown(kv.first, key + "." + name,
                "unknown condition (expected max_bytes)");
      }
    }
    if (!has_max && node.size() == 0)
      problem(node, key + ".max_bytes", "missing");
  }

  std::string source_, base_dir_;
  Problems &problems_;
};

} // namespace

Config parse_config_text(const std::string &text, Problems &problems) {
  // YAML text has no file: a relative plugin path is an error.
  return Parser("<yaml text>", "", problems).parse(text);
}

Config parse_config_file(const std::string &path, Problems &problems) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    problems.add(Location{path}, "", DDPH_NOT_FOUND,
                 "cannot read the config file");
    Config config;
    config.source = path;
    return config;
  }
  // A directory opens like a file and reads as nothing: say so, rather than
  // "the file is empty". peek() sets badbit when the read itself fails.
  errno = 0;
  in.peek();
  if (in.bad()) {
    problems.add(Location{path}, "", DDPH_INVALID_ARGUMENT,
                 errno == EISDIR ? "is a directory, not a config file"
                                 : "cannot read the config file");
    Config config;
    config.source = path;
    return config;
  }
  std::stringstream text;
  text << in.rdbuf();
  return Parser(path, parent_directory(path), problems).parse(text.str());
}

} // namespace loader
} // namespace ddph
