// ddph: the command-line tool. One CLI11 app; each sub-command lives in a
// folder of its own beside this file and adds itself (tool/commands.h).
#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "tool/cli.h"
#include "tool/commands.h"

namespace {

const char kExitCodes[] =
    "Exit status of every command: 0 success; 1 the command failed; 2 a usage error "
    "(nothing ran);\n3 a partial answer (validate: families left unchecked; train: "
    "replicas differ;\nlab and --link: no network lab on this machine).";

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("ddph: gradient communication hooks for data-parallel training", "ddph");
  app.set_version_flag("--version", ddph::tool::version_text(),
                       "print the package and ABI version");
  app.require_subcommand(1);
  app.footer(kExitCodes);
  int exit_code = ddph::tool::kExitOk;
  ddph::tool::add_plugins_command(app, &exit_code);
  ddph::tool::add_validate_command(app, &exit_code);
  ddph::tool::add_bench_command(app, &exit_code);
  ddph::tool::add_train_command(app, &exit_code);
  ddph::tool::add_validate_plugin_command(app, &exit_code);
  ddph::tool::add_lab_command(app, &exit_code);
  ddph::tool::add_choose_command(app, &exit_code);
  std::string names;
  bool known = argc < 2 || argv[1][0] == '-';
  for (CLI::App* cmd : app.get_subcommands({})) {
    cmd->footer(cmd->get_footer() + "\n\n" + kExitCodes);
    names += (names.empty() ? "" : ", ") + cmd->get_name();
    known = known || cmd->get_name() == argv[1];
  }
  if (argc > 1 && std::string(argv[1]) == "help") {
    std::printf("%s", app.help().c_str());
    return ddph::tool::kExitOk;
  }
  // CLI11 would call a misspelt command "an argument not expected".
  if (!known) {
    std::fprintf(stderr, "ddph: unknown command '%s' (commands: %s; ddph --help)\n", argv[1],
                 names.c_str());
    return ddph::tool::kExitUsage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" that succeed; every other parse
    // error is a usage error, whatever CLI11's own code for it.
    return app.exit(e) == 0 ? ddph::tool::kExitOk : ddph::tool::kExitUsage;
  }
  // Output that did not arrive is a failure, not a success: a full disk, or
  // stdout sent to /dev/full (the files the commands write are checked by
  // tool/output_file.h).
  // An earlier failed write's reason is gone by now; a failing last flush
  // still has its own.
  const bool flushed = std::fflush(stdout) == 0;
  if (!flushed || std::ferror(stdout)) {
    std::fprintf(stderr, "ddph: cannot write standard output: %s; output was lost\n",
                 flushed ? "a write to it failed" : std::strerror(errno));
    if (exit_code == ddph::tool::kExitOk) exit_code = ddph::tool::kExitFailed;
  }
  return exit_code;
}
