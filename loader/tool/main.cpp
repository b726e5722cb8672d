// ddph: the command-line tool. Dispatches to one subcommand per file.
#include <cstdio>
#include <cstring>

#include "loader/tool/commands.h"

namespace {

struct Command {
  const char* name;
  int (*run)(int, char**);
  const char* summary;
};

const Command kCommands[] = {
    {"plugins", &ddph_tool::cmd_plugins, "list plugin families, their hooks and options"},
    {"validate", &ddph_tool::cmd_validate, "check YAML job files without connecting"},
    {"bench", &ddph_tool::cmd_bench, "time hooks on N local ranks over Gloo"},
    {"train", &ddph_tool::cmd_train, "run the data-parallel training job"},
    {"validate-plugin", &ddph_tool::cmd_validate_plugin, "check a plugin .so against the contract"},
    {"lab", &ddph_tool::cmd_lab, "run a command per rank, each on its own shaped network link"},
};

void usage(FILE* out) {
  std::fprintf(out, "usage: ddph <command> [options]   (ddph <command> --help for details)\n\n");
  std::fprintf(out, "commands:\n");
  for (const Command& c : kCommands) std::fprintf(out, "  %-15s %s\n", c.name, c.summary);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  const char* name = argv[1];
  if (std::strcmp(name, "--help") == 0 || std::strcmp(name, "-h") == 0 ||
      std::strcmp(name, "help") == 0) {
    usage(stdout);
    return 0;
  }
  for (const Command& c : kCommands)
    if (std::strcmp(name, c.name) == 0) return c.run(argc - 1, argv + 1);
  std::fprintf(stderr, "ddph: unknown command '%s'\n\n", name);
  usage(stderr);
  return 2;
}
