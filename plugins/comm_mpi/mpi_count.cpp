#include "plugins/comm_mpi/mpi_count.h"

#include <climits>

#include "core/base/error.h"

namespace ddph {
namespace comm_mpi {

void check_mpi_count(size_t n, const char* collective, const char* what) {
  DDPH_CHECK(n <= size_t(INT_MAX), DDPH_UNSUPPORTED,
             collective << ": " << what << " is " << n
                        << " elements, more than MPI's int counts hold (" << INT_MAX
                        << "); split the bucket");
}

}  // namespace comm_mpi
}  // namespace ddph
