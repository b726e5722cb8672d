// `ddph validate [--load-plugins] [--json] FILE.yaml [more files]`: every check a
// session makes before connecting. Plugins from the job's plugin_path or
// DDPH_PLUGIN_PATH are opened (their code run) only with --load-plugins, so
// that validating a job folder from someone else runs nothing of theirs.
// Exit 0 when all files are fine, 1 on any problem, 2 on usage, 3 when no
// problem was found but some families were not checked.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "loader/job/config.h"
#include "loader/job/job.h"
#include "tool/cli.h"
#include "tool/commands.h"
#include "tool/json_line.h"

namespace ddph::tool {
namespace {

const char kDescription[] =
    "Checks each file against the schemas of the plugins it names, without\n"
    "connecting. Prints 'FILE: ok' or every problem, one per line (--json: one\n"
    "object per file). Built-in families (those shipped with ddph) are loaded.\n"
    "Families from the file's plugin_path or from DDPH_PLUGIN_PATH are not: loading a\n"
    "plugin runs its code. Their hooks and options are reported as not checked, and\n"
    "the rest of the file is still checked. Exit 3: no problem, but some families\n"
    "not checked (pass --load-plugins).";

struct ValidateOptions {
  std::vector<std::string> files;    // positional
  std::vector<std::string> configs;  // --config, the spelling train and bench use
  bool load_plugins = false;
  bool json = false;
};

using ddph::loader::printable;

int run_validate(const ValidateOptions& o) {
  std::vector<std::string> files = o.configs;
  files.insert(files.end(), o.files.begin(), o.files.end());
  if (files.empty()) {
    std::fprintf(stderr, "ddph validate: no file given (ddph validate FILE.yaml, or --config)\n");
    return kExitUsage;
  }
  bool any_problem = false, any_unchecked = false;
  for (const std::string& file : files) {
    ddph::loader::JobCheck check;
    try {
      ddph::loader::ConfigSource source;
      source.path = file;
      check = ddph::loader::check_job(source, o.load_plugins);
    } catch (const std::exception& e) {
      check.problems.push_back(printable(file + ": " + e.what()));
    }
    // Keys, families and files come from the YAML: printable, as the problems are.
    std::vector<std::string> unchecked;
    for (const auto& u : check.not_checked)
      unchecked.push_back(printable(ddph::loader::to_string(u.at) + ": " + u.key + ": family '" +
                                    u.family + "' comes from " + u.file + " (" + u.origin + ")"));
    any_unchecked |= !check.not_checked.empty();
    any_problem |= !check.problems.empty();
    if (o.json) {
      print_json_line({{"file", file},
                       {"ok", check.problems.empty()},
                       {"problems", check.problems},
                       {"not_checked", unchecked}});
      continue;
    }
    for (const auto& u : check.not_checked)
      std::printf(
          "%s: not checked: family '%s' comes from %s (%s); pass --load-plugins to "
          "load it (this runs its code) and check its hooks and options\n",
          printable(ddph::loader::to_string(u.at) + ": " + u.key).c_str(),
          printable(u.family).c_str(), printable(u.file).c_str(), u.origin.c_str());
    if (check.problems.empty()) {
      std::printf("%s: ok%s\n", printable(file).c_str(),
                  check.not_checked.empty() ? "" : ", except the families not checked above");
    } else {
      for (const std::string& p : check.problems) std::printf("%s\n", p.c_str());
    }
  }
  return any_problem ? kExitFailed : any_unchecked ? kExitPartial : kExitOk;
}

}  // namespace

void add_validate_command(CLI::App& root, int* exit_code) {
  auto o = std::make_shared<ValidateOptions>();
  CLI::App* cmd = add_command(root, "validate", "check YAML job files without connecting",
                              kDescription, o, run_validate, exit_code);
  cmd->add_option("files", o->files, "YAML job files")->type_name("FILE.yaml");
  cmd->add_option("--config", o->configs, "a YAML job file (repeatable; same as a FILE)")
      ->type_name("FILE.yaml");
  cmd->add_flag("--load-plugins", o->load_plugins,
                "load families from plugin_path and DDPH_PLUGIN_PATH too (runs their code)");
}

}  // namespace ddph::tool
