#include "tool/ranks/job_file.h"

#include <stdexcept>

#include "core/base/error.h"
#include "loader/job/config.h"
#include "loader/job/job.h"

namespace ddph::tool {
namespace {

std::string chain(const ddph::loader::HookSpec& h) {
  std::string s = h.family + "/" + h.name;
  if (h.wrap) s += "(" + chain(*h.wrap) + ")";
  return s;
}

}  // namespace

ddph::loader::Config read_job_config(const std::string& config_path) {
  ddph::loader::Problems problems;
  ddph::loader::Config config;
  try {
    config = ddph::loader::parse_config_file(config_path, problems);
  } catch (const std::exception& e) {
    throw std::runtime_error(config_path + ": " + e.what());
  }
  if (!problems.empty()) throw std::runtime_error(problems.text());
  return config;
}

std::string hook_label(const std::string& config_path) {
  const ddph::loader::Config config = read_job_config(config_path);
  std::string label = chain(config.hook);
  for (const ddph::loader::RuleSpec& rule : config.rules)
    label += " | <=" + std::to_string(rule.max_bytes) + "B: " + chain(rule.hook);
  return label;
}

HookNeeds hook_needs(const std::string& config_path) {
  ddph::loader::ConfigSource source;
  source.path = config_path;
  ddph::loader::Job job = ddph::loader::load_job(source);
  auto needs_of = [](const ddph::loader::ResolvedHook& h) {
    HookNeeds n;
    n.params = (h.hook->flags & DDPH_HOOK_NEEDS_PARAMS) != 0;
    n.grads_there = n.params && (h.hook->flags & DDPH_HOOK_RESULT_ELSEWHERE) != 0;
    for (const ddph::loader::ResolvedHook* e = &h; e != nullptr; e = e->inner.get())
      n.steps = n.steps || (e->hook->flags & DDPH_HOOK_STEPS_OPTIMIZER) != 0;
    return n;
  };
  const HookNeeds main = needs_of(main_hook(job));
  for (const ddph::loader::ResolvedRule& rule : job.rules) {
    const HookNeeds r = needs_of(*rule.hook);
    if (r.params != main.params || r.grads_there != main.grads_there || r.steps != main.steps)
      throw std::runtime_error(
          config_path + ": the rule for buckets <= " + std::to_string(rule.max_bytes) +
          " bytes uses a hook that takes the parameters differently from `hook` (one steps "
          "the optimizer or writes fp32 gradients, the other does not); use the same kind in "
          "every chain");
  }
  return main;
}

ddph::DType parse_bucket_dtype(const std::string& text, const char* flag) {
  if (text == "f32" || text == "float32") return ddph::DType::F32;
  if (text == "bf16" || text == "bfloat16") return ddph::DType::BF16;
  if (text == "f16" || text == "float16") return ddph::DType::F16;
  throw std::invalid_argument(std::string(flag) + " must be f32, bf16 or f16, not '" + text + "'");
}

}  // namespace ddph::tool
