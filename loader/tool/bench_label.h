// The name a job file's hook chain goes by in `ddph bench` and `ddph train`
// output: "family/name", a wrapper as "outer(inner)", and per-bucket rules
// after a '|': "default/fp16_compress | <=65536B: default/allreduce".
#pragma once

#include <string>

namespace ddph_tool {

// Throws std::runtime_error with the loader's file:line messages if the
// file cannot be read as a job file.
std::string hook_label(const std::string& config_path);

}  // namespace ddph_tool
