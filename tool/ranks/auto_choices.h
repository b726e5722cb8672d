// What `ddph train`, `bench` and `choose` say about `hook: {family: auto}`
// (docs/auto.md): the candidates a job file's auto hook chooses among, as
// the loader reads them, and each bucket's choice as its metrics record
// gives it (ABI 1.10: candidate and choice_reason), in one spelling.
#pragma once

#include <ddph/ddph.h>

#include <string>
#include <vector>

#include "loader/auto/candidates.h"
#include "loader/auto/chooser.h"

namespace ddph::tool {

// The candidates of config_path's auto hook, in the order that a metrics
// record's candidate indexes; empty when its hook is not auto. Throws
// std::runtime_error with the loader's messages if the file cannot be read
// or its auto options are wrong.
std::vector<ddph::loader::CandidateSpec> auto_candidates(const std::string& config_path);
std::vector<std::string> candidate_names(const std::vector<ddph::loader::CandidateSpec>& specs);

// "fastest", "critical", ...: the loader's spelling of a choice_reason.
using ddph::loader::choice_reason_name;

// The candidate that ran a bucket, by name ("candidate N" past the list);
// "" for a fixed hook's bucket.
std::string candidate_name(const ddph_bucket_metrics_t& r, const std::vector<std::string>& names);

// "q8:fastest": a bucket's candidate and reason; "" for a fixed hook's.
std::string choice_text(const ddph_bucket_metrics_t& r, const std::vector<std::string>& names);

// The choices of the buckets of one step, in bucket order, joined by ';'
// ("q8:fastest;allreduce:fastest"): those of the latest step among
// records; "" when none has a candidate.
std::string last_step_choices(const std::vector<ddph_bucket_metrics_t>& records,
                              const std::vector<std::string>& names);

}  // namespace ddph::tool
