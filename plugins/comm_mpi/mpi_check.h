// Turning MPI return codes into ddph::Error. The communicators this plugin
// makes use MPI_ERRORS_RETURN, so every MPI call's code is checked here.
#pragma once

#include <mpi.h>

#include <string>

#include "core/base/error.h"

namespace ddph {
namespace comm_mpi {

// MPI_Error_string of rc, with its error class's name when it has one.
std::string mpi_error_text(int rc);

// DDPH_OUT_OF_MEMORY, DDPH_INVALID_ARGUMENT for misuse classes (count,
// type, rank, ...), else DDPH_COMM_FAILURE.
ddph_code_t code_for_mpi_error(int rc);

// Throws the error for rc, returned by `call` while doing `what`.
[[noreturn]] void throw_mpi_error(int rc, const char* call, const std::string& what);

}  // namespace comm_mpi
}  // namespace ddph

// MPICHECK(MPI_Ibarrier(comm, &req), "barrier on rank 2"): throws on failure.
#define MPICHECK(call, what)                                          \
  do {                                                                \
    const int mpicheck_rc_ = (call);                                  \
    if (mpicheck_rc_ != MPI_SUCCESS)                                  \
      ::ddph::comm_mpi::throw_mpi_error(mpicheck_rc_, #call, (what)); \
  } while (0)
