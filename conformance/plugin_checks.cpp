#include "conformance/plugin_checks.h"

#include <dlfcn.h>

#include <cstdint>
#include <set>
#include <sstream>

#include "conformance/comm_checks.h"
#include "conformance/elf_symbols.h"
#include "conformance/harness.h"
#include "conformance/hook_checks.h"

namespace ddph::plugin_checks {
namespace {

Outcome pass(std::string detail) {
  return {Status::kPass, std::move(detail)};
}
Outcome fail(std::string detail) {
  return {Status::kFail, std::move(detail)};
}

std::string base_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// What the parent needs to plan the per-hook rows, learned in a child so the
// parent never runs the plugin's code. The outcome's detail is the table
// line, then one "hook\t<index>\t<name>" or "comm\t<index>\t<backend>" line
// per table entry, then "abi\t<major>".
Outcome inventory(const std::string& path) {
  std::string error;
  const ddph_plugin_t* p = open_plugin(path, &error);
  if (p == nullptr) return fail(error);
  if (p->struct_size < DDPH_SIZE_THROUGH(ddph_plugin_t, abi_minor))
    return fail("ddph_plugin_t.struct_size " + std::to_string(p->struct_size) +
                " is too small to hold the ABI version");
  std::ostringstream out;
  const bool sized = p->struct_size >= DDPH_PLUGIN_SIZE_V1_0;
  out << "family " << (sized && p->family ? p->family : "(none)") << ", version "
      << (sized && p->version ? p->version : "(none)") << ", ABI " << p->abi_major << "."
      << p->abi_minor;
  if (sized) {
    out << ", " << p->num_hooks << " hooks, " << p->num_comms << " communicators";
    for (size_t i = 0; i < p->num_hooks && p->hooks != nullptr; ++i)
      out << "\nhook\t" << i << "\t"
          << (p->hooks[i] && p->hooks[i]->name ? p->hooks[i]->name : "(unnamed)");
    for (size_t i = 0; i < p->num_comms && p->comms != nullptr; ++i)
      out << "\ncomm\t" << i << "\t"
          << (p->comms[i] && p->comms[i]->backend ? p->comms[i]->backend : "(unnamed)");
  }
  out << "\nabi\t" << p->abi_major;
  return pass(out.str());
}

Outcome check_exports(const std::string& path) {
  std::vector<std::string> names;
  std::string error;
  if (!exported_symbols(path, &names, &error)) return fail(error);
  std::vector<std::string> foreign;
  bool entry = false;
  for (const std::string& n : names) {
    if (n == "ddph_plugin_entry") entry = true;
    if (n.compare(0, 5, "ddph_") != 0) foreign.push_back(n);
  }
  if (!foreign.empty()) {
    std::string list;
    for (size_t i = 0; i < foreign.size() && i < 5; ++i) list += (i ? ", " : "") + foreign[i];
    if (foreign.size() > 5) list += ", ...";
    return fail(std::to_string(foreign.size()) + " exported symbols without the ddph_ prefix: " +
                list + " (build with -fvisibility=hidden)");
  }
  if (!entry) return fail("ddph_plugin_entry is not in the dynamic symbol table");
  return pass(std::to_string(names.size()) + " exported, all ddph_*");
}

Outcome check_abi(const std::string& path) {
  std::string error;
  const ddph_plugin_t* p = open_plugin(path, &error);
  if (p == nullptr) return fail(error);
  if (p->abi_major != DDPH_ABI_MAJOR)
    return fail("built against ABI " + std::to_string(p->abi_major) + "." +
                std::to_string(p->abi_minor) + "; this ddph speaks " +
                std::to_string(DDPH_ABI_MAJOR) + "." + std::to_string(DDPH_ABI_MINOR) +
                ": a different major is refused by the loader");
  // A foreign host must be refused by the plugin itself, before it trusts
  // any table the host hands it.
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  auto entry = reinterpret_cast<ddph_plugin_entry_fn>(dlsym(lib, "ddph_plugin_entry"));
  if (entry(nullptr) != nullptr) return fail("ddph_plugin_entry(NULL) must return NULL");
  ddph_host_t future = *ddph_host();
  future.abi_major = DDPH_ABI_MAJOR + 1;
  if (entry(&future) != nullptr)
    return fail("ddph_plugin_entry accepted a host of ABI major " +
                std::to_string(DDPH_ABI_MAJOR + 1));
  std::string detail = "ABI " + std::to_string(p->abi_major) + "." + std::to_string(p->abi_minor);
  if (p->abi_minor > DDPH_ABI_MINOR)
    detail += " (newer minor than this ddph's " + std::to_string(DDPH_ABI_MINOR) +
              ": loads; newer capabilities unused)";
  return pass(detail + "; NULL and foreign hosts refused");
}

Outcome check_file_name(const std::string& path) {
  std::string error;
  const ddph_plugin_t* p = open_plugin(path, &error);
  if (p == nullptr) return fail(error);
  if (p->struct_size < DDPH_PLUGIN_SIZE_V1_0 || p->family == nullptr) return fail("no family name");
  const std::string want = std::string("libddph_") + p->family + ".so";
  if (base_name(path) != want)
    return fail("family '" + std::string(p->family) + "' is found by the loader only as " + want +
                "; this file is " + base_name(path));
  return pass(want);
}

Outcome check_struct_sizes(const std::string& path) {
  std::string error;
  const ddph_plugin_t* p = open_plugin(path, &error);
  if (p == nullptr) return fail(error);
  if (p->struct_size < DDPH_PLUGIN_SIZE_V1_0)
    return fail("ddph_plugin_t.struct_size " + std::to_string(p->struct_size) +
                " < DDPH_PLUGIN_SIZE_V1_0 (" + std::to_string(DDPH_PLUGIN_SIZE_V1_0) + ")");
  if (p->version == nullptr) return fail("version is NULL");
  if (p->num_hooks > 0 && p->hooks == nullptr) return fail("num_hooks > 0 but hooks is NULL");
  if (p->num_comms > 0 && p->comms == nullptr) return fail("num_comms > 0 but comms is NULL");
  if (p->num_hooks + p->num_comms == 0)
    return fail("the plugin offers no hook and no communicator");
  std::set<std::string> names;
  for (size_t i = 0; i < p->num_hooks; ++i) {
    const ddph_hook_t* h = p->hooks[i];
    if (h == nullptr) return fail("hooks[" + std::to_string(i) + "] is NULL");
    if (h->struct_size < DDPH_HOOK_SIZE_V1_0)
      return fail("hooks[" + std::to_string(i) + "].struct_size " + std::to_string(h->struct_size) +
                  " < DDPH_HOOK_SIZE_V1_0 (" + std::to_string(DDPH_HOOK_SIZE_V1_0) + ")");
    if (h->name != nullptr && !names.insert(h->name).second)
      return fail(std::string("two hooks are named '") + h->name + "'");
  }
  for (size_t i = 0; i < p->num_comms; ++i)
    if (p->comms[i] == nullptr || p->comms[i]->struct_size < DDPH_COMM_FACTORY_SIZE_V1_0)
      return fail("comms[" + std::to_string(i) +
                  "] is NULL or smaller than DDPH_COMM_FACTORY_SIZE_V1_0");
  return pass("plugin, hook and communicator tables at least v1.0 size");
}

// Opens the plugin again in the child and hands its table to body.
template <class Body>
Outcome with_plugin(const std::string& path, Body body) {
  std::string error;
  const ddph_plugin_t* p = open_plugin(path, &error);
  if (p == nullptr) return fail(error);
  return body(*p);
}

}  // namespace

const char* status_name(Status s) {
  return s == Status::kPass ? "PASS" : s == Status::kSkip ? "SKIP" : "FAIL";
}

std::vector<Row> validate_plugin(const std::string& path, const ValidateOptions& opt) {
  std::vector<Row> rows;
  auto isolated = [&](const std::function<Outcome()>& check) {
    return run_isolated(check, opt.timeout_s, opt.keep_output);
  };
  auto add = [&](const std::string& check, const std::string& hook, const Outcome& o) {
    rows.push_back({check, hook, o.status, o.detail});
  };

  Outcome inv = isolated([&] { return inventory(path); });
  std::istringstream lines(inv.detail);
  std::string first, line;
  std::getline(lines, first);
  add("load", "-", {inv.status, first});
  add("exports", "-", isolated([&] { return check_exports(path); }));
  if (inv.status != Status::kPass) {
    for (const char* c : {"abi_version", "file_name", "struct_sizes"})
      add(c, "-", {Status::kSkip, "the plugin did not load"});
    return rows;
  }
  struct Entry {
    bool hook;
    size_t index;
    std::string name;
  };
  std::vector<Entry> entries;
  int64_t major = -1;
  while (std::getline(lines, line)) {
    std::istringstream f(line);
    std::string kind, index, name;
    std::getline(f, kind, '\t');
    std::getline(f, index, '\t');
    std::getline(f, name);
    if (kind == "abi") major = std::stoll(index);
    if (kind == "hook" || kind == "comm")
      entries.push_back({kind == "hook", std::stoul(index), name});
  }
  add("abi_version", "-", isolated([&] { return check_abi(path); }));
  add("file_name", "-", isolated([&] { return check_file_name(path); }));
  Outcome sizes = isolated([&] { return check_struct_sizes(path); });
  add("struct_sizes", "-", sizes);
  // Tables of another major, or too small for what they claim, cannot be
  // read safely: the loader refuses such a plugin, so there is nothing to run.
  const char* refused = major != DDPH_ABI_MAJOR ? "ABI major differs: the loader refuses the plugin"
                        : sizes.status != Status::kPass ? "the tables are malformed (struct_sizes)"
                                                        : nullptr;
  const double done_wait = opt.timeout_s * 0.4;
  for (const Entry& e : entries) {
    if (e.hook) {
      for (const HookCheck& hc : hook_checks()) {
        if (refused != nullptr) {
          add(hc.name, e.name, {Status::kSkip, refused});
          continue;
        }
        add(hc.name, e.name, isolated([&] {
              return with_plugin(path, [&](const ddph_plugin_t& p) {
                return hc.run(p.hooks[e.index], done_wait);
              });
            }));
      }
    } else {
      const std::string label = "comm:" + e.name;
      if (refused != nullptr) {
        add("comm_table", label, {Status::kSkip, refused});
        add("comm_collectives", label, {Status::kSkip, refused});
        continue;
      }
      Outcome table = isolated([&] {
        return with_plugin(
            path, [&](const ddph_plugin_t& p) { return check_comm_table(p.comms[e.index]); });
      });
      add("comm_table", label, table);
      if (table.status != Status::kPass) {
        add("comm_collectives", label, {Status::kSkip, "comm_table failed"});
        continue;
      }
      add("comm_collectives", label, isolated([&] {
            return with_plugin(path, [&](const ddph_plugin_t& p) {
              return check_comm_collectives(p.comms[e.index], opt.timeout_s);
            });
          }));
    }
  }
  return rows;
}

}  // namespace ddph::plugin_checks
