// A job: a parsed config checked against the plugins it names, ready to be
// turned into a session. Building one loads plugins but connects nothing.
#pragma once

#include <ddph/ddph.h>

#include <memory>
#include <string>
#include <vector>

#include "core/options.h"
#include "loader/config.h"
#include "loader/registry.h"

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

struct Job {
  std::shared_ptr<Registry> registry;  // keeps every plugin below loaded
  Config config;
  ResolvedComm comm;
  std::unique_ptr<ResolvedHook> hook;
  std::vector<ResolvedRule> rules;
};

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
// when the config is fine). For `ddph validate`.
std::vector<std::string> check_job(const ConfigSource& source);

}  // namespace loader
}  // namespace ddph
