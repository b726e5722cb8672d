#include "loader/tool/cli.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "ddph/ddph.h"

#ifndef DDPH_PACKAGE_VERSION
#error "the build defines DDPH_PACKAGE_VERSION (the CMake project's version)"
#endif

namespace ddph::tool {

std::string version_text() {
  return std::string("ddph ") + DDPH_PACKAGE_VERSION + " (ABI " + ddph_version() + ")";
}

CLI::App* add_command(CLI::App& root, const std::string& name, const std::string& summary,
                      bool* json) {
  CLI::App* cmd = root.add_subcommand(name, summary);
  cmd->set_version_flag("--version", version_text(), "print the package and ABI version");
  if (json != nullptr) cmd->add_flag("--json", *json, "print JSON objects, one per line");
  return cmd;
}

int64_t parse_size(const std::string& text, const std::string& flag) {
  struct Unit {
    const char* name;
    double bytes;
  };
  static const Unit kUnits[] = {
      {"GiB", 1024.0 * 1024 * 1024}, {"MiB", 1024.0 * 1024}, {"KiB", 1024.0}, {"B", 1.0}};
  char* end = nullptr;
  const double number = std::strtod(text.c_str(), &end);
  const std::string unit = end ? std::string(end) : std::string();
  for (const Unit& u : kUnits) {
    if (unit != u.name || end == text.c_str()) continue;
    const double bytes = number * u.bytes;
    if (!(bytes >= 0 && bytes <= 64.0 * 1024 * 1024 * 1024))
      throw CLI::ValidationError(flag, "'" + text + "' is not between 0B and 64GiB");
    return static_cast<int64_t>(std::llround(bytes));
  }
  throw CLI::ValidationError(flag, "'" + text +
                                       "' is not a size: a number and one of B, KiB, MiB, GiB "
                                       "(e.g. 25MiB, 64KiB)");
}

std::string format_size(int64_t bytes) {
  if (bytes > 0 && bytes % (1024 * 1024) == 0) return std::to_string(bytes >> 20) + "MiB";
  if (bytes > 0 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + "KiB";
  return std::to_string(bytes) + "B";
}

std::string count_of(long long n, const char* singular) {
  return std::to_string(n) + " " + singular + (n == 1 ? "" : "s");
}

}  // namespace ddph::tool
