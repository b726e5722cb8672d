// `ddph validate [--load-plugins] FILE.yaml [more files]`: every check a
// session makes before connecting. Plugins from the job's plugin_path or
// DDPH_PLUGIN_PATH are opened (their code run) only with --load-plugins, so
// that validating a job folder from someone else runs nothing of theirs.
// Exit 0 when all files are fine, 1 on any problem, 2 on usage, 3 when no
// problem was found but some families were not checked.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "loader/job.h"
#include "loader/tool/commands.h"

namespace ddph_tool {
namespace {

void usage(FILE* out) {
  std::fprintf(out,
               "usage: ddph validate [--load-plugins] FILE.yaml [FILE.yaml ...]\n"
               "Checks each file against the schemas of the plugins it names, without\n"
               "connecting. Prints 'FILE: ok' or every problem, one per line.\n"
               "Built-in families (those shipped with ddph) are loaded. Families from the\n"
               "file's plugin_path or from DDPH_PLUGIN_PATH are not: loading a plugin runs\n"
               "its code. Their hooks and options are reported as not checked, and the rest\n"
               "of the file is still checked.\n"
               "  --load-plugins  load those families too (runs their code) and check them\n"
               "Exit status: 0 all ok, 1 a problem in some file, 2 usage error,\n"
               "3 no problem, but some families not checked (pass --load-plugins).\n");
}

}  // namespace

int cmd_validate(int argc, char** argv) {
  std::vector<std::string> files;
  bool load_plugins = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return 0;
    }
    if (std::strcmp(argv[i], "--load-plugins") == 0) {
      load_plugins = true;
      continue;
    }
    if (argv[i][0] == '-' && argv[i][1] != '\0') {
      std::fprintf(stderr, "ddph validate: unknown option '%s'\n", argv[i]);
      usage(stderr);
      return 2;
    }
    files.push_back(argv[i]);
  }
  if (files.empty()) {
    std::fprintf(stderr, "ddph validate: no file given\n");
    usage(stderr);
    return 2;
  }
  bool any_problem = false, any_unchecked = false;
  for (const std::string& file : files) {
    ddph::loader::JobCheck check;
    try {
      ddph::loader::ConfigSource source;
      source.path = file;
      check = ddph::loader::check_job(source, load_plugins);
    } catch (const std::exception& e) {
      check.problems.push_back(file + ": " + e.what());
    }
    for (const auto& u : check.not_checked)
      std::printf(
          "%s: %s: not checked: family '%s' comes from %s (%s); pass --load-plugins to "
          "load it (this runs its code) and check its hooks and options\n",
          ddph::loader::to_string(u.at).c_str(), u.key.c_str(), u.family.c_str(), u.file.c_str(),
          u.origin.c_str());
    any_unchecked |= !check.not_checked.empty();
    if (check.problems.empty()) {
      std::printf("%s: ok%s\n", file.c_str(),
                  check.not_checked.empty() ? "" : ", except the families not checked above");
    } else {
      any_problem = true;
      for (const std::string& p : check.problems) std::printf("%s\n", p.c_str());
    }
  }
  return any_problem ? 1 : any_unchecked ? 3 : 0;
}

}  // namespace ddph_tool
