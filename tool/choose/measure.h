// One rank of `ddph choose`: an auto session fed one synthetic bucket of
// each --bucket-size per step, until the chooser has settled (every bucket
// of a step on the candidate it found fastest, after exploring) or the
// step cap; then what it chose per size and what it measured.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tool/choose/options.h"

namespace ddph::tool {

struct SizeChoice {
  int64_t bytes = 0;
  int candidate = -1;  // index in the candidates
  int32_t reason = 0;  // ddph_choice_reason_t of the last step
  // Per candidate, the mean hook seconds of its settled buckets of this
  // size (the shortest of the ranks' means; 0: not timed).
  std::vector<double> seconds;
};

struct ChooseResult {
  std::vector<SizeChoice> sizes;  // ascending bytes
  int steps = 0;
  bool settled = false;
};

// settle_steps: each candidate's (CandidateInfo.settle_steps), in order.
// Collective over the o.world ranks of the session at rendezvous url: every
// rank returns the same result. Throws on the session's errors.
ChooseResult measure_choice(const ChooseOptions& o, const std::string& config,
                            const std::string& url, int rank,
                            const std::vector<uint64_t>& settle_steps);

}  // namespace ddph::tool
