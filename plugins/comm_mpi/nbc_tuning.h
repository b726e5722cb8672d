// Open MPI's nonblocking allreduce, steered to its ring for large buffers.
//
// Open MPI's libnbc runs every MPI_Iallreduce on fewer than 4 ranks, and
// every one with MPI_IN_PLACE, as a binomial tree: reduce to one rank, then
// broadcast, the whole buffer through rank 0 twice in a row. Its ring sends
// 2 (p - 1) / p of the buffer per rank, all ranks at once; on 25 MB and 2
// ranks it takes half the time (docs/mpi.md), as fast as the blocking
// MPI_Allreduce. libnbc reads its choice from the control variable
// coll_libnbc_iallreduce_algorithm when the call is posted, so a RingHint
// sets it (through the MPI tool interface) around one MPI_Iallreduce and
// restores it after. Every rank posts the same count, so all agree.
//
// Nothing happens with another MPI library (no such variable), when the user
// chose an algorithm already (e.g. OMPI_MCA_coll_libnbc_iallreduce_algorithm),
// below 64 KiB, where libnbc itself prefers latency-bound trees, or when the
// host initialized MPI with MPI_THREAD_MULTIPLE: the variable is
// process-wide, and a host iallreduce posted on another thread meanwhile
// would take the ring on some ranks only.
#pragma once

#include <cstddef>

namespace ddph {
namespace comm_mpi {

class RingHint {
 public:
  explicit RingHint(size_t bytes);
  ~RingHint();
  RingHint(const RingHint&) = delete;
  RingHint& operator=(const RingHint&) = delete;

 private:
  bool set_ = false;
};

}  // namespace comm_mpi
}  // namespace ddph
