// What the zero hooks check before a step's parameters move, apart from the
// hook's own state: the exchange that lets every rank see every rank's
// findings and loaded run, and whether a loaded optimizer state fits the
// run's buckets.
#pragma once

#include <ddph/ddph.h>

#include <cstdint>
#include <map>
#include <string>

#include "core/optim/state_blob.h"
#include "plugins/zero/layout.h"

namespace ddph {
namespace zero {

// The ranks' verdict on a step (or a bucket) about to move parameters.
struct StepVerdict {
  // Every rank's problems, named by rank, and shards of different runs
  // loaded on different ranks; "" when there is none.
  std::string why;
  // The run the ranks go on as: the one they loaded, else rank 0's.
  uint64_t run_id = 0;
};

// Every rank tells every other its run id, the run of the shards it loaded
// since the last step (0: none, or unknown) and what it found wrong
// (`problems`, "" for nothing). Collective on comm: one allgather, and a
// second for the texts when any rank has one; none at a world of 1.
StepVerdict agree_on_step(ddph_comm_t* comm, uint64_t run_id, uint64_t loaded_run,
                          const std::string& problems);

// Why `full` (every parameter's whole optimizer state, loaded) does not fit
// the parameters of `layouts`, or "": parameters it holds no state for,
// state for parameters the run has not, buffers of another length. Each
// list names up to 8 keys.
std::string full_state_mismatch(const optim::StateMap& full,
                                const std::map<uint64_t, BucketLayout>& layouts);

}  // namespace zero
}  // namespace ddph
