// Where the registry looks for plugin files, after any YAML plugin_path.
#pragma once

#include <string>
#include <vector>

namespace ddph {
namespace loader {

// The folders the plugins of this build ship in, in search order: "ddphooks"
// beside the loader itself, then the compiled-in install dir. Families found
// there are built in: only a YAML's replace_builtin lets another folder's copy
// replace them (registry.h).
std::vector<std::string> builtin_plugin_dirs();

// The entries of env DDPH_PLUGIN_PATH (colon-separated), in order.
std::vector<std::string> env_plugin_dirs();

// Every folder the registry searches, in order: given (a YAML's plugin_path,
// already absolute), DDPH_PLUGIN_PATH, then the built-in folders.
struct SearchPath {
  std::vector<std::string> given;
  std::string given_name = "plugin_path";  // how messages name the given folders
  std::vector<std::string> env;
  std::vector<std::string> builtin;
};

// given, then this process's DDPH_PLUGIN_PATH and built-in folders.
SearchPath plugin_search_path(const std::vector<std::string>& given);

// The folder holding the code of the loader (libddph.so, or the executable
// that links the loader statically), found with dladdr. Empty if unknown.
std::string loader_directory();

// Appends dir to dirs unless it is empty or already there.
void append_unique(std::vector<std::string>& dirs, const std::string& dir);

// The folder part of path ("." when it has none).
std::string parent_directory(const std::string& path);

}  // namespace loader
}  // namespace ddph
