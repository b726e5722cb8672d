#include "loader/registry/registry.h"

#include <dirent.h>
#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "core/base/error.h"
#include "core/base/host.h"
#include "core/base/private_path.h"
#include "loader/host_table.h"
#include "loader/registry/search_path.h"

namespace ddph {
namespace loader {
namespace {

const char kPrefix[] = "libddph_";
const char kSuffix[] = ".so";

std::string plugin_file_name(const std::string& family) {
  return kPrefix + family + kSuffix;
}

bool is_regular_file(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

// Why path (a file, or the folder a plugin is in) may not be trusted, or "".
std::string distrust(const std::string& path, const char* what) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return std::string(what) + " " + path + ": " + strerror(errno);
  const ddph::PathTrust trust = ddph::check_trusted(st);
  if (trust) return "";
  std::string fix = trust.problem == ddph::PathTrust::kMode
                        ? "run `chmod go-w " + path + "`"
                        : "keep plugins in a folder of your own (or root's)";
  return std::string(what) + " " + path + " " + trust.what +
         ", so another user could change the code that loading it runs; " + fix;
}

}  // namespace

const char kAllowUnsafePluginPath[] = "DDPH_ALLOW_UNSAFE_PLUGIN_PATH";

std::string untrusted_plugin_reason(const std::string& path, std::string* resolved_path) {
  char resolved[PATH_MAX];
  if (realpath(path.c_str(), resolved) == nullptr) return "plugin " + path + ": " + strerror(errno);
  const std::string real = resolved;
  if (resolved_path != nullptr) *resolved_path = real;
  std::string why = distrust(real, "the file");
  if (why.empty()) why = distrust(parent_directory(real), "its folder");
  return why;
}

bool is_valid_family_name(const std::string& family) {
  if (family.empty()) return false;
  return std::all_of(family.begin(), family.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
}

Plugin::~Plugin() {
  if (handle_ != nullptr) dlclose(handle_);
}

const ddph_hook_t* Plugin::find_hook(const std::string& name) const {
  for (size_t i = 0; i < desc_->num_hooks; ++i)
    if (name == desc_->hooks[i]->name) return desc_->hooks[i];
  return nullptr;
}

const ddph_comm_factory_t* Plugin::find_comm(const std::string& backend) const {
  for (size_t i = 0; i < desc_->num_comms; ++i)
    if (backend == desc_->comms[i]->backend) return desc_->comms[i];
  return nullptr;
}

std::string Plugin::hook_names() const {
  std::vector<std::string> names;
  for (size_t i = 0; i < desc_->num_hooks; ++i) names.push_back(desc_->hooks[i]->name);
  return names.empty() ? "none" : join(names, ", ");
}

std::string Plugin::comm_names() const {
  std::vector<std::string> names;
  for (size_t i = 0; i < desc_->num_comms; ++i) names.push_back(desc_->comms[i]->backend);
  return names.empty() ? "none" : join(names, ", ");
}

Registry::Registry(const std::vector<std::string>& first_dirs)
    : Registry(plugin_search_path(first_dirs), PluginPolicy{}) {}

Registry::Registry(const SearchPath& path, PluginPolicy policy)
    : given_name_(path.given_name), policy_(std::move(policy)) {
  install_loader_host();
  auto add = [&](const std::string& dir, PluginOrigin origin) {
    if (dir.empty()) return;
    for (Dir& known : search_) {
      if (known.path != dir) continue;
      // DDPH_PLUGIN_PATH naming a built-in folder (the tests point it at the
      // build's own plugins): its files are the built-in ones.
      if (origin == PluginOrigin::kBuiltin) known.origin = origin;
      return;
    }
    search_.push_back(Dir{dir, origin});
    dirs_.push_back(dir);
  };
  for (const auto& d : path.given) add(d, PluginOrigin::kGiven);
  for (const auto& d : path.env) add(d, PluginOrigin::kEnv);
  for (const auto& d : path.builtin) add(d, PluginOrigin::kBuiltin);
}

Registry::~Registry() {
  std::lock_guard<std::mutex> lock(mu_);
  plugins_.clear();
}

std::string Registry::origin_name(PluginOrigin origin) const {
  switch (origin) {
    case PluginOrigin::kGiven:
      return given_name_;
    case PluginOrigin::kEnv:
      return "DDPH_PLUGIN_PATH";
    case PluginOrigin::kBuiltin:
      return "built in";
  }
  return "?";
}

std::vector<PluginCopy> Registry::copies(const std::string& family) const {
  std::vector<PluginCopy> found;
  std::vector<std::pair<dev_t, ino_t>> ids;  // of found, to list each file once
  for (const Dir& dir : search_) {
    const std::string path = dir.path + "/" + plugin_file_name(family);
    struct stat st {};
    if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    const auto id = std::make_pair(st.st_dev, st.st_ino);
    auto seen = std::find(ids.begin(), ids.end(), id);
    if (seen == ids.end()) {
      ids.push_back(id);
      found.push_back(PluginCopy{path, dir.origin});
    } else if (dir.origin == PluginOrigin::kBuiltin) {
      // The same file as a built-in one is the built-in family, wherever it is
      // reached from (DDPH_PLUGIN_PATH set to the build's own plugins, as the
      // tests do, or a symlink to them).
      found[size_t(seen - ids.begin())].origin = PluginOrigin::kBuiltin;
    }
  }
  return found;
}

PluginCopy Registry::choose(const std::string& family) const {
  DDPH_CHECK(is_valid_family_name(family), DDPH_INVALID_ARGUMENT,
             "plugin family '" << family << "' is not a valid name (letters, digits, '_', '-')");
  const std::vector<PluginCopy> found = copies(family);
  DDPH_CHECK(!found.empty(), DDPH_NOT_FOUND,
             "plugin family '" << family << "' not found: no " << plugin_file_name(family)
                               << " in any of " << dirs_.size() << " searched directories: "
                               << (dirs_.empty() ? "(none)" : join(dirs_, ", "))
                               << " (set plugin_path in the YAML or DDPH_PLUGIN_PATH)");
  const PluginCopy& first = found.front();
  if (first.origin == PluginOrigin::kBuiltin || policy_.replace_any_builtin) return first;
  auto builtin = std::find_if(found.begin(), found.end(), [](const PluginCopy& c) {
    return c.origin == PluginOrigin::kBuiltin;
  });
  const auto& allowed = policy_.replace_builtin;
  DDPH_CHECK(
      builtin == found.end() || std::find(allowed.begin(), allowed.end(), family) != allowed.end(),
      DDPH_INVALID_ARGUMENT,
      "plugin family '" << family << "' is built in (" << builtin->path << "), but " << first.path
                        << " (from " << origin_name(first.origin)
                        << ") comes first on the search path; a job replaces a built-in "
                           "family only when its YAML says so: add `replace_builtin: ["
                        << family << "]` to use that file, or remove it");
  return first;
}

// A family in two folders runs whichever comes first; say which, so that a
// stray copy in a job folder or on DDPH_PLUGIN_PATH cannot go unnoticed.
void Registry::warn_if_shadowed(const std::string& family, const PluginCopy& chosen) const {
  const std::vector<PluginCopy> found = copies(family);
  if (found.size() < 2) return;
  std::string others;
  for (const PluginCopy& copy : found) {
    if (copy.path == chosen.path) continue;
    others += (others.empty() ? "" : ", ") + copy.path + " (" + origin_name(copy.origin) + ")";
  }
  ddph::log(DDPH_LOG_WARN, nullptr,
            "plugin family '" + family + "' is in " + std::to_string(found.size()) +
                " folders of the search path: using " + chosen.path + " (" +
                origin_name(chosen.origin) + "), not " + others);
}

const Plugin& Registry::load(const std::string& family) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = plugins_.find(family);
  if (it != plugins_.end()) return *it->second;

  const PluginCopy chosen = choose(family);
  const std::string& path = chosen.path;
  if (policy_.warn_shadowed) warn_if_shadowed(family, chosen);
  // dlopen runs the plugin's constructors: refuse a file that another user
  // could have written, by the rule file stores are held to. The built-in
  // folders sit beside the loader, which whoever writes there could replace
  // as well, so they are trusted as the loader is.
  std::string open_path = path;
  if (chosen.origin != PluginOrigin::kBuiltin) {
    // The file judged is the file opened: links resolved once, here.
    const std::string why = untrusted_plugin_reason(path, &open_path);
    const char* allow = std::getenv(kAllowUnsafePluginPath);
    const bool allowed = allow != nullptr && std::strcmp(allow, "1") == 0;
    const std::string what =
        "plugin family '" + family + "' (" + path + ", from " + origin_name(chosen.origin) + ")";
    DDPH_CHECK(why.empty() || allowed, DDPH_INVALID_ARGUMENT,
               what << " not loaded: " << why << " (or set " << kAllowUnsafePluginPath
                    << "=1 to load it anyway, in a development tree)");
    if (!why.empty())
      ddph::log(DDPH_LOG_WARN, nullptr,
                what + " loaded although " + why + " (" + kAllowUnsafePluginPath + "=1)");
  }

  // RTLD_LOCAL: every plugin carries its own copy of core; keep them apart.
  void* handle = dlopen(open_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    DDPH_FAIL(DDPH_INVALID_ARGUMENT,
              "cannot load plugin " << path << ": " << (why ? why : "dlopen failed"));
  }
  // Closes the handle if any check below throws.
  struct HandleCloser {
    void* handle;
    ~HandleCloser() {
      if (handle != nullptr) dlclose(handle);
    }
  } closer{handle};
  dlerror();
  auto entry = reinterpret_cast<ddph_plugin_entry_fn>(dlsym(handle, "ddph_plugin_entry"));
  DDPH_CHECK(entry != nullptr, DDPH_NOT_FOUND,
             "plugin " << path << " does not export the symbol ddph_plugin_entry");
  const ddph_plugin_t* desc = entry(ddph_host());
  DDPH_CHECK(desc != nullptr, DDPH_VERSION_MISMATCH,
             "plugin " << path << ": ddph_plugin_entry returned NULL (the plugin refused host ABI "
                       << DDPH_ABI_MAJOR << "." << DDPH_ABI_MINOR << ")");
  check_plugin_desc(desc, family, path);
  auto ready = std::make_unique<Plugin>(family, path, handle, desc);
  closer.handle = nullptr;  // `ready` owns it now
  const Plugin& ref = *ready;
  plugins_.emplace(family, std::move(ready));
  return ref;
}

std::vector<PluginFile> find_plugin_files(const std::vector<std::string>& dirs) {
  std::vector<PluginFile> found;
  const size_t prefix = sizeof kPrefix - 1, suffix = sizeof kSuffix - 1;
  for (const auto& dir : dirs) {
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) continue;
    std::vector<PluginFile> here;
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name.size() <= prefix + suffix || name.compare(0, prefix, kPrefix) != 0 ||
          name.compare(name.size() - suffix, suffix, kSuffix) != 0)
        continue;
      std::string family = name.substr(prefix, name.size() - prefix - suffix);
      if (!is_regular_file(dir + "/" + name)) continue;
      bool shadowed = std::any_of(found.begin(), found.end(),
                                  [&](const PluginFile& f) { return f.family == family; });
      if (!shadowed) here.push_back({family, dir + "/" + name});
    }
    closedir(d);
    found.insert(found.end(), here.begin(), here.end());
  }
  std::sort(found.begin(), found.end(),
            [](const PluginFile& a, const PluginFile& b) { return a.family < b.family; });
  return found;
}

}  // namespace loader
}  // namespace ddph
