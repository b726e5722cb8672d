// MPI's process-wide state: started once by this plugin, or adopted from a
// host that started it.
//
// The session calls collectives from its worker thread, not from the thread
// that created the communicator, and the host may call them between flushes
// from its own thread; calls never overlap, so MPI_THREAD_SERIALIZED is the
// least level that works. A host that initialized MPI itself and talks MPI
// on other threads at the same time needs MPI_THREAD_MULTIPLE, which this
// plugin asks for when it initializes MPI.
#pragma once

namespace ddph {
namespace comm_mpi {

// Initializes MPI (MPI_Init_thread, MPI_THREAD_MULTIPLE requested) unless the
// host already did, and checks the thread level is at least
// MPI_THREAD_SERIALIZED. Only MPI that this plugin initialized is finalized,
// at process exit. Throws DDPH_UNSUPPORTED for a too-low thread level or an
// MPI already finalized. [thread-safe]
void ensure_mpi();

// Whether ensure_mpi initialized MPI (false: the host did, or nobody yet).
bool plugin_initialized_mpi();

// Whether the host may be inside MPI on another thread while ddphooks calls
// it: the host initialized MPI with MPI_THREAD_MULTIPLE. [thread-safe]
bool host_may_call_mpi_concurrently();

// "MPI_THREAD_SERIALIZED" etc.
const char* thread_level_name(int level);

// MPI_Finalized, false before init. [thread-safe]
bool mpi_finalized();

}  // namespace comm_mpi
}  // namespace ddph
