// A job: a parsed config checked against the plugins it names, ready to be
// turned into a session. Building one loads plugins but connects nothing.
#pragma once

#include <ddph/ddph.h>

#include <memory>
#include <string>
#include <vector>

#include "core/base/options.h"
#include "loader/auto/candidates.h"
#include "loader/job/config.h"
#include "loader/registry/registry.h"

namespace ddph {
namespace loader {

// One element of a hook chain: the hook, its typed options, and the hook it
// wraps (innermost last).
struct ResolvedHook {
  const Plugin* plugin = nullptr;
  const ddph_hook_t* hook = nullptr;
  OptionList options;
  std::unique_ptr<ResolvedHook> inner;
};

struct ResolvedComm {
  bool host_provided = false;  // backend: host
  const Plugin* plugin = nullptr;
  const ddph_comm_factory_t* factory = nullptr;
  OptionList options;
};

struct ResolvedRule {
  uint64_t max_bytes = 0;
  std::unique_ptr<ResolvedHook> hook;
};

// `hook: {family: auto}`: the chooser's settings and one chain per
// candidate, in the order `candidates` names them.
struct ResolvedAuto {
  AutoSettings settings;
  std::vector<CandidateSpec> specs;
  std::vector<std::unique_ptr<ResolvedHook>> candidates;
  std::vector<CandidateInfo> infos() const;
};

struct Job {
  std::shared_ptr<Registry> registry;  // keeps every plugin below loaded
  Config config;
  ResolvedComm comm;
  std::unique_ptr<ResolvedHook> hook;         // NULL for an auto hook
  std::unique_ptr<ResolvedAuto> auto_choice;  // NULL unless hook.family is auto
  std::vector<ResolvedRule> rules;
};

// The chain of `hook`, or an auto hook's first candidate: every candidate
// takes buckets the same way (load_job checks it), so what a tool reads of
// the hook's flags holds for all of them.
const ResolvedHook& main_hook(const Job& job);

// Where a job comes from: a file path, or YAML text.
struct ConfigSource {
  std::string path;
  std::string text;
  bool is_text = false;
};

// Parses and validates everything except connecting: YAML shape, plugin
// families, hooks, comm backend, every option, wrap use. Collects all
// problems and throws one ddph::Error listing them, one per line (coded as
// the first problem).
Job load_job(const ConfigSource& source);

// The same checks, returning the problem lines instead of throwing (empty
// when the config is fine). Opens every plugin the job names, as a session
// would.
std::vector<std::string> check_job(const ConfigSource& source);

// A family that a check did not open because its file comes from the job's
// plugin_path or DDPH_PLUGIN_PATH, not from the folders the loader ships with:
// opening a plugin runs its code (constructors, ddph_plugin_entry).
struct UncheckedFamily {
  Location at;      // where the YAML names it
  std::string key;  // "hook.family", "comm.backend", ...
  std::string family;
  std::string file;    // the file a session would open
  std::string origin;  // "plugin_path" or "DDPH_PLUGIN_PATH"
};

struct JobCheck {
  std::vector<std::string> problems;
  std::vector<UncheckedFamily> not_checked;  // each family once
};

// check_job for `ddph validate`: with open_outside_plugins false, only
// built-in families are opened; the hooks and options of the others go
// unchecked and are listed in not_checked. Everything else is checked.
JobCheck check_job(const ConfigSource& source, bool open_outside_plugins);

}  // namespace loader
}  // namespace ddph
