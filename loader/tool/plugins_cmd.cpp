// `ddph plugins [--plugin-path DIR]...`: every plugin family on the search
// path, with its hooks, communicator backends and their option schemas.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/options.h"
#include "loader/registry.h"
#include "loader/tool/commands.h"

namespace ddph_tool {
namespace {

void usage(FILE* out) {
  std::fprintf(out,
               "usage: ddph plugins [--plugin-path DIR]...\n"
               "Lists every plugin family found in DIR (searched first), DDPH_PLUGIN_PATH,\n"
               "the folder beside the loader, and the install folder (the last two hold the\n"
               "built-in families). A family found in several folders is listed once, from\n"
               "the file that comes first, with the files it shadows.\n");
}

std::string flag_names(uint32_t flags) {
  std::string out;
  auto add = [&](uint32_t bit, const char* name) {
    if (flags & bit) out += (out.empty() ? "" : ", ") + std::string(name);
  };
  add(DDPH_HOOK_NEEDS_INNER, "wrapper (needs wrap:)");
  add(DDPH_HOOK_NEEDS_PARAMS, "needs params");
  add(DDPH_HOOK_RESULT_ELSEWHERE, "result elsewhere");
  add(DDPH_HOOK_STEPS_OPTIMIZER, "steps the optimizer");
  add(DDPH_HOOK_MAKES_INNER, "makes its inner hook on its own communicator");
  return out;
}

std::string format_bound(double v, ddph_type_t type) {
  char buf[64];
  if (type == DDPH_INT)
    std::snprintf(buf, sizeof buf, "%.0f", v);
  else
    std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

void print_options(const ddph_option_spec_t* specs, size_t n, const char* indent) {
  if (n == 0) {
    std::printf("%s(no options)\n", indent);
    return;
  }
  for (size_t i = 0; i < n; ++i) {
    const ddph_option_spec_t& s = specs[i];
    std::string line = std::string(indent) + s.name + " (" + ddph::type_name(s.type);
    line += s.default_value ? std::string(", default ") + s.default_value : ", required";
    if ((s.type == DDPH_INT || s.type == DDPH_FLOAT) && s.min_value <= s.max_value)
      line += ", range [" + format_bound(s.min_value, s.type) + ", " +
              format_bound(s.max_value, s.type) + "]";
    if (s.choices) line += std::string(", one of ") + s.choices;
    line += ")";
    if (s.doc && *s.doc) line += ": " + std::string(s.doc);
    std::printf("%s\n", line.c_str());
  }
}

// The other copies of a family on the search path, and whether a job may use
// the one listed (a copy that shadows a built-in one needs replace_builtin).
void print_shadowed(const ddph::loader::Registry& registry, const std::string& family) {
  using ddph::loader::PluginOrigin;
  const auto copies = registry.copies(family);
  if (copies.empty()) return;
  bool shadows_builtin = false;
  for (size_t i = 1; i < copies.size(); ++i) {
    std::printf("  shadows %s (%s)\n", copies[i].path.c_str(),
                registry.origin_name(copies[i].origin).c_str());
    shadows_builtin |= copies[i].origin == PluginOrigin::kBuiltin;
  }
  if (shadows_builtin && copies[0].origin != PluginOrigin::kBuiltin)
    std::printf(
        "  a job uses %s only with `replace_builtin: [%s]` in its YAML; without it, the\n"
        "  job is refused\n",
        copies[0].path.c_str(), family.c_str());
}

}  // namespace

int cmd_plugins(int argc, char** argv) {
  std::vector<std::string> first_dirs;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return 0;
    }
    if (std::strcmp(argv[i], "--plugin-path") == 0 && i + 1 < argc) {
      first_dirs.push_back(argv[++i]);
    } else if (std::strncmp(argv[i], "--plugin-path=", 14) == 0) {
      first_dirs.push_back(argv[i] + 14);
    } else {
      std::fprintf(stderr, "ddph plugins: unexpected argument '%s'\n", argv[i]);
      usage(stderr);
      return 2;
    }
  }
  ddph::loader::SearchPath path = ddph::loader::plugin_search_path(first_dirs);
  path.given_name = "--plugin-path";
  ddph::loader::PluginPolicy policy;
  policy.replace_any_builtin = true;  // list what each folder holds; jobs are checked at open
  policy.warn_shadowed = false;       // the listing says it
  ddph::loader::Registry registry(path, policy);
  std::printf("search path:\n");
  for (const auto& dir : registry.dirs()) std::printf("  %s\n", dir.c_str());
  const auto files = ddph::loader::find_plugin_files(registry.dirs());
  if (files.empty()) std::printf("\nno plugins found\n");
  int status = 0;
  for (const auto& file : files) {
    std::printf("\n");
    try {
      const ddph::loader::Plugin& plugin = registry.load(file.family);
      const ddph_plugin_t& d = plugin.desc();
      std::printf("%s %s (ABI %u.%u) %s\n", plugin.family().c_str(), d.version ? d.version : "?",
                  d.abi_major, d.abi_minor, plugin.file().c_str());
      print_shadowed(registry, file.family);
      for (size_t h = 0; h < d.num_hooks; ++h) {
        const ddph_hook_t* hook = d.hooks[h];
        std::string flags = flag_names(hook->flags);
        std::printf("  hook %s: %s%s%s%s\n", hook->name, hook->summary ? hook->summary : "",
                    flags.empty() ? "" : " [", flags.c_str(), flags.empty() ? "" : "]");
        print_options(hook->options, hook->num_options, "    ");
      }
      for (size_t c = 0; c < d.num_comms; ++c) {
        const ddph_comm_factory_t* comm = d.comms[c];
        std::printf("  comm backend %s: %s\n", comm->backend, comm->summary ? comm->summary : "");
        print_options(comm->options, comm->num_options, "    ");
      }
    } catch (const std::exception& e) {
      // Keep listing the others: one broken plugin should not hide the rest.
      std::printf("%s: cannot load: %s\n", file.path.c_str(), e.what());
      print_shadowed(registry, file.family);
      status = 1;
    }
  }
  return status;
}

}  // namespace ddph_tool
