#include "tool/choose/answer.h"

#include <cstdio>
#include <sstream>

#include "tool/cli.h"
#include "tool/json_line.h"
#include "tool/ranks/auto_choices.h"

namespace ddph::tool {
namespace {

// The communicator of both the measuring job and the answer.
const char kComm[] = "comm: {backend: gloo, timeout: 60s}";

// A YAML scalar: plain when it is a safe word or number, else quoted.
std::string scalar(const std::string& text) {
  bool plain = !text.empty();
  for (char c : text)
    plain = plain && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' ||
                      c == '-' || c == '+' || c == '/');
  if (plain) return text;
  std::string out = "\"";
  for (char c : text) out += c == '"' || c == '\\' ? std::string("\\") + c : std::string(1, c);
  return out + "\"";
}

std::string hook_yaml(const loader::HookSpec& h) {
  std::string out = "{family: " + scalar(h.family) + ", name: " + scalar(h.name);
  if (!h.options.empty()) {
    out += ", options: {";
    for (size_t i = 0; i < h.options.size(); ++i)
      out += (i ? ", " : "") + h.options[i].name + ": " + scalar(h.options[i].text);
    out += "}";
  }
  return out + "}";
}

Json hook_json(const loader::HookSpec& h) {
  Json options = Json::object();
  for (const auto& v : h.options) options[v.name] = v.text;
  return {{"family", h.family}, {"name", h.name}, {"options", options}};
}

std::string ms(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f ms", seconds * 1e3);
  return buf;
}

// The sizes whose choice differs from the next larger size's: each one a
// rule for buckets up to its size (the largest size's choice is `hook`).
std::vector<size_t> rule_sizes(const ChooseResult& r) {
  std::vector<size_t> out;
  for (size_t i = 0; i + 1 < r.sizes.size(); ++i)
    if (r.sizes[i].candidate != r.sizes[i + 1].candidate) out.push_back(i);
  return out;
}

const loader::CandidateSpec& spec_of(const std::vector<loader::CandidateSpec>& specs,
                                     const SizeChoice& c) {
  return specs.at(size_t(c.candidate < 0 ? 0 : c.candidate));
}

std::string link_text(const ChooseOptions& o) {
  if (o.rank >= 0) return "the network between the ranks";
  return o.link.rate_bits_per_s > 0 ? o.link.text : "unshaped";
}

}  // namespace

std::string measuring_job(const ChooseOptions& o) {
  // Three warm-up steps: the least compressed candidate is timed there
  // (its first two steps are not); no norm test on synthetic gradients.
  std::string options = "warmup_steps: 3, recheck_steps: 2, norm_jump: 0";
  if (!o.candidates.empty()) options += ", candidates: " + scalar(o.candidates);
  return std::string(kComm) + "\nhook: {family: auto, name: auto, options: {" + options + "}}\n";
}

std::string choice_yaml(const ChooseOptions& o, const std::vector<loader::CandidateSpec>& specs,
                        const ChooseResult& r) {
  std::ostringstream out;
  out << "# ddph choose: " << count_of(o.world, "rank") << ", link " << link_text(o) << ", "
      << count_of(r.steps, "step") << (r.settled ? "" : " (not settled: the --steps cap)")
      << "\n# mean hook time per bucket, the shortest of the ranks', of the settled steps:\n";
  for (const SizeChoice& c : r.sizes) {
    out << "# " << format_size(c.bytes) << ": " << spec_of(specs, c).info.name << " ("
        << choice_reason_name(c.reason) << ");";
    for (size_t k = 0; k < specs.size(); ++k)
      out << " " << specs[k].info.name << " "
          << (c.seconds[k] > 0 ? ms(c.seconds[k]) : std::string("not timed"))
          << (k + 1 < specs.size() ? "," : "");
    out << "\n";
  }
  out << kComm << "\n";
  out << "hook: " << hook_yaml(spec_of(specs, r.sizes.back()).hook) << "\n";
  const std::vector<size_t> rules = rule_sizes(r);
  if (!rules.empty()) {
    out << "rules:\n";
    for (size_t i : rules)
      out << "  - when: {max_bytes: " << r.sizes[i].bytes << "}\n"
          << "    hook: " << hook_yaml(spec_of(specs, r.sizes[i]).hook) << "\n";
  }
  return out.str();
}

void print_choice_json(const ChooseOptions& o, const std::vector<loader::CandidateSpec>& specs,
                       const ChooseResult& r) {
  Json sizes = Json::array();
  for (const SizeChoice& c : r.sizes) {
    Json seconds = Json::object();
    for (size_t k = 0; k < specs.size(); ++k)
      seconds[specs[k].info.name] = c.seconds[k] > 0 ? json_number(c.seconds[k]) : Json(nullptr);
    sizes.push_back({{"bucket_bytes", c.bytes},
                     {"candidate", spec_of(specs, c).info.name},
                     {"reason", choice_reason_name(c.reason)},
                     {"seconds", seconds}});
  }
  Json rules = Json::array();
  for (size_t i : rule_sizes(r))
    rules.push_back(
        {{"max_bytes", r.sizes[i].bytes}, {"hook", hook_json(spec_of(specs, r.sizes[i]).hook)}});
  print_json_line({{"world", o.world},
                   {"link", link_text(o)},
                   {"steps", r.steps},
                   {"settled", r.settled},
                   {"hook", hook_json(spec_of(specs, r.sizes.back()).hook)},
                   {"rules", rules},
                   {"buckets", sizes}});
}

}  // namespace ddph::tool
