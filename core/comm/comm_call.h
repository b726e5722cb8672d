// Calling a communicator table from C++: checks that the collective exists
// and rethrows its error as ddph::Error.
#pragma once

#include <ddph/ddph.h>

#include <cstdint>
#include <vector>

#include "core/base/tensor.h"

namespace ddph {

int comm_rank(ddph_comm_t* comm);
int comm_size(ddph_comm_t* comm);
void comm_allreduce(ddph_comm_t* comm, FlatTensor& buf, ddph_reduce_op_t op, void* stream);
void comm_allgather(ddph_comm_t* comm, const FlatTensor& send, FlatTensor& recv, void* stream);
// send holds size() blocks of recv's numel; recv gets the reduction of
// block rank().
void comm_reduce_scatter(ddph_comm_t* comm, const FlatTensor& send, FlatTensor& recv,
                         ddph_reduce_op_t op, void* stream);
void comm_broadcast(ddph_comm_t* comm, FlatTensor& buf, int root, void* stream);
void comm_barrier(ddph_comm_t* comm);
// Point-to-point; DDPH_UNSUPPORTED when the communicator has no send/recv.
void comm_send(ddph_comm_t* comm, const FlatTensor& buf, int peer, void* stream);
void comm_recv(ddph_comm_t* comm, FlatTensor& buf, int peer, void* stream);
// The table's alltoallv (ABI 1.1) where it has one; otherwise the same
// exchange as a loop of send/recv (a local copy for the own block), so a
// v1.0 communicator with point-to-point still serves it.
// Whether comm_alltoallv can run on this communicator at all.
bool comm_can_alltoallv(ddph_comm_t* comm);
void comm_alltoallv(ddph_comm_t* comm, const FlatTensor& send,
                    const std::vector<int64_t>& send_counts, FlatTensor& recv,
                    const std::vector<int64_t>& recv_counts, void* stream);

}  // namespace ddph
