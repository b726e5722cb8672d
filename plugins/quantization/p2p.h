// Point-to-point calls through the communicator table, in the manner of
// core/comm_call.h (which covers the collectives only).
#pragma once

#include <ddph/ddph.h>

#include "core/tensor.h"

namespace ddph {
namespace quantization {

// Throw DDPH_UNSUPPORTED when the communicator has no send/recv.
void comm_send(ddph_comm_t* comm, const FlatTensor& buf, int peer, void* stream);
void comm_recv(ddph_comm_t* comm, FlatTensor& buf, int peer, void* stream);

}  // namespace quantization
}  // namespace ddph
