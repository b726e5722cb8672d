// `ddph plugins [--plugin-path DIR]... [--json]`: every plugin family on the
// search path, with its hooks, communicator backends and their option schemas.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "core/base/options.h"
#include "loader/registry/registry.h"
#include "tool/cli.h"
#include "tool/commands.h"
#include "tool/json_line.h"

namespace ddph::tool {
namespace {

const char kDescription[] =
    "Lists every plugin family found in DIR (searched first), DDPH_PLUGIN_PATH, the\n"
    "folder beside the loader, and the install folder (the last two hold the built-in\n"
    "families). A family found in several folders is listed once, from the file that\n"
    "comes first, with the files it shadows. --json: one object per family per line.";

struct PluginsOptions {
  std::vector<std::string> plugin_path;
  bool json = false;
};

// The hook's flags in words; json: their keys, as in the JSON list.
std::vector<std::string> flag_names(const ddph_hook_t& hook, bool json) {
  const uint32_t flags = hook.flags;
  std::vector<std::string> out;
  auto add = [&](uint32_t bit, const char* text, const char* key) {
    if (flags & bit) out.push_back(json ? key : text);
  };
  add(DDPH_HOOK_NEEDS_INNER, "wrapper (needs wrap:)", "needs_inner");
  add(DDPH_HOOK_NEEDS_PARAMS, "needs params", "needs_params");
  add(DDPH_HOOK_RESULT_ELSEWHERE, "result elsewhere", "result_elsewhere");
  add(DDPH_HOOK_STEPS_OPTIMIZER, "steps the optimizer", "steps_optimizer");
  add(DDPH_HOOK_MAKES_INNER, "makes its inner hook on its own communicator", "makes_inner");
  add(DDPH_HOOK_PIPELINED, "pipelined (next bucket starts before done)", "pipelined");
  add(DDPH_HOOK_STATELESS, "stateless (buckets may run on several states at once)", "stateless");
  // 1.9: stateless with some options, which each state says.
  if (hook.struct_size >= DDPH_HOOK_SIZE_V1_9 && hook.state_flags != nullptr)
    out.push_back(json ? "stateless_by_options" : "stateless with some options (state_flags)");
  // 1.10: hands back its error-feedback residuals when auto switches away.
  if (hook.struct_size >= DDPH_HOOK_SIZE_V1_10 && hook.take_residual != nullptr)
    out.push_back(json ? "flushes_residuals" : "flushes residuals (take_residual)");
  return out;
}

bool has_range(const ddph_option_spec_t& s) {
  return (s.type == DDPH_INT || s.type == DDPH_FLOAT) && s.min_value <= s.max_value;
}

Json options_json(const ddph_option_spec_t* specs, size_t n) {
  Json out = Json::array();
  for (size_t i = 0; i < n; ++i) {
    const ddph_option_spec_t& s = specs[i];
    Json o = {{"name", s.name},
              {"type", ddph::type_name(s.type)},
              {"default", s.default_value ? Json(s.default_value) : Json(nullptr)}};
    if (has_range(s)) {
      o["min"] = json_number(s.min_value);
      o["max"] = json_number(s.max_value);
    }
    if (s.choices) o["choices"] = s.choices;
    o["doc"] = s.doc ? s.doc : "";
    out.push_back(std::move(o));
  }
  return out;
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
    if (has_range(s))
      line += ", range [" + ddph::format_number(s.min_value) + ", " +
              ddph::format_number(s.max_value) + "]";
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

void print_family_json(const ddph::loader::Plugin& plugin) {
  const ddph_plugin_t& d = plugin.desc();
  Json hooks = Json::array(), comms = Json::array();
  for (size_t h = 0; h < d.num_hooks; ++h) {
    const ddph_hook_t* hook = d.hooks[h];
    hooks.push_back({{"name", hook->name},
                     {"summary", hook->summary ? hook->summary : ""},
                     {"flags", flag_names(*hook, true)},
                     {"options", options_json(hook->options, hook->num_options)}});
  }
  for (size_t c = 0; c < d.num_comms; ++c) {
    const ddph_comm_factory_t* comm = d.comms[c];
    comms.push_back({{"backend", comm->backend},
                     {"summary", comm->summary ? comm->summary : ""},
                     {"options", options_json(comm->options, comm->num_options)}});
  }
  print_json_line({{"family", plugin.family()},
                   {"version", d.version ? d.version : ""},
                   {"abi", std::to_string(d.abi_major) + "." + std::to_string(d.abi_minor)},
                   {"file", plugin.file()},
                   {"hooks", std::move(hooks)},
                   {"comms", std::move(comms)}});
}

int run_plugins(const PluginsOptions& o) {
  const bool json = o.json;
  const std::vector<std::string>& first_dirs = o.plugin_path;
  ddph::loader::SearchPath path = ddph::loader::plugin_search_path(first_dirs);
  path.given_name = "--plugin-path";
  ddph::loader::PluginPolicy policy;
  policy.replace_any_builtin = true;  // list what each folder holds; jobs are checked at open
  policy.warn_shadowed = false;       // the listing says it
  ddph::loader::Registry registry(path, policy);
  const auto files = ddph::loader::find_plugin_files(registry.dirs());
  if (json) {
    print_json_line({{"search_path", registry.dirs()}});
  } else {
    std::printf("search path:\n");
    for (const auto& dir : registry.dirs()) std::printf("  %s\n", dir.c_str());
    if (files.empty()) std::printf("\nno plugins found\n");
  }
  int status = 0;
  for (const auto& file : files) {
    if (!json) std::printf("\n");
    try {
      const ddph::loader::Plugin& plugin = registry.load(file.family);
      const ddph_plugin_t& d = plugin.desc();
      if (json) {
        print_family_json(plugin);
        continue;
      }
      std::printf("%s %s (ABI %u.%u) %s\n", plugin.family().c_str(), d.version ? d.version : "?",
                  d.abi_major, d.abi_minor, plugin.file().c_str());
      print_shadowed(registry, file.family);
      for (size_t h = 0; h < d.num_hooks; ++h) {
        const ddph_hook_t* hook = d.hooks[h];
        std::string flags;
        for (const std::string& f : flag_names(*hook, false))
          flags += (flags.empty() ? "" : ", ") + f;
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
      if (json) {
        print_json_line({{"family", file.family}, {"file", file.path}, {"error", e.what()}});
      } else {
        std::printf("%s: cannot load: %s\n", file.path.c_str(), e.what());
        print_shadowed(registry, file.family);
      }
      status = kExitFailed;
    }
  }
  return status;
}

}  // namespace

void add_plugins_command(CLI::App& root, int* exit_code) {
  auto o = std::make_shared<PluginsOptions>();
  CLI::App* cmd = add_command(root, "plugins", "list plugin families, their hooks and options",
                              kDescription, o, run_plugins, exit_code);
  cmd->add_option("--plugin-path", o->plugin_path, "a folder searched first (repeatable)")
      ->type_name("DIR");
}

}  // namespace ddph::tool
