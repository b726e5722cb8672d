#include "tool/ranks/auto_choices.h"

#include <algorithm>
#include <map>
#include <stdexcept>

#include "tool/ranks/job_file.h"

namespace ddph::tool {

std::vector<ddph::loader::CandidateSpec> auto_candidates(const std::string& config_path) {
  const ddph::loader::Config config = read_job_config(config_path);
  if (config.hook.family != ddph::loader::kAutoFamily) return {};
  ddph::loader::Problems problems;
  ddph::loader::AutoSettings settings;
  std::vector<ddph::loader::CandidateSpec> specs =
      ddph::loader::parse_auto_options(config.hook, problems, &settings);
  if (!problems.empty()) throw std::runtime_error(problems.text());
  return specs;
}

std::vector<std::string> candidate_names(const std::vector<ddph::loader::CandidateSpec>& specs) {
  std::vector<std::string> names;
  for (const auto& s : specs) names.push_back(s.info.name);
  return names;
}

std::string candidate_name(const ddph_bucket_metrics_t& r, const std::vector<std::string>& names) {
  if (r.candidate < 0) return "";
  if (size_t(r.candidate) < names.size()) return names[size_t(r.candidate)];
  return "candidate " + std::to_string(r.candidate);
}

std::string choice_text(const ddph_bucket_metrics_t& r, const std::vector<std::string>& names) {
  if (r.candidate < 0) return "";
  return candidate_name(r, names) + ":" + ddph::loader::choice_reason_name(r.choice_reason);
}

std::string last_step_choices(const std::vector<ddph_bucket_metrics_t>& records,
                              const std::vector<std::string>& names) {
  if (records.empty()) return "";
  uint64_t last = 0;
  for (const auto& r : records) last = std::max(last, r.step);
  std::map<uint32_t, std::string> by_bucket;
  for (const auto& r : records)
    if (r.step == last && r.candidate >= 0) by_bucket[r.bucket] = choice_text(r, names);
  std::string out;
  for (const auto& [bucket, text] : by_bucket) out += (out.empty() ? "" : ";") + text;
  return out;
}

}  // namespace ddph::tool
