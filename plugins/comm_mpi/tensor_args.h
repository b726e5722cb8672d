// Validation of the tensors handed to a collective, with messages that name
// the collective and the argument. Everything is checked before MPI is
// called, so misuse never breaks the communicator.
#pragma once

#include <ddph/ddph.h>

#include <cstddef>

#include "core/dtype.h"

namespace ddph {
namespace comm_mpi {

// A checked host buffer.
struct HostBuf {
  void* data;
  DType dtype;
  size_t numel;
  size_t bytes() const { return numel * dtype_size(dtype); }
};

// t must be non-NULL, 1-D contiguous, in host memory, of a dtype this
// communicator reduces. Throws DDPH_INVALID_ARGUMENT or DDPH_UNSUPPORTED.
HostBuf check_tensor(const DLTensor* t, const char* collective, const char* arg);

void check_same_dtype(const HostBuf& send, const HostBuf& recv, const char* collective);

// numel must equal expected; `rule` says why ("recv has send's numel").
void check_numel(const HostBuf& b, size_t expected, const char* collective, const char* arg,
                 const char* rule);

// MPI counts are C ints: n (elements, or an offset) must fit in one.
void check_mpi_count(size_t n, const char* collective, const char* what);

bool overlaps(const HostBuf& a, const HostBuf& b);

void check_op(ddph_reduce_op_t op, const char* collective);

}  // namespace comm_mpi
}  // namespace ddph
