#include "core/comm_call.h"

#include "core/error.h"

namespace ddph {
namespace {
template <class Fn>
Fn need(Fn fn, const char* what) {
  DDPH_CHECK(fn != nullptr, DDPH_UNSUPPORTED, "the communicator does not provide " << what);
  return fn;
}
}  // namespace

int comm_rank(ddph_comm_t* comm) { return need(comm->rank, "rank")(comm->ctx); }
int comm_size(ddph_comm_t* comm) { return need(comm->size, "size")(comm->ctx); }

void comm_allreduce(ddph_comm_t* comm, FlatTensor& buf, ddph_reduce_op_t op, void* stream) {
  DDPH_CALL(need(comm->allreduce, "allreduce")(comm->ctx, buf.dl(), buf.dl(), op, stream));
}

void comm_allgather(ddph_comm_t* comm, const FlatTensor& send, FlatTensor& recv, void* stream) {
  DDPH_CALL(need(comm->allgather, "allgather")(comm->ctx, send.dl(), recv.dl(), stream));
}

void comm_broadcast(ddph_comm_t* comm, FlatTensor& buf, int root, void* stream) {
  DDPH_CALL(need(comm->broadcast, "broadcast")(comm->ctx, buf.dl(), root, stream));
}

void comm_barrier(ddph_comm_t* comm) { DDPH_CALL(need(comm->barrier, "barrier")(comm->ctx)); }

void comm_send(ddph_comm_t* comm, const FlatTensor& buf, int peer, void* stream) {
  DDPH_CALL(need(comm->send, "send")(comm->ctx, buf.dl(), peer, stream));
}

void comm_recv(ddph_comm_t* comm, FlatTensor& buf, int peer, void* stream) {
  DDPH_CALL(need(comm->recv, "recv")(comm->ctx, buf.dl(), peer, stream));
}

}  // namespace ddph
