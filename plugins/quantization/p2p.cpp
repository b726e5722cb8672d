#include "plugins/quantization/p2p.h"

#include "core/error.h"

namespace ddph {
namespace quantization {

void comm_send(ddph_comm_t* comm, const FlatTensor& buf, int peer, void* stream) {
  DDPH_CHECK(comm->send != nullptr, DDPH_UNSUPPORTED,
             "protocol reduce_scatter needs the communicator's send, which it does not provide");
  DDPH_CALL(comm->send(comm->ctx, buf.dl(), peer, stream));
}

void comm_recv(ddph_comm_t* comm, FlatTensor& buf, int peer, void* stream) {
  DDPH_CHECK(comm->recv != nullptr, DDPH_UNSUPPORTED,
             "protocol reduce_scatter needs the communicator's recv, which it does not provide");
  DDPH_CALL(comm->recv(comm->ctx, buf.dl(), peer, stream));
}

}  // namespace quantization
}  // namespace ddph
