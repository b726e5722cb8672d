// `ddph choose`'s answer: the job file it would choose, as YAML with the
// measured times as comments, or as one JSON line.
#pragma once

#include <string>
#include <vector>

#include "loader/auto/candidates.h"
#include "tool/choose/measure.h"
#include "tool/choose/options.h"

namespace ddph::tool {

// The YAML: a comment per bucket size with its candidates' times, `comm:`,
// `hook:` (the largest size's choice) and, where smaller sizes chose
// another candidate, `rules:` by size (first match wins, as the loader
// reads them).
std::string choice_yaml(const ChooseOptions& o, const std::vector<loader::CandidateSpec>& specs,
                        const ChooseResult& r);

// The same as one JSON line (--json).
void print_choice_json(const ChooseOptions& o, const std::vector<loader::CandidateSpec>& specs,
                       const ChooseResult& r);

// The job file the ranks run: `comm:` and the auto hook with the options
// that let it decide quickly (and --candidates).
std::string measuring_job(const ChooseOptions& o);

}  // namespace ddph::tool
