#include "plugins/comm_mpi/mpi_check.h"

#include <sstream>

namespace ddph {
namespace comm_mpi {

std::string mpi_error_text(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS || len <= 0)
    return "MPI error code " + std::to_string(rc);
  return std::string(text, size_t(len));
}

ddph_code_t code_for_mpi_error(int rc) {
  int cls = MPI_ERR_OTHER;
  if (MPI_Error_class(rc, &cls) != MPI_SUCCESS) return DDPH_COMM_FAILURE;
  switch (cls) {
    case MPI_ERR_NO_MEM:
      return DDPH_OUT_OF_MEMORY;
    case MPI_ERR_BUFFER:
    case MPI_ERR_COUNT:
    case MPI_ERR_TYPE:
    case MPI_ERR_TAG:
    case MPI_ERR_RANK:
    case MPI_ERR_ROOT:
    case MPI_ERR_OP:
    case MPI_ERR_ARG:
    case MPI_ERR_TRUNCATE:
      return DDPH_INVALID_ARGUMENT;
    default:
      return DDPH_COMM_FAILURE;
  }
}

void throw_mpi_error(int rc, const char* call, const std::string& what) {
  std::ostringstream os;
  os << what << ": " << call << " failed: " << mpi_error_text(rc);
  throw Error(code_for_mpi_error(rc), os.str());
}

}  // namespace comm_mpi
}  // namespace ddph
