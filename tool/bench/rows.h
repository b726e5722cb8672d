// `ddph bench`'s rows: the name each config's row goes by, what is said
// about it before the run, and how its figures are printed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tool/bench/options.h"
#include "tool/bench/paired.h"

namespace ddph::tool {

// A config's row: its hook chain (hook_label), the name the text table
// gives it (row_names) and whether a warning before the run already said
// that it will compress nothing (warn_before_the_run).
struct Row {
  std::string label, name;
  bool warned = false;
};

// Each config's row name: its hook chain, and where configs share a chain
// (two option sets of one hook), the config file's stem after it, e.g.
// "quantization/per_channel (quantization_rs8)"; the path as given when
// the stems are alike too, and "#N" when even the paths are.
std::vector<std::string> row_names(const std::vector<std::string>& configs,
                                   const std::vector<std::string>& labels);

// On rank 0 before any config runs: a powersgd config whose timed
// iterations will send the bucket whole is named with the reason and what
// to pass instead, so that the user can stop the run rather than read a
// plain allreduce's figure as PowerSGD's. Marks the rows it warned about. A
// config that cannot be loaded is left to its session, which names the
// problem.
void warn_before_the_run(const BenchOptions& o, std::vector<Row>& rows);

// The text table's header, its first column label_width wide.
void print_header(size_t label_width);

// A config's figures: a JSON line (--json) or a table row with the lines
// under it; first, a warning when a compressing hook compressed nothing.
void print_result(const BenchOptions& o, const std::string& config, const Row& row,
                  size_t label_width, int64_t bucket_bytes, const Result& r);

}  // namespace ddph::tool
