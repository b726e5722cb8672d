// `ddph validate FILE.yaml [more files]`: every check a session makes before
// connecting. Exit 0 when all files are fine, 1 on any problem, 2 on usage.
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
               "usage: ddph validate FILE.yaml [FILE.yaml ...]\n"
               "Loads the plugins each file names and checks the whole file against their\n"
               "schemas without connecting. Prints 'FILE: ok' or every problem, one per line.\n"
               "Exit status: 0 all ok, 1 a problem in some file, 2 usage error.\n");
}

}  // namespace

int cmd_validate(int argc, char** argv) {
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return 0;
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
  int status = 0;
  for (const std::string& file : files) {
    std::vector<std::string> problems;
    try {
      ddph::loader::ConfigSource source;
      source.path = file;
      problems = ddph::loader::check_job(source);
    } catch (const std::exception& e) {
      problems.push_back(file + ": " + e.what());
    }
    if (problems.empty()) {
      std::printf("%s: ok\n", file.c_str());
    } else {
      status = 1;
      for (const std::string& p : problems) std::printf("%s\n", p.c_str());
    }
  }
  return status;
}

}  // namespace ddph_tool
