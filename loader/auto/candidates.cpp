#include "loader/auto/candidates.h"

#include <set>
#include <sstream>

#include "core/base/options.h"
#include "loader/job/yaml_options.h"

namespace ddph {
namespace loader {
namespace {

struct Builtin {
  const char* name;
  const char* family;
  const char* hook;
  std::vector<std::pair<const char*, const char*>> options;
  double nominal_ratio;
  double cpu_ns_per_byte;
  uint64_t settle_steps;
};

// The settings of docs/performance.md's matrix, where each of these was the
// fastest to the target in some cell. PowerSGD starts compressing at its
// third step (the least its error feedback allows) so that exploring it
// costs two allreduce steps, not ten.
const std::vector<Builtin>& builtins() {
  static const std::vector<Builtin> table = {
      {"allreduce", "default", "allreduce", {}, 1, 0.05, 1},
      {"fp16", "default", "fp16_compress", {}, 2, 0.3, 1},
      {"bf16", "default", "bf16_compress", {}, 2, 0.3, 1},
      {"q8",
       "quantization",
       "per_channel",
       {{"protocol", "reduce_scatter"},
        {"channel_size", "512"},
        {"bits", "8"},
        {"min_bytes", "65536"}},
       4,
       0.8,
       1},
      {"q4ef",
       "quantization",
       "per_channel",
       {{"protocol", "reduce_scatter"},
        {"channel_size", "512"},
        {"bits", "4"},
        {"min_bytes", "65536"},
        {"error_feedback", "true"}},
       8,
       1.2,
       1},
      {"powersgd4",
       "powersgd",
       "powersgd",
       {{"rank", "4"}, {"start_iter", "2"}, {"error_feedback", "true"}, {"warm_start", "true"}},
       16,
       1.5,
       2},
  };
  return table;
}

const char* const kDefaultCandidates = "allreduce,fp16,bf16,q8,q4ef,powersgd4";

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, ',')) {
    const size_t b = item.find_first_not_of(" \t");
    const size_t e = item.find_last_not_of(" \t");
    out.push_back(b == std::string::npos ? "" : item.substr(b, e - b + 1));
  }
  if (!text.empty() && text.back() == ',') out.push_back("");
  return out;
}

// The candidate `name` stands for, or false (reported) when it names none.
bool make_candidate(const std::string& name, size_t i, const HookSpec& spec, const Location& at,
                    Problems& problems, CandidateSpec* out) {
  const std::string key = spec.key + ".options.candidates[" + std::to_string(i) + "]";
  out->info.name = name;
  out->hook.key = key;
  out->hook.at = out->hook.family_at = out->hook.name_at = out->hook.options_at = at;
  for (const Builtin& b : builtins()) {
    if (name != b.name) continue;
    out->hook.family = b.family;
    out->hook.name = b.hook;
    for (const auto& o : b.options)
      out->hook.options.push_back(OptionValue{o.first, o.second, at, at});
    out->info.nominal_ratio = b.nominal_ratio;
    out->info.cpu_ns_per_byte = b.cpu_ns_per_byte;
    out->info.settle_steps = b.settle_steps;
    return true;
  }
  const size_t slash = name.find('/');
  if (slash != std::string::npos && slash > 0 && slash + 1 < name.size() &&
      name.find('/', slash + 1) == std::string::npos) {
    out->hook.family = name.substr(0, slash);
    out->hook.name = name.substr(slash + 1);
    out->info.settle_steps = 2;
    if (out->hook.family == kAutoFamily) {
      problems.add(at, key, DDPH_INVALID_ARGUMENT,
                   "'" + name + "': an auto hook cannot be a candidate of another");
      return false;
    }
    return true;
  }
  problems.add(at, key, DDPH_INVALID_ARGUMENT,
               name.empty() ? std::string("an empty candidate (two commas, or one at an end)")
                            : "unknown candidate '" + name + "': use one of " +
                                  builtin_candidate_names() + ", or family/hook");
  return false;
}

}  // namespace

