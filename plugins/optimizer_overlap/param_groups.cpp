#include "plugins/optimizer_overlap/param_groups.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>

#include "core/base/error.h"
#include "core/optim/optimizer_options.h"
#include "plugins/optimizer_overlap/options.h"

namespace ddph {
namespace optimizer_overlap {
namespace {

constexpr const char* kWho = "hook_then_optimizer: option 'param_groups'";

std::string trimmed(const std::string& s) {
  const size_t first = s.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t pos = 0;
  for (;;) {
    const size_t at = s.find(sep, pos);
    out.push_back(trimmed(s.substr(pos, at == std::string::npos ? std::string::npos : at - pos)));
    if (at == std::string::npos) return out;
    pos = at + 1;
  }
}

enum class Applies { kAll, kSgd, kAdam };

// The keys a group may override: torch.optim's per-group options, with
// the hook's names (betas as beta1, beta2).
struct Key {
  const char* name;
  Applies applies;
  double optim::OptimConfig::*number;  // NULL for a flag
  bool optim::OptimConfig::*flag;
};
const Key kKeys[] = {
    {"lr", Applies::kAll, &optim::OptimConfig::lr, nullptr},
    {"weight_decay", Applies::kAll, &optim::OptimConfig::weight_decay, nullptr},
    {"maximize", Applies::kAll, nullptr, &optim::OptimConfig::maximize},
    {"momentum", Applies::kSgd, &optim::OptimConfig::momentum, nullptr},
    {"dampening", Applies::kSgd, &optim::OptimConfig::dampening, nullptr},
    {"nesterov", Applies::kSgd, nullptr, &optim::OptimConfig::nesterov},
    {"beta1", Applies::kAdam, &optim::OptimConfig::beta1, nullptr},
    {"beta2", Applies::kAdam, &optim::OptimConfig::beta2, nullptr},
    {"eps", Applies::kAdam, &optim::OptimConfig::eps, nullptr},
    {"amsgrad", Applies::kAdam, nullptr, &optim::OptimConfig::amsgrad},
};

// Sets key=value of `group` on c.
void apply(const std::string& group, const std::string& pair, optim::OptimConfig* c,
           std::vector<std::string>* seen) {
  const size_t eq = pair.find('=');
  DDPH_CHECK(eq != std::string::npos, DDPH_INVALID_ARGUMENT,
             kWho << ": group \"" << group << "\": '" << pair
                  << "' is not key=value (e.g. \"1,3: weight_decay=0, lr=0.01\")");
  const std::string key = trimmed(pair.substr(0, eq)), value = trimmed(pair.substr(eq + 1));
  DDPH_CHECK(key != "optimizer", DDPH_INVALID_ARGUMENT,
             kWho << ": group \"" << group
                  << "\": the optimizer is one per hook; a group overrides its options only");
  const Key* k =
      std::find_if(std::begin(kKeys), std::end(kKeys), [&](const Key& k) { return key == k.name; });
  DDPH_CHECK(k != std::end(kKeys), DDPH_INVALID_ARGUMENT,
             kWho << ": group \"" << group << "\": unknown key '" << key
                  << "' (lr, weight_decay, maximize; sgd: momentum, dampening, nesterov; "
                     "adam/adamw: beta1, beta2, eps, amsgrad)");
  const bool sgd = c->kind == optim::OptimKind::kSgd;
  // The hook's own options of another optimizer are ignored (the loader
  // fills every default), but a group names its keys on purpose.
  DDPH_CHECK(k->applies == Applies::kAll || (k->applies == Applies::kSgd) == sgd,
             DDPH_INVALID_ARGUMENT,
             kWho << ": group \"" << group << "\": key '" << key << "' is "
                  << (sgd ? "adam/adamw's" : "sgd's") << ", but this hook runs "
                  << optim::optim_name(c->kind));
  DDPH_CHECK(std::find(seen->begin(), seen->end(), key) == seen->end(), DDPH_INVALID_ARGUMENT,
             kWho << ": group \"" << group << "\" sets '" << key << "' twice");
  seen->push_back(key);
  if (k->flag != nullptr) {
    DDPH_CHECK(value == "true" || value == "false", DDPH_INVALID_ARGUMENT,
               kWho << ": group \"" << group << "\": " << key << "='" << value
                    << "' is not true or false");
    c->*k->flag = value == "true";
    return;
  }
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(value.c_str(), &end);
  DDPH_CHECK(!value.empty() && *end == '\0' && errno == 0 && std::isfinite(v),
             DDPH_INVALID_ARGUMENT,
             kWho << ": group \"" << group << "\": " << key << "='" << value
                  << "' is not a finite number");
  c->*k->number = v;
}

}  // namespace

std::vector<ParamGroup> parse_param_groups(const std::string& text, const optim::OptimConfig& base,
                                           const std::vector<size_t>& params) {
  std::vector<ParamGroup> groups;
  if (trimmed(text).empty()) return groups;
  std::map<size_t, size_t> group_of;  // parameter -> its group
  for (const std::string& group : split(text, ';')) {
    if (group.empty()) continue;  // "a; b;" ends with an empty piece
    const size_t colon = group.find(':');
    DDPH_CHECK(colon != std::string::npos, DDPH_INVALID_ARGUMENT,
               kWho << ": group \"" << group
                    << "\" has no ':' between its parameters and its options (e.g. \"1,3: "
                       "weight_decay=0; 4-5: lr=0.01\")");
    ParamGroup g{group, {}, base};
    const std::string selection = trimmed(group.substr(0, colon));
    g.indices = parse_index_list(selection, std::string(kWho) + ": group \"" + group + "\"");
    DDPH_CHECK(!g.indices.empty(), DDPH_INVALID_ARGUMENT,
               kWho << ": group \"" << group << "\" names no parameter before its ':'");
    std::vector<std::string> seen;
    const std::string overrides = trimmed(group.substr(colon + 1));
    DDPH_CHECK(!overrides.empty(), DDPH_INVALID_ARGUMENT,
               kWho << ": group \"" << group << "\" overrides no option after its ':'");
    for (const std::string& pair : split(overrides, ',')) apply(group, pair, &g.optim, &seen);
    const optim::ConfigProblem p = optim::find_config_problem(g.optim);
    DDPH_CHECK(p.option == nullptr, DDPH_INVALID_ARGUMENT,
               kWho << ": group \"" << group << "\": '" << p.option << "' " << p.what);
    for (size_t index : g.indices) {
      const auto [at, fresh] = group_of.emplace(index, groups.size());
      DDPH_CHECK(fresh, DDPH_INVALID_ARGUMENT,
                 kWho << ": parameter " << index << " is in group \"" << groups[at->second].text
                      << "\" and in group \"" << group
                      << "\"; a parameter belongs to one group at most");
      DDPH_CHECK(params.empty() || std::binary_search(params.begin(), params.end(), index),
                 DDPH_INVALID_ARGUMENT,
                 kWho << ": group \"" << group << "\" names parameter " << index
                      << ", which option 'params' leaves out (it would never be stepped)");
    }
    groups.push_back(std::move(g));
  }
  return groups;
}

}  // namespace optimizer_overlap
}  // namespace ddph
