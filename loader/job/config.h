// The YAML job file, parsed into plain structs that remember where each value
// came from. Nothing here opens a plugin: that is job.h's step.
#pragma once

#include <ddph/ddph.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ddph {
namespace loader {

// A place in a YAML source; line and column are 1-based, 0 when unknown.
struct Location {
  std::string source;  // the file path, or "<yaml text>"
  int line = 0;
  int column = 0;
};

// "cfg.yaml:4:11" (or just the source when the position is unknown).
std::string to_string(const Location& at);

// text with what a terminal would act on made visible, so that a message
// quoting a YAML's keys and values shows them rather than obeying them: C0
// controls, DEL and bytes that are not UTF-8 as \xNN (a NUL as \x00, ESC as
// \x1b), C1 controls (U+0080..U+009F) as \u0080..\u009f. Other text, UTF-8
// included, is unchanged.
std::string printable(const std::string& text);

// Every problem found in a config, in the order found. Each line reads
// "<source>:<line>:<col>: <key>: <message>", made printable() (a key or
// value quoted in it may hold any byte). Only the first kMaxProblemLines
// are kept, each cut to kMaxProblemLineBytes, so that no input, however
// large, makes a message larger than about 200 KB.
class Problems {
 public:
  static constexpr size_t kMaxProblemLines = 100;
  static constexpr size_t kMaxProblemLineBytes = 2000;

  void add(const Location& at, const std::string& key, ddph_code_t code,
           const std::string& message);
  bool empty() const { return lines_.empty(); }
  // The kept lines, then "... and N more problems" when some were dropped.
  std::vector<std::string> lines() const;
  // All lines joined by '\n'.
  std::string text() const;
  // Throws ddph::Error with text(), coded as the first problem, if any.
  void throw_if_any() const;

 private:
  std::vector<std::string> lines_;
  size_t dropped_ = 0;
  ddph_code_t first_code_ = DDPH_OK;
};

// One option as written in YAML: a flattened name ("optimizer.lr") and the
// scalar's text, still untyped.
struct OptionValue {
  std::string name;
  std::string text;
  Location at;      // the value (type and range problems point here)
  Location key_at;  // the key (unknown-option problems point here)
};

struct HookSpec {
  std::string key;  // where it sits: "hook", "hook.wrap", "rules[1].hook"
  Location at;      // the hook's map
  std::string family, name;
  Location family_at, name_at;
  std::vector<OptionValue> options;
  Location options_at;
  std::unique_ptr<HookSpec> wrap;  // the inner hook, or NULL
};

struct RuleSpec {
  Location at;
  uint64_t max_bytes = 0;  // buckets of at most this many bytes match
  HookSpec hook;
};

constexpr int64_t kDefaultTimeoutMs = 300 * 1000;

// comm.bucket_check: how the ranks make sure they reduce the same buckets
// together (docs/config.md). auto: every bucket, at a small cost; strict:
// every bucket and every call a hook makes, before it runs; off: a bucket's
// layout when it is new or changes.
enum class BucketCheck { kAuto, kStrict, kOff };
const char* bucket_check_name(BucketCheck check);
// "auto", "strict" or "off"; false for anything else.
bool parse_bucket_check(const std::string& text, BucketCheck* out);

// Buckets of a stateless chain in flight at once (comm.lanes, DDPH_LANES).
constexpr int32_t kMaxLanes = 16;

struct CommSpec {
  Location at;
  std::string backend = "gloo";  // the embedded default
  Location backend_at;
  std::string rendezvous;  // empty: none given (the host's store, if any)
  Location rendezvous_at;
  int64_t timeout_ms = kDefaultTimeoutMs;
  int32_t rank = -1, world_size = -1;  // -1: not given
  BucketCheck bucket_check = BucketCheck::kAuto;
  int32_t lanes = -1;  // -1: not given (DDPH_LANES, else 2)
  std::string job;     // empty: not given (the host's, the environment's, or "default")
  Location job_at;
  std::string secret_file;  // empty: not given; relative entries already resolved
  Location secret_file_at;
  std::vector<OptionValue> options;
  Location options_at;
};

struct Config {
  std::string source;                    // file path or "<yaml text>"
  bool readable = false;                 // false: unreadable file or malformed YAML
  std::vector<std::string> plugin_path;  // relative entries already resolved
  // Built-in families that plugin_path or DDPH_PLUGIN_PATH may replace.
  std::vector<std::string> replace_builtin;
  CommSpec comm;
  HookSpec hook;
  std::vector<RuleSpec> rules;
};

// Parse a job file or YAML text. Problems of syntax and shape (unknown keys,
// missing family/name, bad timeout, bad rules) go to problems; the returned
// Config holds whatever could be read. A document past the limits of
// yaml_limits.h, or with an alias inside its own anchor, is one problem and
// is not read further.
Config parse_config_file(const std::string& path, Problems& problems);
Config parse_config_text(const std::string& text, Problems& problems);

// "500ms", "30s", "2m", "1h" or a plain number of seconds. False if malformed.
bool parse_duration_ms(const std::string& text, int64_t* ms);

}  // namespace loader
}  // namespace ddph
