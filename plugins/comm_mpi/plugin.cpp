// libddph_comm_mpi.so: the MPI communicator, for jobs launched with mpirun
// (or any MPI launcher). MPI finds the peers itself: no rendezvous.
#include <ddph/ddph.h>
#include <mpi.h>

#include <chrono>
#include <memory>
#include <thread>

#include "core/base/error.h"
#include "core/base/options.h"
#include "core/comm/comm_plugin.h"
#include "core/comm/host_staging.h"
#include "plugins/comm_mpi/communicator.h"
#include "plugins/comm_mpi/mpi_check.h"
#include "plugins/comm_mpi/mpi_runtime.h"

namespace ddph {
namespace comm_mpi {
namespace {

// The loader's rank and world must be MPI's: ddphooks has no other way to
// learn them, and a mismatch would pair the wrong ranks' buckets.
void check_placement(const ddph_comm_init_t& init) {
  int rank = 0, world = 0;
  MPICHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "comm_mpi create");
  MPICHECK(MPI_Comm_size(MPI_COMM_WORLD, &world), "comm_mpi create");
  DDPH_CHECK(init.rank == rank && init.world_size == world, DDPH_INVALID_ARGUMENT,
             "comm_mpi create: the session was opened as rank "
                 << init.rank << " of " << init.world_size << ", but MPI_COMM_WORLD says rank "
                 << rank << " of " << world
                 << "; launch the job with mpirun, one process per rank, and pass MPI's rank "
                    "and size (ddph train and ddph bench take them from the launcher's "
                    "OMPI_COMM_WORLD_RANK/SIZE or PMI_RANK/SIZE; a host sets "
                    "ddph_session_options.rank/world_size or DDPH_RANK/DDPH_WORLD_SIZE)");
}

// A private copy of MPI_COMM_WORLD: ddphooks' messages never match the
// host's. MPI_Comm_idup, so that a missing rank is a timeout, not a hang.
MPI_Comm dup_world(const ddph_comm_init_t& init) {
  MPI_Comm dup = MPI_COMM_NULL;
  MPI_Request req = MPI_REQUEST_NULL;
  MPICHECK(MPI_Comm_idup(MPI_COMM_WORLD, &dup, &req), "comm_mpi create");
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(init.timeout_ms);
  for (int done = 0; !done; std::this_thread::yield()) {
    MPICHECK(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "comm_mpi create");
    DDPH_CHECK(done || std::chrono::steady_clock::now() < deadline, DDPH_TIMEOUT,
               "comm_mpi create on rank " << init.rank << ": timed out after " << init.timeout_ms
                                          << " ms waiting for the " << init.world_size
                                          << " ranks of MPI_COMM_WORLD to create the "
                                             "communicator (a rank did not open the session)");
  }
  return dup;
}

}  // namespace

struct MpiPlugin {
  // No rendezvous: init.rendezvous and init.store may be unset and are not
  // used, as MPI's launcher wired the ranks up before the process started.
  static constexpr CommPluginInfo kInfo{
      "comm_mpi", "mpi",
      "MPI (e.g. Open MPI under mpirun) on CPU tensors (CUDA tensors staged through host "
      "memory); ranks come from the MPI launcher, no rendezvous",
      Rendezvous::kNone};
  static inline const ddph_option_spec_t kOptions[] = {
      spec_bool("staging", "true",
                "copy through the communicator's own buffers, so that a timed-out collective "
                "never writes into the caller's memory; false saves two copies per call"),
  };

  static std::unique_ptr<CommBackend> connect(const ddph_comm_init_t& init) {
    ensure_mpi();
    check_placement(init);
    // The option, or its default when the caller passed no options at all.
    const Options options(init.options, init.num_options);
    const bool staging = options.has("staging") ? options.get_bool("staging") : true;
    MPI_Comm dup = dup_world(init);
    std::unique_ptr<Communicator> comm;
    try {
      comm =
          std::make_unique<Communicator>(dup, std::chrono::milliseconds(init.timeout_ms), staging);
    } catch (...) {
      MPI_Comm_free(&dup);
      throw;
    }
    return stage_cuda_through_host(std::move(comm), "mpi");
  }
};

}  // namespace comm_mpi
}  // namespace ddph

DDPH_DEFINE_COMM_PLUGIN(::ddph::comm_mpi::MpiPlugin)
