// Who initializes MPI in this run of the test program, from
// DDPH_MPI_TEST_INIT (test_main.cpp):
//   host    the test program, with MPI_THREAD_MULTIPLE, and finalizes it after
//           the tests: the plugin must use that MPI and never finalize it
//   single  the test program, with MPI_THREAD_SINGLE: the plugin must refuse it
//   plugin  nobody but the plugin, which finalizes it at exit
//   host_finalizes  as host, but a test finalizes MPI itself (too early)
#pragma once

namespace comm_mpi_test {

enum class InitMode { kHost, kSingle, kPlugin, kHostFinalizes };
InitMode init_mode();

}  // namespace comm_mpi_test
