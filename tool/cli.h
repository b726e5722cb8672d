// What every `ddph` sub-command shares: the CLI11 app it hangs from,
// --json and --version on each, one spelling for sizes, one way to print
// numbers, and the exit codes (JSON lines: json_line.h).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
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

// add_command with the command's --help footer, whose callback stores
// run(*options) in *exit_code; Options has the `bool json` of --json.
template <class Options, class Run>
CLI::App* add_command(CLI::App& root, const std::string& name, const std::string& summary,
                      const char* footer, std::shared_ptr<Options> options, Run run,
                      int* exit_code) {
  CLI::App* cmd = add_command(root, name, summary, &options->json);
  cmd->footer(footer);
  cmd->callback([options, run, exit_code] { *exit_code = run(*options); });
  return cmd;
}

// The one check of every number a flag takes, so that no flag lets NaN,
// infinity, a wrapped negative or a fraction through (CLI11's Range passes
// NaN: every comparison with it is false; its unsigned conversion reads -1
// as 2^64-1). Each refuses with "--flag: 'text' is not ... from MIN to MAX".
// A real number, finite, in [min, max].
CLI::Validator real_in(double min, double max);
// A whole decimal number in [min, max]; max may be 2^64-1 (a seed). The
// value is handed on in plain decimal, so "010" is ten, not CLI11's octal 8.
CLI::Validator whole_in(int64_t min, uint64_t max);
// A string flag whose empty value would otherwise be silently ignored.
CLI::Validator non_empty();

// A flag of a whole number (whole_in) or a real one (real_in) in [min,
// max], its default shown in --help; type_name names its value there ("N";
// empty: CLI11's own).
template <class T>
CLI::Option* add_whole(CLI::App* cmd, const std::string& flag, T* value, const std::string& help,
                       const std::string& type_name, int64_t min, uint64_t max) {
  CLI::Option* o = cmd->add_option(flag, *value, help)->check(whole_in(min, max));
  if (!type_name.empty()) o->type_name(type_name);
  return o->capture_default_str();
}
CLI::Option* add_real(CLI::App* cmd, const std::string& flag, double* value,
                      const std::string& help, const std::string& type_name, double min,
                      double max);

// One rank of a job started by hand: --rank R (R from 0 to max_rank) and
// --rendezvous URL, as `ddph train` and `ddph choose` take them (checked
// against each other by check_rank_flags, tool/ranks/launchers.h).
// Returns --rank's option, whose count() says whether it was given.
CLI::Option* add_rank_flags(CLI::App* cmd, int* rank, std::string* rendezvous,
                            const std::string& rank_help, int64_t max_rank);

// The job files a command reads, given as positional arguments (named
// positional) or as --config: bench takes lists, train one of each.
template <class T>
void add_config_files(CLI::App* cmd, const std::string& positional, T* positional_value,
                      const std::string& positional_help, T* config,
                      const std::string& config_help) {
  cmd->add_option(positional, *positional_value, positional_help)
      ->type_name("FILE.yaml")
      ->check(non_empty());
  cmd->add_option("--config", *config, config_help)->type_name("FILE.yaml")->check(non_empty());
}

// A size given as a number and a binary unit: "25MiB", "0.5MiB", "64KiB",
// "4096B". Returns bytes, rounded to the byte (0.1MiB: 104858); throws
// CLI::ValidationError naming flag for NaN, over 64GiB, a fraction of a
// byte in B (0.1B) or less than a byte in all.
int64_t parse_size(const std::string& text, const std::string& flag);
// A byte count as a size parse_size reads back: "25MiB", "64KiB", "100B".
std::string format_size(int64_t bytes);
// A byte count as the tool prints it, in binary mebibytes with its unit:
// "25.00 MiB" (2^20 bytes; docs/cli.md, "Units"). Every size the tool
// prints goes through this, so that no output says "MB" for either unit.
std::string format_mib(double bytes, int decimals = 2);

// "1 rank", "2 ranks".
std::string count_of(long long n, const char* singular);

}  // namespace ddph::tool
