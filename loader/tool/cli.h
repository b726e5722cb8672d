// What every `ddph` sub-command shares: the CLI11 app it hangs from,
// --json and --version on each, one spelling for sizes, one way to print
// numbers, and the exit codes (JSON lines: json_line.h).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

namespace ddph::tool {

// Exit codes of every sub-command (docs/cli.md lists them).
constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;  // the command ran and something failed
constexpr int kExitUsage = 2;   // bad flags or arguments; nothing ran
// The command ran but its answer is partial: `validate` left families
// unchecked, `train` ended with replicas that differ, `lab`/`bench --link`
// found no network lab on this machine.
constexpr int kExitPartial = 3;

// "ddph 0.1.0 (ABI 1.5)": the package and the C ABI it speaks.
std::string version_text();

// Adds sub-command `name` to root with -h/--help, --version and --json
// (bound to *json when json is not null).
CLI::App* add_command(CLI::App& root, const std::string& name, const std::string& summary,
                      bool* json);

// A size given as a number and a binary unit: "25MiB", "0.5MiB", "64KiB",
// "4096B". Returns bytes; throws CLI::ValidationError naming flag.
int64_t parse_size(const std::string& text, const std::string& flag);
// A byte count as a size parse_size reads back: "25MiB", "64KiB", "100B".
std::string format_size(int64_t bytes);

// "1 rank", "2 ranks".
std::string count_of(long long n, const char* singular);

}  // namespace ddph::tool