const std::vector<ddph_option_spec_t>& auto_option_specs() {
  static const std::vector<ddph_option_spec_t> specs = {
      spec_string("candidates", kDefaultCandidates,
                  "comma-separated: allreduce, fp16, bf16, q8, q4ef, powersgd4, or family/hook"),
      spec_int("warmup_steps", "8", "steps that run the least compressed candidate only", 0, 1e9),
      spec_float("explore_share", "0.03",
                 "share of the run's bucket time that exploring again may cost", 0, 0.5),
      spec_int("recheck_steps", "5", "the ranks compare their measurements every this many steps",
               1, 1e6),
      spec_float("drift", "1",
                 "a bucket's time changed by 1 + drift times (up or down), and by 10% of the "
                 "step, makes it explore again",
                 0.01, 100),
      spec_float("norm_jump", "1",
                 "the gradient norm changed by 1 + norm_jump times (up or down) against the "
                 "running mean of earlier checks holds lossy candidates back (0: never)",
                 0, 100),
      spec_int("hold_steps", "10", "steps lossy candidates stay held back after a jump", 0, 1e9),
      spec_float("max_compression", "1000000",
                 "largest nominal compression a candidate may have (2: 16-bit, 4: 8-bit, 8: "
                 "4-bit, 16: PowerSGD rank 4)",
                 1, 1e6),
      spec_float("lossy_margin", "0.25",
                 "a lossy candidate (4-bit, PowerSGD) runs only where it shortens the step by "
                 "more than this share of it (0: the fastest runs)",
                 0, 10),
      spec_bool("deterministic", "false",
                "decide from link_mbit and nominal costs, never from timings (reproducible)"),
      spec_float("link_mbit", "0", "the link rate deterministic mode assumes, Mbit/s", 0, 1e9),
  };
  return specs;
}

std::string builtin_candidate_names() {
  std::string out;
  for (const Builtin& b : builtins()) out += (out.empty() ? "" : ", ") + std::string(b.name);
  return out;
}

std::vector<CandidateSpec> parse_auto_options(const HookSpec& spec, Problems& problems,
                                              AutoSettings* settings) {
  AutoSettings& s = *settings;
  std::vector<CandidateSpec> candidates;
  const std::vector<ddph_option_spec_t>& specs = auto_option_specs();
  OptionList list;
  const Location section = spec.options_at.line ? spec.options_at : spec.at;
  const bool resolved = resolve_yaml_options(specs.data(), specs.size(), spec.options,
                                             spec.key + ".options", section, problems, &list);
  // The candidates are checked even when another option is refused: every
  // problem at once.
  std::string names_text = kDefaultCandidates;
  Location at = section;
  for (const OptionValue& v : spec.options)
    if (v.name == "candidates") {
      names_text = v.text;
      at = v.at;
    }
  if (!resolved) {
    const std::vector<std::string> names = split_list(names_text);
    for (size_t i = 0; i < names.size(); ++i) {
      CandidateSpec c;
      make_candidate(names[i], i, spec, at, problems, &c);
    }
    return candidates;
  }
  const Options o(list.data(), list.size());
  s.warmup_steps = o.get_int("warmup_steps");
  s.explore_share = o.get_float("explore_share");
  s.recheck_steps = o.get_int("recheck_steps");
  s.drift = o.get_float("drift");
  s.norm_jump = o.get_float("norm_jump");
  s.hold_steps = o.get_int("hold_steps");
  s.max_compression = o.get_float("max_compression");
  s.lossy_margin = o.get_float("lossy_margin");
  s.deterministic = o.get_bool("deterministic");
  s.link_mbit = o.get_float("link_mbit");
  if (s.deterministic && !(s.link_mbit > 0))
    problems.add(section, spec.key + ".options.link_mbit", DDPH_INVALID_ARGUMENT,
                 "deterministic: true needs the link rate it decides for (link_mbit: 1000 for "
                 "1 Gbit/s)");
  const std::vector<std::string> names = split_list(o.get_string("candidates"));
  std::set<std::string> seen;
  if (names.empty())
    problems.add(at, spec.key + ".options.candidates", DDPH_INVALID_ARGUMENT,
                 "empty: name at least one candidate (" + builtin_candidate_names() + ")");
  for (size_t i = 0; i < names.size(); ++i) {
    CandidateSpec c;
    if (!make_candidate(names[i], i, spec, at, problems, &c)) continue;
    if (!seen.insert(c.info.name).second) {
      problems.add(at, c.hook.key, DDPH_INVALID_ARGUMENT,
                   "candidate '" + c.info.name + "' is named twice");
      continue;
    }
    candidates.push_back(std::move(c));
  }
  if (candidates.size() > kMaxCandidates)
    problems.add(at, spec.key + ".options.candidates", DDPH_INVALID_ARGUMENT,
                 std::to_string(candidates.size()) + " candidates; at most " +
                     std::to_string(kMaxCandidates));
  return candidates;
}

}  // namespace loader
}  // namespace ddph
