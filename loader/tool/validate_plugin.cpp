// `ddph validate-plugin LIB.so [LIB.so ...]`: the plugin contract, for
// authors of third-party plugins. Every check runs in a child process, so a
// plugin that crashes or hangs gets a FAIL row, not a crashed validator.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "loader/tool/commands.h"
#include "loader/tool/validate_plugin_checks.h"

namespace ddph_tool {
namespace {

void usage(FILE* out) {
  std::fprintf(
      out,
      "usage: ddph validate-plugin [--timeout S] [--json] [--verbose] LIB.so [LIB.so ...]\n"
      "Checks a plugin shared object against the ddphooks plugin contract: loading,\n"
      "exported symbols, ABI version, struct sizes, file name, option schemas, and\n"
      "for every hook: create/destroy, buckets of 0, 1 and 1000 float32 elements on a\n"
      "world-of-one communicator (done exactly once), NaN/Inf, misuse, checkpoints;\n"
      "for every communicator factory: a world of one and every collective.\n"
      "Each check runs in its own process: a crash or a hang is a FAIL row.\n"
      "  --timeout S  seconds per check before it counts as hung (default 20)\n"
      "  --json       one JSON object per plugin instead of the table\n"
      "  --verbose    let the plugin's own output through (stderr)\n"
      "Exit status: 0 every check passed or was skipped, 1 a check failed, 2 usage.\n");
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", c);
      out += esc;
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

void print_json(const std::string& path, const std::vector<ddph_validate::Row>& rows, bool ok) {
  std::printf("{\"plugin\": %s, \"ok\": %s, \"checks\": [", json_string(path).c_str(),
              ok ? "true" : "false");
  for (size_t i = 0; i < rows.size(); ++i)
    std::printf("%s\n  {\"check\": %s, \"hook\": %s, \"result\": \"%s\", \"detail\": %s}",
                i ? "," : "", json_string(rows[i].check).c_str(), json_string(rows[i].hook).c_str(),
                ddph_validate::status_name(rows[i].status), json_string(rows[i].detail).c_str());
  std::printf("]}\n");
}

void print_table(const std::string& path, const std::vector<ddph_validate::Row>& rows) {
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
                ddph_validate::status_name(r.status), r.detail.c_str());
    fails += r.status == ddph_validate::Status::kFail;
    skips += r.status == ddph_validate::Status::kSkip;
  }
  std::printf("%d checks: %d passed, %d failed, %d skipped\n\n", int(rows.size()),
              int(rows.size()) - fails - skips, fails, skips);
}

}  // namespace

int cmd_validate_plugin(int argc, char** argv) {
  ddph_validate::ValidateOptions opt;
  bool json = false;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      usage(stdout);
      return 0;
    } else if (a == "--json") {
      json = true;
    } else if (a == "--verbose") {
      opt.keep_output = true;
    } else if (a == "--timeout" && i + 1 < argc) {
      char* end = nullptr;
      opt.timeout_s = std::strtod(argv[++i], &end);
      if (*end != '\0' || !(opt.timeout_s > 0 && opt.timeout_s < 86400)) {
        std::fprintf(stderr, "ddph validate-plugin: --timeout wants seconds > 0, got '%s'\n",
                     argv[i]);
        return 2;
      }
    } else if (a[0] == '-') {
      std::fprintf(stderr, "ddph validate-plugin: unknown option '%s'\n", a.c_str());
      usage(stderr);
      return 2;
    } else {
      files.push_back(a);
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "ddph validate-plugin: no plugin file given\n");
    usage(stderr);
    return 2;
  }
  bool all_ok = true;
  for (const std::string& f : files) {
    const std::vector<ddph_validate::Row> rows = ddph_validate::validate_plugin(f, opt);
    bool ok = true;
    for (const auto& r : rows) ok = ok && r.status != ddph_validate::Status::kFail;
    all_ok = all_ok && ok;
    if (json)
      print_json(f, rows, ok);
    else
      print_table(f, rows);
    std::fflush(stdout);
  }
  return all_ok ? 0 : 1;
}

}  // namespace ddph_tool
