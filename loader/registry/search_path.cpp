#include "loader/registry/search_path.h"

#include <dlfcn.h>
#include <errno.h>  // program_invocation_name
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
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

namespace {

std::string self_exe() {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return "";
  exe[n] = '\0';
  return exe;
}

// The file holding the loader's code, and whether that is the main program
// (the ddph tool links the loader statically) rather than libddph.so.
struct LoaderObject {
  std::string path;
  bool is_main_program = false;
};

LoaderObject loader_object() {
  LoaderObject o;
  Dl_info info{};
  // Any function of the loader will do: dladdr names the object that holds it.
  if (dladdr(reinterpret_cast<void*>(&loader_directory), &info) == 0 || info.dli_fname == nullptr)
    return o;
  // glibc names the main program by argv[0] (or ""), which may be a bare name
  // found on PATH or relative to a directory since left; /proc/self/exe is exact.
  if (info.dli_fname[0] == '\0' || std::strcmp(info.dli_fname, program_invocation_name) == 0) {
    o.path = self_exe();
    o.is_main_program = true;
    return o;
  }
  char resolved[4096];
  o.path = realpath(info.dli_fname, resolved) != nullptr ? resolved : info.dli_fname;
  o.is_main_program = o.path == self_exe();
  return o;
}

}  // namespace

std::string loader_directory() {
  const std::string path = loader_object().path;
  return path.empty() ? "" : parent_directory(path);
}

std::vector<std::string> env_plugin_dirs() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("DDPH_PLUGIN_PATH")) {
    std::stringstream ss(env);
    std::string dir;
    while (std::getline(ss, dir, ':')) append_unique(dirs, dir);
  }
  return dirs;
}

std::vector<std::string> builtin_plugin_dirs() {
  std::vector<std::string> dirs;
  const LoaderObject self = loader_object();
  if (!self.path.empty()) {
    const std::string here = parent_directory(self.path);
    if (self.is_main_program) {
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

SearchPath plugin_search_path(const std::vector<std::string>& given) {
  SearchPath path;
  path.given = given;
  path.env = env_plugin_dirs();
  path.builtin = builtin_plugin_dirs();
  return path;
}

}  // namespace loader
}  // namespace ddph
