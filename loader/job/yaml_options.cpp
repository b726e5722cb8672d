#include "loader/job/yaml_options.h"

#include "core/base/error.h"

namespace ddph {
namespace loader {
namespace {

// Core's messages start with "option 'name' "; the problem line already names
// the key, so drop the repetition.
std::string without_option_prefix(const std::string& message, const char* name) {
  const std::string prefix = std::string("option '") + name + "' ";
  if (message.compare(0, prefix.size(), prefix) == 0) return message.substr(prefix.size());
  return message;
}

std::string known_names(const ddph_option_spec_t* specs, size_t n) {
  std::string names;
  for (size_t i = 0; i < n; ++i) names += (i ? ", " : "") + std::string(specs[i].name);
  return names.empty() ? "this hook takes no options" : "known: " + names;
}

}  // namespace

bool resolve_yaml_options(const ddph_option_spec_t* specs, size_t num_specs,
                          const std::vector<OptionValue>& given, const std::string& key_prefix,
                          const Location& section_at, Problems& problems, OptionList* out) {
  bool ok = true;
  std::vector<std::pair<std::string, std::string>> pairs;
  for (size_t g = 0; g < given.size(); ++g) {
    const OptionValue& v = given[g];
    const std::string key = key_prefix + "." + v.name;
    const ddph_option_spec_t* spec = nullptr;
    for (size_t i = 0; i < num_specs && spec == nullptr; ++i)
      if (v.name == specs[i].name) spec = &specs[i];
    if (spec == nullptr) {
      problems.add(v.key_at, key, DDPH_INVALID_ARGUMENT,
                   "unknown option (" + known_names(specs, num_specs) + ")");
      ok = false;
      continue;
    }
    // The config reader has already named a repeated key (as it does any
    // key repeated in a YAML map); the repeat is only left out here.
    bool repeated = false;
    for (size_t h = 0; h < g; ++h) repeated |= given[h].name == v.name;
    if (repeated) {
      ok = false;
      continue;
    }
    // Type, range and choices: core's parser is the one truth for those.
    try {
      OptionList scratch;
      scratch.add(*spec, v.text);
    } catch (const Error& e) {
      problems.add(v.at, key, e.code(), without_option_prefix(e.what(), spec->name));
      ok = false;
      continue;
    }
    pairs.emplace_back(v.name, v.text);
  }
  for (size_t i = 0; i < num_specs; ++i) {
    if (specs[i].default_value != nullptr) continue;
    bool present = false;
    for (const auto& v : given) present |= v.name == specs[i].name;
    if (!present) {
      problems.add(
          section_at, key_prefix + "." + specs[i].name, DDPH_INVALID_ARGUMENT,
          std::string("required option is missing (") + (specs[i].doc ? specs[i].doc : "") + ")");
      ok = false;
    }
  }
  if (!ok) return false;
  try {
    *out = resolve_options(specs, num_specs, pairs);
  } catch (const Error& e) {
    // A default that does not parse against its own spec: the plugin's bug.
    problems.add(section_at, key_prefix, DDPH_INTERNAL, e.what());
    return false;
  }
  return true;
}

}  // namespace loader
}  // namespace ddph
