// What the zero hooks check before a step's parameters move, apart from the
// hook's own state: the exchange that lets every rank see every rank's
// findings, and whether a loaded optimizer state fits the run's buckets.
#pragma once

#include <ddph/ddph.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/optim/state_blob.h"
#include "plugins/zero/layout.h"

namespace ddph {
namespace zero {

// Every rank's bytes, in rank order (collective on comm, two allgathers: the
// lengths, then the blobs padded to the longest). lengths: every rank's
// length when known already (one allgather fewer), else empty.
std::vector<std::string> allgather_blobs(ddph_comm_t* comm, int world, const std::string& mine,
                                         const std::vector<uint64_t>& lengths = {});

// Why `full` (every parameter's whole optimizer state, loaded) does not fit
// the parameters of `layouts`, or "": parameters it holds no state for,
// state for parameters the run has not, buffers of another length. Each
// list names up to 8 keys.
std::string full_state_mismatch(const optim::StateMap& full,
                                const std::map<uint64_t, BucketLayout>& layouts);

}  // namespace zero
}  // namespace ddph
