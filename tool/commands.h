// The ddph tool's sub-commands. Each adds itself to the root CLI11 app;
// when it is the one chosen, its callback runs it and stores the process
// exit code (tool/cli.h) in *exit_code.
#pragma once

#include <CLI/CLI.hpp>

namespace ddph::tool {

void add_plugins_command(CLI::App& root, int* exit_code);   // families, hooks, options
void add_validate_command(CLI::App& root, int* exit_code);  // YAML job files, no connection
void add_bench_command(CLI::App& root, int* exit_code);     // time hooks on N local ranks
void add_train_command(CLI::App& root, int* exit_code);     // the data-parallel demo job
// The plugin contract on one .so.
void add_validate_plugin_command(CLI::App& root, int* exit_code);
// Any command once per rank, each rank on its own shaped link.
void add_lab_command(CLI::App& root, int* exit_code);
// The hook an auto hook would choose for the link, as a job file.
void add_choose_command(CLI::App& root, int* exit_code);

}  // namespace ddph::tool
