#include "loader/job/job.h"

#include "core/base/error.h"
#include "loader/job/option_checks.h"
#include "loader/job/yaml_options.h"

namespace ddph {
namespace loader {
namespace {

// The registry and what a check owes its caller.
struct Resolver {
  Registry& registry;
  Problems& problems;
  bool open_outside_plugins = true;
  std::vector<UncheckedFamily> not_checked;
};

// Loads a family, reporting a failure at the family's position. NULL if the
// family could not be used, or is not to be opened by this check.
const Plugin* load_family(Resolver& r, const std::string& family, const Location& at,
                          const std::string& key) {
  try {
    if (!r.open_outside_plugins) {
      const PluginCopy copy = r.registry.choose(family);
      if (copy.origin != PluginOrigin::kBuiltin) {
        bool listed = false;
        for (const auto& u : r.not_checked) listed |= u.family == family;
        if (!listed)
          r.not_checked.push_back(
              UncheckedFamily{at, key, family, copy.path, r.registry.origin_name(copy.origin)});
        return nullptr;
      }
    }
    return &r.registry.load(family);
  } catch (const Error& e) {
    r.problems.add(at, key, e.code(), e.what());
    return nullptr;
  }
}

std::unique_ptr<ResolvedHook> resolve_hook(Resolver& r, const HookSpec& spec) {
  Problems& problems = r.problems;
  if (spec.family.empty() || spec.name.empty()) return nullptr;  // already reported
  if (spec.family == kAutoFamily) {
    problems.add(spec.family_at, spec.key + ".family", DDPH_INVALID_ARGUMENT,
                 "'auto' chooses the job's hook (hook:) and cannot be a rule's or a wrapped "
                 "hook");
    return nullptr;
  }
  auto out = std::make_unique<ResolvedHook>();
  bool ok = true;
  std::unique_ptr<ResolvedHook> inner;
  // Check the inner hook too, whatever becomes of the outer one: all problems at once.
  if (spec.wrap) {
    inner = resolve_hook(r, *spec.wrap);
    ok = inner != nullptr;
  }
  out->plugin = load_family(r, spec.family, spec.family_at, spec.key + ".family");
  if (out->plugin == nullptr) return nullptr;
  out->hook = out->plugin->find_hook(spec.name);
  if (out->hook == nullptr) {
    problems.add(spec.name_at, spec.key + ".name", DDPH_NOT_FOUND,
                 "family '" + spec.family + "' has no hook '" + spec.name +
                     "' (its hooks: " + out->plugin->hook_names() + ")");
    return nullptr;
  }
  const bool needs_inner = (out->hook->flags & DDPH_HOOK_NEEDS_INNER) != 0;
  if (needs_inner && !spec.wrap) {
    problems.add(spec.at, spec.key + ".wrap", DDPH_INVALID_ARGUMENT,
                 "missing: '" + spec.name +
                     "' is a wrapper; name the hook it wraps, e.g. wrap: {family: default, "
                     "name: allreduce}");
    ok = false;
  } else if (!needs_inner && spec.wrap) {
    problems.add(spec.wrap->at, spec.key + ".wrap", DDPH_INVALID_ARGUMENT,
                 "'" + spec.name + "' does not wrap another hook; remove 'wrap'");
    ok = false;
  }
  ok &= resolve_yaml_options(
      out->hook->options, out->hook->num_options, spec.options, spec.key + ".options",
      spec.options_at.line ? spec.options_at : spec.at, problems, &out->options);
  if (!ok) return nullptr;
  out->inner = std::move(inner);
  return out;
}

// A candidate must take a bucket as the others do: only its gradients,
// reduced in place, the optimizer left to the host.
constexpr uint32_t kFlagsNoCandidateHas = DDPH_HOOK_NEEDS_INNER | DDPH_HOOK_NEEDS_PARAMS |
                                          DDPH_HOOK_RESULT_ELSEWHERE | DDPH_HOOK_STEPS_OPTIMIZER |
                                          DDPH_HOOK_MAKES_INNER;

std::unique_ptr<ResolvedAuto> resolve_auto(Resolver& r, const HookSpec& spec) {
  Problems& problems = r.problems;
  if (spec.name != kAutoHook) {
    problems.add(spec.name_at, spec.key + ".name", DDPH_NOT_FOUND,
                 "family 'auto' has one hook, 'auto' (got '" + spec.name + "')");
    return nullptr;
  }
  if (spec.wrap) {
    problems.add(spec.wrap->at, spec.key + ".wrap", DDPH_INVALID_ARGUMENT,
                 "'auto' does not wrap another hook; name its candidates in "
                 "options.candidates");
    return nullptr;
  }
  auto out = std::make_unique<ResolvedAuto>();
  out->specs = parse_auto_options(spec, problems, &out->settings);
  for (const CandidateSpec& c : out->specs) {
    std::unique_ptr<ResolvedHook> hook = resolve_hook(r, c.hook);
    if (!hook) continue;  // reported under hook.options.candidates[i]
    check_hook_options(c.hook, *hook, DLDataType{}, problems);
    const uint32_t wrong = hook->hook->flags & kFlagsNoCandidateHas;
    if (wrong != 0) {
      problems.add(c.hook.at, c.hook.key, DDPH_INVALID_ARGUMENT,
                   "candidate '" + c.info.name + "' (" + c.hook.family + "/" + c.hook.name +
                       ") " +
                       ((wrong & DDPH_HOOK_NEEDS_INNER) ? "wraps another hook"
                                                        : "takes the parameters or steps the "
                                                          "optimizer") +
                       ": every candidate must reduce the same bucket in place, from its "
                       "gradients alone");
      continue;
    }
    out->candidates.push_back(std::move(hook));
  }
  if (out->candidates.empty() || out->candidates.size() != out->specs.size())
    return nullptr;
  return out;
}

void resolve_comm(Resolver& r, const CommSpec& spec, ResolvedComm* out) {
  Problems& problems = r.problems;
  if (spec.backend.empty()) return;  // already reported
  if (spec.backend == "host") {
    out->host_provided = true;
    if (!spec.options.empty())
      problems.add(spec.options_at, "comm.options", DDPH_INVALID_ARGUMENT,
                   "backend 'host' takes no options (the host configures its own communicator)");
    return;
  }
  const std::string family = "comm_" + spec.backend;
  Location at = spec.backend_at.line ? spec.backend_at : spec.at;
  out->plugin = load_family(r, family, at, "comm.backend");
  if (out->plugin == nullptr) return;
  out->factory = out->plugin->find_comm(spec.backend);
  if (out->factory == nullptr) {
    problems.add(at, "comm.backend", DDPH_NOT_FOUND,
                 "plugin " + out->plugin->file() + " has no communicator for backend '" +
                     spec.backend + "' (it offers: " + out->plugin->comm_names() + ")");
    return;
  }
  if (resolve_yaml_options(out->factory->options, out->factory->num_options, spec.options,
                           "comm.options", spec.options_at.line ? spec.options_at : spec.at,
                           problems, &out->options))
    check_comm_options(spec, *out, problems);  // the options as a whole (ABI 1.5 check)
}

Job build_job(const ConfigSource& source, Problems& problems, bool open_outside_plugins,
              std::vector<UncheckedFamily>* not_checked) {
  Job job;
  job.config = source.is_text ? parse_config_text(source.text, problems)
                              : parse_config_file(source.path, problems);
  // Without a readable document there is nothing to check against plugins.
  if (!job.config.readable) return job;
  PluginPolicy policy;
  policy.replace_builtin = job.config.replace_builtin;
  job.registry = std::make_shared<Registry>(plugin_search_path(job.config.plugin_path), policy);
  Resolver r{*job.registry, problems, open_outside_plugins, {}};
  resolve_comm(r, job.config.comm, &job.comm);
  if (job.config.hook.family == kAutoFamily) {
    job.auto_choice = resolve_auto(r, job.config.hook);
  } else {
    job.hook = resolve_hook(r, job.config.hook);
    // The options as a whole (ABI 1.5 check), once each hook's schema passed.
    if (job.hook) check_hook_options(job.config.hook, *job.hook, DLDataType{}, problems);
  }
  for (const RuleSpec& rule : job.config.rules) {
    ResolvedRule resolved;
    resolved.max_bytes = rule.max_bytes;
    resolved.hook = resolve_hook(r, rule.hook);
    if (resolved.hook) check_hook_options(rule.hook, *resolved.hook, DLDataType{}, problems);
    job.rules.push_back(std::move(resolved));
  }
  if (not_checked != nullptr) *not_checked = std::move(r.not_checked);
  return job;
}

}  // namespace

std::vector<CandidateInfo> ResolvedAuto::infos() const {
  std::vector<CandidateInfo> out;
  for (const CandidateSpec& c : specs) out.push_back(c.info);
  return out;
}

const ResolvedHook& main_hook(const Job& job) {
  if (job.auto_choice) return *job.auto_choice->candidates.front();
  DDPH_CHECK(job.hook != nullptr, DDPH_INTERNAL, "a job without a hook");
  return *job.hook;
}

Job load_job(const ConfigSource& source) {
  Problems problems;
  Job job = build_job(source, problems, true, nullptr);
  problems.throw_if_any();
  return job;
}

std::vector<std::string> check_job(const ConfigSource& source) {
  return check_job(source, true).problems;
}

JobCheck check_job(const ConfigSource& source, bool open_outside_plugins) {
  Problems problems;
  JobCheck check;
  build_job(source, problems, open_outside_plugins, &check.not_checked);
  check.problems = problems.lines();
  return check;
}

}  // namespace loader
}  // namespace ddph
