// What `ddph train` and `ddph bench` read from a job file before running it:
// the name its hook chain goes by in their output, and what its hooks ask of
// the host that runs them.
//
// The hooks' needs are read from their tables: whether they take the
// parameters (DDPH_HOOK_NEEDS_PARAMS) and where their result goes. Both
// tools fill ddph_param_t.data accordingly:
//   - NEEDS_PARAMS alone: data is the parameter, which the hook reads or
//     writes (model_averaging). When a hook of the chain also says
//     DDPH_HOOK_STEPS_OPTIMIZER (hook_then_optimizer), it updates the
//     parameters itself and the host skips its own optimizer step.
//   - NEEDS_PARAMS | RESULT_ELSEWHERE (mixed_precision/allreduce_upcast):
//     data is the parameter's float32 gradient, which the hook writes; the
//     host reads its gradients there instead of from the bucket.
// Also the bucket dtype flag (--dtype) that both tools take.
#pragma once

#include <string>

#include "core/base/dtype.h"
#include "loader/job/config.h"

namespace ddph::tool {

// The job file as the loader parses it (no plugin loaded). Throws
// std::runtime_error with the loader's file:line messages if it cannot be
// read as a job file.
ddph::loader::Config read_job_config(const std::string& config_path);

// "family/name", a wrapper as "outer(inner)", and per-bucket rules after a
// '|': "default/fp16_compress | <=65536B: default/allreduce". Throws
// std::runtime_error with the loader's file:line messages if the file
// cannot be read as a job file.
std::string hook_label(const std::string& config_path);

struct HookNeeds {
  bool params = false;       // fill ddph_param_t.data
  bool grads_there = false;  // ... with the fp32 gradient (else the parameter)
  bool steps = false;        // a hook of the chain steps the optimizer
  bool steps_optimizer() const { return steps; }
  // The hook reads and writes the parameters but neither steps nor leaves
  // gradients there: it averages them (model averaging, local SGD), so the
  // replicas may differ between its averages.
  bool averages_parameters() const { return params && !grads_there && !steps; }
};

// Loads the job's plugins (connects nothing). Every chain (the hook and each
// rule's) must agree, since the host fills one kind of bucket for all of
// them; throws std::runtime_error saying which chains differ.
HookNeeds hook_needs(const std::string& config_path);

// "f32"/"float32", "bf16"/"bfloat16", "f16"/"float16"; throws
// std::invalid_argument naming `flag` otherwise.
ddph::DType parse_bucket_dtype(const std::string& text, const char* flag);

}  // namespace ddph::tool
