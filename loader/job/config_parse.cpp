// parse_config_file/_text: a job file's sections (plugin_path,
// replace_builtin, comm, hook, rules) read into a Config, each problem with
// its position, on top of YamlReader's checked document.
#include <cerrno>
#include <fstream>
#include <sstream>

#include "core/base/error.h"
#include "core/comm/rendezvous_url.h"
#include "loader/job/config.h"
#include "loader/job/job_id.h"
#include "loader/job/yaml_reader.h"
#include "loader/registry/registry.h"
#include "loader/registry/search_path.h"

namespace ddph {
namespace loader {
namespace {

constexpr const char kCommKeys[] =
    "backend, rendezvous, job, secret_file, timeout, rank, world_size, bucket_check, lanes, "
    "options";

// Walks a job file's sections, reporting problems with positions.
class Parser : public YamlReader {
 public:
  using YamlReader::YamlReader;

  Config parse(const std::string& text) {
    Config config;
    config.source = source_;
    YAML::Node root;
    if (!load(text, &root)) return config;
    if (!root.IsDefined() || root.IsNull()) {
      problems_.add(Location{source_}, "", DDPH_INVALID_ARGUMENT,
                    "the file is empty; it needs at least a 'hook' section");
      return config;
    }
    if (!root.IsMap()) {
      problem(root, "",
              "the top level must be a map (plugin_path, replace_builtin, comm, hook, rules)");
      return config;
    }
    config.readable = true;
    bool has_hook = false;
    for (const auto& kv : root) {
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
                "unknown top-level key (expected plugin_path, replace_builtin, comm, hook, rules)");
      }
    }
    if (!has_hook) problem(root, "hook", "missing: name the hook to run (family and name)");
    return config;
  }

 private:
  void read_plugin_path(const YAML::Node& node, Config& config) {
    each_entry(node, "plugin_path", [&](const YAML::Node& entry, const std::string& key) {
      std::string dir;
      if (!scalar(entry, key, &dir)) return;
      if (dir.empty()) return problem(entry, key, "is an empty path");
      if (dir[0] != '/') {
        // Relative to the YAML file, so a job folder can carry its own plugins;
        // text has no folder, and the current one is nobody's choice.
        if (base_dir_.empty())
          return problem(entry, key,
                         "'" + dir +
                             "' is relative, but this config is text, with no file to be "
                             "relative to: give an absolute path");
        dir = base_dir_ + "/" + dir;
      }
      append_unique(config.plugin_path, dir);
    });
  }

  void read_replace_builtin(const YAML::Node& node, Config& config) {
    if (node.IsNull()) return;  // `replace_builtin:` with nothing after it
    each_entry(node, "replace_builtin", [&](const YAML::Node& entry, const std::string& key) {
      std::string family;
      if (!scalar(entry, key, &family)) return;
      if (!is_valid_family_name(family))
        return problem(entry, key,
                       "'" + family +
                           "' is not a family name (letters, digits, '_', '-'), e.g. "
                           "comm_gloo");
      append_unique(config.replace_builtin, family);
    });
  }

  void read_options(const YAML::Node& node, const std::string& key, const std::string& prefix,
                    std::vector<OptionValue>& out) {
    if (node.IsNull()) return;  // `options:` with nothing after it
    if (!expect_map(node, key, "option names to values")) return;
    for (const auto& kv : node) {
      const std::string name = prefix + key_text(kv.first);
      if (key_text(kv.first) == "<<") {
        unknown(kv.first, key + ".<<", "");
        continue;
      }
      if (kv.second.IsMap()) {
        // Nested maps flatten: {optimizer: {lr: 0.1}} is the option "optimizer.lr".
        read_options(kv.second, key + "." + key_text(kv.first), name + ".", out);
        continue;
      }
      std::string text;
      if (!scalar(kv.second, key + "." + key_text(kv.first), &text)) continue;
      out.push_back(OptionValue{name, text, at(kv.second), at(kv.first)});
    }
  }

  void read_comm(const YAML::Node& node, CommSpec& comm) {
    comm.at = at(node);
    if (!expect_map(node, "comm", kCommKeys)) return;
    for (const auto& kv : node) {
      const std::string name = key_text(kv.first);
      const std::string key = "comm." + name;
      const YAML::Node& v = kv.second;
      if (name == "backend") {
        comm.backend_at = at(v);
        if (scalar(v, key, &comm.backend) && comm.backend.empty())
          problem(v, key, "is empty (gloo, nccl, mpi, host, ...)");
      } else if (name == "rendezvous") {
        comm.rendezvous_at = at(v);
        if (!scalar(v, key, &comm.rendezvous)) continue;
        const std::string& r = comm.rendezvous;
        if (r != "host" && !is_rendezvous_url(r))
          problem(v, key,
                  "'" + r +
                      "' is not a rendezvous: use file:///dir, redis://host:port, "
                      "tcp://host:port, env:// or host");
        else if (r.rfind("tcp://", 0) == 0)
          // env:// is read where each rank runs; a tcp:// address is whole here.
          try {
            parse_rendezvous_url(r, "");
          } catch (const Error& e) {
            problem(v, key, e.what());
          }
      } else if (name == "timeout") {
        std::string text;
        if (scalar(v, key, &text) &&
            (!parse_duration_ms(text, &comm.timeout_ms) || comm.timeout_ms <= 0))
          problem(
              v, key,
              "'" + text + "' is not a timeout: use seconds (30) or a duration (500ms, 30s, 2m)");
      } else if (name == "job") {
        comm.job_at = at(v);
        if (scalar(v, key, &comm.job) && !is_valid_job_id(comm.job))
          problem(
              v, key,
              "'" + comm.job + "' is not a job id: use 1 to 64 letters, digits, '.', '_' or '-'");
      } else if (name == "secret_file") {
        comm.secret_file_at = at(v);
        if (!scalar(v, key, &comm.secret_file)) continue;
        if (comm.secret_file.empty()) {
          problem(v, key, "is an empty path");
        } else if (comm.secret_file[0] != '/') {
          // Relative to the YAML file, like plugin_path; text has no file.
          if (base_dir_.empty())
            problem(v, key,
                    "'" + comm.secret_file +
                        "' is relative, and YAML given as text has no file to be "
                        "relative to: give an absolute path");
          else
            comm.secret_file = base_dir_ + "/" + comm.secret_file;
        }
      } else if (name == "rank") {
        int64_t r;
        if (integer(v, key, 0, INT32_MAX, &r)) comm.rank = int32_t(r);
      } else if (name == "world_size") {
        int64_t w;
        if (integer(v, key, 1, INT32_MAX, &w)) comm.world_size = int32_t(w);
      } else if (name == "options") {
        comm.options_at = at(v);
        read_options(v, key, "", comm.options);
      } else if (name == "bucket_check") {
        read_bucket_check(v, key, comm);
      } else if (name == "lanes") {
        int64_t n;
        if (integer(v, key, 1, kMaxLanes, &n)) comm.lanes = int32_t(n);
      } else {
        unknown(kv.first, key, std::string("unknown key (expected ") + kCommKeys + ")");
      }
    }
    if (comm.rank >= 0 && comm.world_size > 0 && comm.rank >= comm.world_size)
      problem(node, "comm.rank",
              "is " + std::to_string(comm.rank) + ", not below world_size " +
                  std::to_string(comm.world_size));
  }

