#include "loader/job/option_checks.h"

#include <cstring>
#include <string>

#include "core/base/dtype.h"
#include "core/base/error.h"
#include "core/base/host.h"

namespace ddph {
namespace loader {
namespace {

// What a check() said: DDPH_OK, or the refusal with the option it blames.
struct Verdict {
  ddph_code_t code = DDPH_OK;
  std::string message;
  std::string bad_option;  // empty: none named
  DLDataType inner_bucket_dtype{};
};

Verdict run_check(ddph_error_t* (*check)(ddph_check_t*), const OptionList& options,
                  DLDataType bucket_dtype) {
  ddph_check_t c{};
  c.struct_size = sizeof c;
  c.host = ddph_host();
  c.options = options.data();
  c.num_options = options.size();
  c.bucket_dtype = bucket_dtype;
  Verdict v;
  try {
    DDPH_CALL(check(&c));
    v.inner_bucket_dtype = c.inner_bucket_dtype;
  } catch (const Error& e) {
    v.code = e.code() == DDPH_OK ? DDPH_INVALID_ARGUMENT : e.code();
    v.message = e.what();
    if (c.bad_option != nullptr) v.bad_option = c.bad_option;
  }
  return v;
}

// The plugin's message, led by who refused unless it already says so.
std::string refusal(const std::string& who, const std::string& short_name,
                    const std::string& message) {
  if (message.compare(0, who.size(), who) == 0 ||
      message.compare(0, short_name.size() + 1, short_name + ":") == 0)
    return message;
  return who + ": " + message;
}

// Reports v under key_prefix: at the YAML key of the option it blames when
// the file gives it, else at `fallback` (the option then has its default, or
// is not one of the plugin's: a plugin's bug, reported as it came).
void report(const Verdict& v, const std::string& who, const std::string& short_name,
            const ddph_option_spec_t* specs, size_t num_specs,
            const std::vector<OptionValue>& given, const std::string& key_prefix,
            const std::string& options_key, const Location& options_at, const Location& fallback,
            Problems& problems) {
  const std::string message = refusal(who, short_name, v.message);
  if (v.bad_option.empty()) {
    problems.add(fallback, key_prefix, v.code, message);
    return;
  }
  const std::string key = options_key + "." + v.bad_option;
  for (const OptionValue& o : given) {
    if (o.name == v.bad_option) {
      problems.add(o.key_at, key, v.code, message);
      return;
    }
  }
  bool known = false;
  for (size_t i = 0; i < num_specs; ++i) known |= v.bad_option == specs[i].name;
  problems.add(
      options_at.line ? options_at : fallback, known ? key : key_prefix, v.code,
      known ? message + " (option '" + v.bad_option + "' has its default value)" : message);
}

}  // namespace

void check_hook_options(const HookSpec& spec, const ResolvedHook& hook, DLDataType bucket_dtype,
                        Problems& problems) {
  DLDataType inner_dtype = bucket_dtype;
  const ddph_hook_t& table = *hook.hook;
  if (table.struct_size >= DDPH_HOOK_SIZE_V1_5 && table.check != nullptr) {
    const Verdict v = run_check(table.check, hook.options, bucket_dtype);
    const std::string who = hook.plugin->family() + "/" + table.name;
    if (v.code != DDPH_OK) {
      report(v, who, table.name, table.options, table.num_options, spec.options, spec.key,
             spec.key + ".options", spec.options_at, spec.name_at.line ? spec.name_at : spec.at,
             problems);
    } else if (v.inner_bucket_dtype.bits != 0) {
      inner_dtype = v.inner_bucket_dtype;
    }
  }
  if (hook.inner && spec.wrap) check_hook_options(*spec.wrap, *hook.inner, inner_dtype, problems);
}

void check_comm_options(const CommSpec& spec, const ResolvedComm& comm, Problems& problems) {
  if (comm.host_provided || comm.factory == nullptr) return;
  const ddph_comm_factory_t& factory = *comm.factory;
  if (factory.struct_size < DDPH_COMM_FACTORY_SIZE_V1_5 || factory.check == nullptr) return;
  const Verdict v = run_check(factory.check, comm.options, DLDataType{});
  if (v.code == DDPH_OK) return;
  report(v, comm.plugin->family(), "comm_" + std::string(factory.backend), factory.options,
         factory.num_options, spec.options, "comm.backend", "comm.options", spec.options_at,
         spec.backend_at.line ? spec.backend_at : spec.at, problems);
}

}  // namespace loader
}  // namespace ddph
