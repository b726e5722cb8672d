// Jobs whose every option is in range alone, but which a hook refuses as a
// whole (ABI 1.5 check): what `ddph validate` and ddph_session_open must both
// refuse before connecting, each at the line of the key at fault.
#pragma once

#include <stdlib.h>

#include <string>
#include <vector>

namespace ddph_test {

struct RefusedJob {
  const char* name;
  std::string yaml;  // comm first (lines 1-2), so the hook's lines are fixed
  int line;          // of the key at fault
  const char* key;   // as the problem line names it
  const char* says;  // part of the message
};

// Two ranks over a rendezvous (a fresh folder) that nobody else joins: a
// session that got as far as connecting would wait out the timeout instead
// of failing at once.
inline std::string two_rank_comm() {
  char dir[] = "/tmp/ddph_option_check_XXXXXX";
  const char* made = mkdtemp(dir);
  return std::string("comm: {backend: gloo, rendezvous: \"file://") +
         (made ? made : "/nonexistent") + "\", timeout: 20s, rank: 0, world_size: 2}\n";
}

inline std::vector<RefusedJob> refused_jobs() {
  const std::string comm = two_rank_comm();
  return {
      {"powersgd start_iter 1 with error feedback",
       comm + "hook:\n  family: powersgd\n  name: powersgd\n  options:\n    rank: 2\n"
              "    start_iter: 1\n    error_feedback: true\n",
       7, "hook.options.start_iter", "it must be > 1 when error_feedback or warm_start is on"},
      {"batched powersgd start_iter 0 with warm start",
       comm + "hook:\n  family: powersgd\n  name: batched_powersgd\n  options:\n"
              "    error_feedback: false\n    start_iter: 0\n",
       7, "hook.options.start_iter", "powersgd/batched_powersgd: option 'start_iter' is 0"},
      {"nesterov with momentum 0",
       comm + "hook:\n  family: optimizer_overlap\n  name: hook_then_optimizer\n  options:\n"
              "    lr: 0.1\n    nesterov: true\n  wrap: {family: default, name: allreduce}\n",
       7, "hook.options.nesterov", "option 'nesterov' needs optimizer sgd with momentum > 0"},
      {"nesterov with dampening",
       comm + "hook:\n  family: optimizer_overlap\n  name: hook_then_optimizer\n  options:\n"
              "    momentum: 0.9\n    dampening: 0.1\n    nesterov: true\n"
              "  wrap: {family: default, name: allreduce}\n",
       8, "hook.options.nesterov", "dampening 0.1"},
      {"fp16_wrapper around quantization",
       comm + "hook:\n  family: default\n  name: fp16_wrapper\n  wrap:\n    family: quantization\n"
              "    name: per_tensor\n",
       7, "hook.wrap",
       "quantization/per_tensor: takes float32 buckets only, but the wrapper "
       "around it hands it float16 buckets; remove the fp16_wrapper"},
      {"bf16_wrapper around quantization, inside a rule",
       comm + "hook: {family: default, name: allreduce}\nrules:\n  - when: {max_bytes: 1000}\n"
              "    hook:\n      family: default\n      name: bf16_wrapper\n      wrap:\n"
              "        family: quantization\n        name: per_channel\n",
       10, "rules[0].hook.wrap", "hands it bfloat16 buckets"},
  };
}

}  // namespace ddph_test