  void read_bucket_check(const YAML::Node& node, const std::string& key, CommSpec& comm) {
    std::string text;
    if (scalar(node, key, &text) && !parse_bucket_check(text, &comm.bucket_check))
      problem(node, key, "'" + text + "' is not a bucket check: use auto, strict or off");
  }

  void read_hook(const YAML::Node& node, const std::string& key, HookSpec& hook) {
    hook.key = key;
    hook.at = at(node);
    if (!expect_map(node, key, "family, name, options, wrap")) return;
    bool has_family = false, has_name = false;
    for (const auto& kv : node) {
      const std::string name = key_text(kv.first);
      const std::string sub = key + "." + name;
      const YAML::Node& v = kv.second;
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
        unknown(kv.first, sub, "unknown key (expected family, name, options, wrap)");
      }
    }
    if (!has_family || hook.family.empty())
      problem(node, key + ".family", "missing: which plugin family holds the hook");
    if (!has_name || hook.name.empty())
      problem(node, key + ".name", "missing: which hook of the family to run");
  }

  void read_rules(const YAML::Node& node, Config& config) {
    if (node.IsNull()) return;
    if (!node.IsSequence()) {
      problem(node, "rules", "expects a list of {when: {max_bytes: N}, hook: {...}}");
      return;
    }
    for (size_t i = 0; i < node.size(); ++i) {
      const YAML::Node& entry = node[i];
      const std::string key = "rules[" + std::to_string(i) + "]";
      RuleSpec rule;
      rule.at = at(entry);
      if (!expect_map(entry, key, "when, hook")) continue;
      bool has_when = false, has_hook = false;
      for (const auto& kv : entry) {
        const std::string name = key_text(kv.first);
        if (name == "when") {
          has_when = true;
          read_when(kv.second, key + ".when", rule);
        } else if (name == "hook") {
          has_hook = true;
          read_hook(kv.second, key + ".hook", rule.hook);
        } else {
          unknown(kv.first, key + "." + name, "unknown key (expected when, hook)");
        }
      }
      if (!has_when) problem(entry, key + ".when", "missing: e.g. when: {max_bytes: 1048576}");
      if (!has_hook) problem(entry, key + ".hook", "missing: the hook for matching buckets");
      config.rules.push_back(std::move(rule));
    }
  }

  void read_when(const YAML::Node& node, const std::string& key, RuleSpec& rule) {
    if (!expect_map(node, key, "max_bytes")) return;
    bool has_max = false;
    for (const auto& kv : node) {
      const std::string name = key_text(kv.first);
      if (name == "max_bytes") {
        int64_t v;
        if (integer(kv.second, key + ".max_bytes", 0, INT64_MAX, &v)) {
          rule.max_bytes = uint64_t(v);
          has_max = true;
        }
      } else {
        unknown(kv.first, key + "." + name, "unknown condition (expected max_bytes)");
      }
    }
    if (!has_max && node.size() == 0) problem(node, key + ".max_bytes", "missing");
  }
};

}  // namespace

Config parse_config_text(const std::string& text, Problems& problems) {
  // YAML text has no file: a relative plugin path is an error.
  return Parser("<yaml text>", "", problems).parse(text);
}

Config parse_config_file(const std::string& path, Problems& problems) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    problems.add(Location{path}, "", DDPH_NOT_FOUND, "cannot read the config file");
    Config config;
    config.source = path;
    return config;
  }
  // A directory opens like a file and reads as nothing: say so, rather than
  // "the file is empty". peek() sets badbit when the read itself fails.
  errno = 0;
  in.peek();
  if (in.bad()) {
    problems.add(
        Location{path}, "", DDPH_INVALID_ARGUMENT,
        errno == EISDIR ? "is a directory, not a config file" : "cannot read the config file");
    Config config;
    config.source = path;
    return config;
  }
  std::stringstream text;
  text << in.rdbuf();
  return Parser(path, parent_directory(path), problems).parse(text.str());
}

}  // namespace loader
}  // namespace ddph
