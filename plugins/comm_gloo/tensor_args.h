// Validation of the tensors handed to a collective, with messages that name
// the collective and the argument.
#pragma once

#include <ddph/ddph.h>

#include <cstddef>

#include "core/dtype.h"

namespace ddph {
namespace comm_gloo {

// A checked host buffer.
struct HostBuf {
  void* data;
  DType dtype;
  size_t numel;
  size_t bytes() const { return numel * dtype_size(dtype); }
};

// t must be non-NULL, 1-D contiguous, on the host, of a dtype comm_gloo
// reduces. Throws DDPH_INVALID_ARGUMENT or DDPH_UNSUPPORTED otherwise.
HostBuf check_tensor(const DLTensor* t, const char* collective, const char* arg);

// recv must have send's dtype.
void check_same_dtype(const HostBuf& send, const HostBuf& recv, const char* collective);

// numel must equal expected; `rule` says why ("send numel", "size() * recv numel").
void check_numel(const HostBuf& b, size_t expected, const char* collective, const char* arg,
                 const char* rule);

// True when the two buffers share any byte.
bool overlaps(const HostBuf& a, const HostBuf& b);

void check_op(ddph_reduce_op_t op, const char* collective);

}  // namespace comm_gloo
}  // namespace ddph
