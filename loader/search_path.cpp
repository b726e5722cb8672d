#include "loader/search_path.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>

namespace ddph {
namespace loader {

void append_unique(std::vector<std::string>& dirs, const std::string& dir) {
  if (dir.empty() || std::find(dirs.begin(), dirs.end(), dir) != dirs.end()) return;
  dirs.push_back(dir);
}

std::string parent_directory(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string loader_directory() {
  Dl_info info{};
  // Any function of the loader will do: dladdr names the object that holds it.
  if (dladdr(reinterpret_cast<void*>(&loader_directory), &info) == 0 || info.dli_fname == nullptr)
    return "";
  std::string file = info.dli_fname;
  // The main program may be reported by a bare or relative name; resolve it.
  char resolved[4096];
  if (realpath(file.c_str(), resolved) != nullptr) file = resolved;
  return parent_directory(file);
}

namespace {
// True when the loader is linked into the executable itself (the ddph tool)
// rather than living in libddph.so.
bool loader_is_main_program() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&loader_directory), &info) == 0 || info.dli_fname == nullptr)
    return false;
  char exe[4096], object[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return false;
  exe[n] = '\0';
  if (realpath(info.dli_fname, object) == nullptr) return false;
  return std::string(exe) == object;
}
}  // namespace

std::vector<std::string> default_plugin_dirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("DDPH_PLUGIN_PATH")) {
    std::stringstream ss(env);
    std::string dir;
    while (std::getline(ss, dir, ':')) append_unique(dirs, dir);
  }
  std::string here = loader_directory();
  if (!here.empty()) {
    if (loader_is_main_program()) {
      // A program linking the loader statically (the ddph tool) sits in bin/,
      // with plugins in lib/ddphooks both in the build tree and when installed.
      const std::string prefix = parent_directory(here);
      append_unique(dirs, prefix + "/lib/" DDPH_PLUGIN_SUBDIR);
      append_unique(dirs, prefix + "/" DDPH_INSTALL_LIBDIR "/" DDPH_PLUGIN_SUBDIR);
    } else {
      append_unique(dirs, here + "/" DDPH_PLUGIN_SUBDIR);
    }
  }
  append_unique(dirs, DDPH_PLUGIN_INSTALL_DIR);
  return dirs;
}

}  // namespace loader
}  // namespace ddph
