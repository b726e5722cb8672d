// The ddph tool's subcommands. Each takes the arguments after its own name
// (argv[0] is the subcommand) and returns the process exit code.
#pragma once

namespace ddph_tool {

int cmd_plugins(int argc, char** argv);   // list families, hooks, options
int cmd_validate(int argc, char** argv);  // check a YAML file; non-zero on any problem
int cmd_bench(int argc, char** argv);     // time hooks on N local ranks over Gloo
int cmd_train(int argc, char** argv);     // the main job: data-parallel MLP training
// The plugin contract on one .so; non-zero on a FAIL.
int cmd_validate_plugin(int argc, char** argv);
// Any command once per rank, each rank on its own shaped link.
int cmd_lab(int argc, char** argv);

}  // namespace ddph_tool
