// Where the registry looks for plugin files, after any YAML plugin_path.
#pragma once

#include <string>
#include <vector>

namespace ddph {
namespace loader {

// In search order: each entry of env DDPH_PLUGIN_PATH (colon-separated), the
// "ddphooks" folder beside the loader itself, then the compiled-in install dir.
// Duplicates are dropped, keeping the first.
std::vector<std::string> default_plugin_dirs();

// The folder holding the code of the loader (libddph.so, or the executable
// that links the loader statically), found with dladdr. Empty if unknown.
std::string loader_directory();

// Appends dir to dirs unless it is empty or already there.
void append_unique(std::vector<std::string>& dirs, const std::string& dir);

// The folder part of path ("." when it has none).
std::string parent_directory(const std::string& path);

}  // namespace loader
}  // namespace ddph
