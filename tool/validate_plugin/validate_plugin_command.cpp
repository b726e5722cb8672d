// `ddph validate-plugin LIB.so [LIB.so ...]`: the plugin contract, for
// authors of third-party plugins. Every check runs in a child process, so a
// plugin that crashes or hangs gets a FAIL row, not a crashed validator.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "conformance/plugin_checks.h"
#include "tool/cli.h"
#include "tool/commands.h"
#include "tool/json_line.h"

namespace ddph::tool {
namespace {

const char kDescription[] =
    "Checks a plugin shared object against the ddphooks plugin contract: loading,\n"
    "exported symbols, ABI version, struct sizes, file name, option schemas, and\n"
    "for every hook: create/destroy, buckets of 0, 1 and 1000 float32 elements on a\n"
    "world-of-one communicator (done exactly once), NaN/Inf, misuse, checkpoints;\n"
    "for every communicator factory: a world of one and every collective.\n"
    "Each check runs in its own process: a crash or a hang is a FAIL row.\n"
    "Exit 0: every check passed or was skipped; 1: a check failed.";

struct PluginCheckOptions {
  std::vector<std::string> files;
  double timeout_s = 20;
  bool verbose = false;
  bool json = false;
};

void print_json(const std::string& path, const std::vector<plugin_checks::Row>& rows, bool ok) {
  Json checks = Json::array();
  for (const auto& row : rows)
    checks.push_back({{"check", row.check},
                      {"hook", row.hook},
                      {"result", plugin_checks::status_name(row.status)},
                      {"detail", row.detail}});
  print_json_line({{"plugin", path}, {"ok", ok}, {"checks", std::move(checks)}});
}

void print_table(const std::string& path, const std::vector<plugin_checks::Row>& rows) {
  size_t wc = 5, wh = 4;
  for (const auto& r : rows) {
    wc = std::max(wc, r.check.size());
    wh = std::max(wh, r.hook.size());
  }
  std::printf("%s\n", path.c_str());
  std::printf("%-*s | %-*s | %-6s | %s\n", int(wc), "check", int(wh), "hook", "result", "detail");
  std::printf("%s-+-%s-+-%s-+-%s\n", std::string(wc, '-').c_str(), std::string(wh, '-').c_str(),
              std::string(6, '-').c_str(), std::string(6, '-').c_str());
  int fails = 0, skips = 0;
  for (const auto& r : rows) {
    std::printf("%-*s | %-*s | %-6s | %s\n", int(wc), r.check.c_str(), int(wh), r.hook.c_str(),
                plugin_checks::status_name(r.status), r.detail.c_str());
    fails += r.status == plugin_checks::Status::kFail;
    skips += r.status == plugin_checks::Status::kSkip;
  }
  std::printf("%d checks: %d passed, %d failed, %d skipped\n\n", int(rows.size()),
              int(rows.size()) - fails - skips, fails, skips);
}

int run_validate_plugin(const PluginCheckOptions& o) {
  plugin_checks::ValidateOptions opt;
  opt.timeout_s = o.timeout_s;
  opt.keep_output = o.verbose;
  const bool json = o.json;
  const std::vector<std::string>& files = o.files;
  if (files.empty()) {
    std::fprintf(stderr,
                 "ddph validate-plugin: no plugin file given (ddph validate-plugin LIB.so)\n");
    return kExitUsage;
  }
  bool all_ok = true;
  for (const std::string& f : files) {
    const std::vector<plugin_checks::Row> rows = plugin_checks::validate_plugin(f, opt);
    bool ok = true;
    for (const auto& r : rows) ok = ok && r.status != plugin_checks::Status::kFail;
    all_ok = all_ok && ok;
    if (json)
      print_json(f, rows, ok);
    else
      print_table(f, rows);
    std::fflush(stdout);
  }
  return all_ok ? kExitOk : kExitFailed;
}

}  // namespace

void add_validate_plugin_command(CLI::App& root, int* exit_code) {
  auto o = std::make_shared<PluginCheckOptions>();
  CLI::App* cmd = add_command(root, "validate-plugin", "check a plugin .so against the contract",
                              kDescription, o, run_validate_plugin, exit_code);
  // Checked in run_validate_plugin, so that a misspelt flag is named first.
  cmd->add_option("plugins", o->files, "plugin shared objects")->type_name("LIB.so");
  add_real(cmd, "--timeout", &o->timeout_s, "seconds per check before it counts as hung", "SECONDS",
           0.001, 86400.0);
  cmd->add_flag("--verbose", o->verbose, "let the plugin's own output through (stderr)");
}

}  // namespace ddph::tool
