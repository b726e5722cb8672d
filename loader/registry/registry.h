// The plugin registry: finds libddph_<family>.so along a search path, opens it
// once, checks its description against the ABI, and keeps it open until the
// registry is destroyed. Whoever creates hook or communicator state from a
// plugin must destroy that state before the registry (sessions hold it by
// shared_ptr for that reason).
#pragma once

#include <ddph/ddph.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "loader/registry/search_path.h"

namespace ddph {
namespace loader {

class Plugin {
 public:
  Plugin(std::string family, std::string file, void* handle, const ddph_plugin_t* desc)
      : family_(std::move(family)), file_(std::move(file)), handle_(handle), desc_(desc) {}
  ~Plugin();
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

  const std::string& family() const { return family_; }
  const std::string& file() const { return file_; }
  const ddph_plugin_t& desc() const { return *desc_; }
  // NULL when the family has no hook (comm factory) of that name.
  const ddph_hook_t* find_hook(const std::string& name) const;
  const ddph_comm_factory_t* find_comm(const std::string& backend) const;
  // "a, b, c" or "none", for error messages.
  std::string hook_names() const;
  std::string comm_names() const;

 private:
  std::string family_, file_;
  void* handle_;
  const ddph_plugin_t* desc_;
};

// A plugin file found on disk (not yet opened).
struct PluginFile {
  std::string family;
  std::string path;
};

// Where a folder of the search path comes from.
enum class PluginOrigin {
  kGiven,    // the YAML's plugin_path (or `ddph plugins --plugin-path`)
  kEnv,      // DDPH_PLUGIN_PATH
  kBuiltin,  // shipped with the loader (search_path.h); also the same file
             // reached through a given or env folder
};

// One file of a family on the search path.
struct PluginCopy {
  std::string path;
  PluginOrigin origin;
};

struct PluginPolicy {
  // Built-in families that a copy from plugin_path or DDPH_PLUGIN_PATH may
  // replace (the YAML's replace_builtin). Any other built-in family found
  // there first is refused.
  std::vector<std::string> replace_builtin;
  bool replace_any_builtin = false;  // `ddph plugins`: show whatever comes first
  // Log a warning when a loaded family has more than one copy.
  bool warn_shadowed = true;
};

class Registry {
 public:
  // first_dirs (a YAML plugin_path, already absolute) come before
  // DDPH_PLUGIN_PATH and the built-in folders.
  explicit Registry(const std::vector<std::string>& first_dirs = {});
  Registry(const SearchPath& path, PluginPolicy policy);
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  const std::vector<std::string>& dirs() const { return dirs_; }
  // Every distinct file of family on the search path, in search order (a file
  // reached through two folders is listed once). Opens nothing.
  std::vector<PluginCopy> copies(const std::string& family) const;
  // The copy load() opens, without opening it: the first on the search path.
  // Throws ddph::Error when there is none, or when it would replace a built-in
  // family that the policy does not name.
  PluginCopy choose(const std::string& family) const;
  // Opens the chosen copy, or returns the one already open. Throws
  // ddph::Error (see registry.cpp for the codes). The reference lives as long
  // as the registry. [thread-safe]
  const Plugin& load(const std::string& family);
  // "plugin_path", "DDPH_PLUGIN_PATH" or "built in", for messages.
  std::string origin_name(PluginOrigin origin) const;

 private:
  struct Dir {
    std::string path;
    PluginOrigin origin;
  };
  void warn_if_shadowed(const std::string& family, const PluginCopy& chosen) const;
  std::vector<Dir> search_;
  std::vector<std::string> dirs_;  // search_'s paths
  std::string given_name_;
  PluginPolicy policy_;
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<Plugin>> plugins_;
};

// Every libddph_<family>.so in dirs; a family shadowed by an earlier directory
// is listed once, with the path found first. Sorted by family.
std::vector<PluginFile> find_plugin_files(const std::vector<std::string>& dirs);

// Checks a plugin description against ABI v1 (struct sizes of every table,
// required functions, family vs. the file name). Throws ddph::Error.
void check_plugin_desc(const ddph_plugin_t* desc, const std::string& expected_family,
                       const std::string& file);

// The rule a plugin from plugin_path or DDPH_PLUGIN_PATH must pass before
// dlopen runs its constructors, the one rendezvous directories are held to
// (core/base/private_path.h): the file, symbolic links resolved, and the
// folder it is in belong to this user or root and neither group nor others
// may write to them. Returns "" when path passes, else what is wrong and how
// to fix it. load() refuses such a copy with DDPH_INVALID_ARGUMENT unless the
// environment sets kAllowUnsafePluginPath to 1 (then it logs a warning).
// *resolved_path, when given, gets the file judged (links resolved), which
// is the one to open.
std::string untrusted_plugin_reason(const std::string& path, std::string* resolved_path = nullptr);
extern const char kAllowUnsafePluginPath[];  // "DDPH_ALLOW_UNSAFE_PLUGIN_PATH"

// Family names are plain identifiers, so that a YAML family cannot name a path.
bool is_valid_family_name(const std::string& family);

}  // namespace loader
}  // namespace ddph
