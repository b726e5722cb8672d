#include "tool/cli.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "ddph/ddph.h"

#ifndef DDPH_PACKAGE_VERSION
#error "the build defines DDPH_PACKAGE_VERSION (the CMake project's version)"
#endif

namespace ddph::tool {

using uchar = unsigned char;

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

namespace {

// "1", "0.001", "1e+06": a bound as a user would write it.
std::string bound_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

CLI::Validator real_in(double min, double max) {
  const std::string range = "from " + bound_text(min) + " to " + bound_text(max);
  return CLI::Validator(
      [min, max, range](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        const double v = text.empty() ? 0 : std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size() || std::isspace(uchar(text[0])))
          return "'" + text + "' is not a number (" + range + ")";
        if (!std::isfinite(v)) return "'" + text + "' is not a finite number (" + range + ")";
        if (v < min || v > max) return "'" + text + "' is not " + range;
        return std::string();
      },
      "in [" + bound_text(min) + ", " + bound_text(max) + "]");
}

CLI::Option* add_real(CLI::App* cmd, const std::string& flag, double* value,
                      const std::string& help, const std::string& type_name, double min,
                      double max) {
  CLI::Option* o = cmd->add_option(flag, *value, help)->check(real_in(min, max));
  if (!type_name.empty()) o->type_name(type_name);
  return o->capture_default_str();
}

CLI::Option* add_rank_flags(CLI::App* cmd, int* rank, std::string* rendezvous,
                            const std::string& rank_help, int64_t max_rank) {
  CLI::Option* o =
      cmd->add_option("--rank", *rank, rank_help)->type_name("R")->check(whole_in(0, max_rank));
  cmd->add_option("--rendezvous", *rendezvous,
                  "with --rank: the job's rendezvous URL (file:///dir, redis://host:port, "
                  "tcp://host:port, env://)")
      ->type_name("URL")
      ->check(non_empty());
  return o;
}

CLI::Validator whole_in(int64_t min, uint64_t max) {
  const std::string range = "from " + std::to_string(min) + " to " + std::to_string(max);
  return CLI::Validator(
      [min, max, range](std::string& text) -> std::string {
        const bool negative = !text.empty() && text[0] == '-';
        const size_t digits = negative || (!text.empty() && text[0] == '+') ? 1 : 0;
        bool ok = text.size() > digits;
        for (size_t i = digits; i < text.size(); ++i) ok = ok && std::isdigit(uchar(text[i]));
        if (!ok) return "'" + text + "' is not a whole number (" + range + ")";
        errno = 0;
        if (negative) {
          const long long v = std::strtoll(text.c_str(), nullptr, 10);
          if (errno == ERANGE || v < min) return "'" + text + "' is not " + range;
          text = std::to_string(v);
        } else {
          const unsigned long long v = std::strtoull(text.c_str() + digits, nullptr, 10);
          if (errno == ERANGE || v > max || (min > 0 && v < uint64_t(min)))
            return "'" + text + "' is not " + range;
          text = std::to_string(v);
        }
        return std::string();
      },
      "in [" + std::to_string(min) + ", " + std::to_string(max) + "]");
}

CLI::Validator non_empty() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        return text.empty() ? std::string("an empty value is not allowed") : std::string();
      },
      "");
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
      throw CLI::ValidationError(flag, "'" + text + "' is not between 1B and 64GiB");
    // A fraction of a byte means nothing (0.1B was read as no bytes at all);
    // a fraction of a larger unit is rounded to the byte (0.1MiB: 104858B).
    if (u.bytes == 1.0 && bytes != std::floor(bytes))
      throw CLI::ValidationError(flag, "'" + text + "' is not a whole number of bytes");
    const int64_t rounded = static_cast<int64_t>(std::llround(bytes));
    if (rounded < 1)
      throw CLI::ValidationError(flag, "'" + text + "' is less than a byte (at least 1B)");
    return rounded;
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

std::string format_mib(double bytes, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f MiB", decimals, bytes / 1048576.0);
  return buf;
}

std::string count_of(long long n, const char* singular) {
  return std::to_string(n) + " " + singular + (n == 1 ? "" : "s");
}

}  // namespace ddph::tool
