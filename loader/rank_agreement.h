// Checks that the ranks of a session run the same job on the same buckets.
// Without them a mismatch reaches the communicator: Gloo aborts the whole
// process when a message is longer than the buffer posted for it, and
// equal-sized mismatches silently reduce the wrong data.
#pragma once

#include <ddph/ddph.h>

#include <array>
#include <cstdint>
#include <map>
#include <string>

#include "loader/job.h"

namespace ddph {
namespace loader {

// The job's hook chains as canonical text: every family, hook and option
// value (in schema order) of the main chain and of each rule, with the
// rules' sizes. The communicator's options are left out: they may
// legitimately differ per rank (a host name to listen on).
std::string job_signature(const Job& job);

// Collective, when the session opens: every rank's signature digest is
// gathered; if any differs from rank 0's, every rank throws
// DDPH_INVALID_ARGUMENT naming the ranks that differ.
void agree_on_job(ddph_comm_t* comm, const Job& job);

// The layout of each bucket index: checked across ranks the first time an
// index is seen and whenever its layout changes, so the steady state costs
// nothing. [serialized]: the session's worker thread only.
class BucketLayouts {
 public:
  // Collective when the layout is new; throws DDPH_INVALID_ARGUMENT on every
  // rank when ranks differ, saying how.
  void check(ddph_comm_t* comm, const ddph_bucket_t& bucket);

 private:
  using Layout = std::array<int64_t, 4>;  // index, numel, dtype (code, bits, lanes), device type
  std::map<uint64_t, Layout> agreed_;
};

}  // namespace loader
}  // namespace ddph
