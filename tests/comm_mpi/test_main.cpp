// main of the MPI test program: every rank of `mpirun -np 3` runs the same
// tests; mpirun fails when any rank does.
#include "tests/comm_mpi/test_main.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace comm_mpi_test {
namespace {
InitMode g_mode = InitMode::kPlugin;
}
InitMode init_mode() {
  return g_mode;
}
}  // namespace comm_mpi_test

int main(int argc, char** argv) {
  using comm_mpi_test::InitMode;
  testing::InitGoogleTest(&argc, argv);
  const char* mode = std::getenv("DDPH_MPI_TEST_INIT");
  if (mode == nullptr || std::strcmp(mode, "plugin") == 0) {
    comm_mpi_test::g_mode = InitMode::kPlugin;
  } else if (std::strcmp(mode, "host") == 0 || std::strcmp(mode, "single") == 0 ||
             std::strcmp(mode, "host_finalizes") == 0) {
    const bool single = std::strcmp(mode, "single") == 0;
    comm_mpi_test::g_mode = single                           ? InitMode::kSingle
                            : std::strcmp(mode, "host") == 0 ? InitMode::kHost
                                                             : InitMode::kHostFinalizes;
    int provided = 0;
    MPI_Init_thread(&argc, &argv, single ? MPI_THREAD_SINGLE : MPI_THREAD_MULTIPLE, &provided);
  } else {
    std::fprintf(stderr, "DDPH_MPI_TEST_INIT is '%s', not host, single, plugin or host_finalizes\n",
                 mode);
    return 2;
  }
  const int rc = RUN_ALL_TESTS();
  // In host mode the plugin must have left MPI running: finalizing twice
  // would abort the process.
  if (comm_mpi_test::g_mode == InitMode::kHostFinalizes) return rc;
  if (comm_mpi_test::g_mode != InitMode::kPlugin) {
    int finalized = 1;
    MPI_Finalized(&finalized);
    if (finalized) {
      std::fprintf(stderr, "MPI was finalized behind the host's back\n");
      return 1;
    }
    MPI_Finalize();
  }
  return rc;
}
