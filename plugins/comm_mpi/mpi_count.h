// MPI counts and displacements are C ints: a bucket must fit in one.
#pragma once

#include <cstddef>

namespace ddph {
namespace comm_mpi {

// n (elements, or an offset) must fit in an int; DDPH_UNSUPPORTED naming the
// collective and `what` otherwise.
void check_mpi_count(size_t n, const char* collective, const char* what);

}  // namespace comm_mpi
}  // namespace ddph
