#include "core/comm/comm_call.h"

#include <cstring>

#include "core/base/error.h"
#include "core/base/phase_span.h"

namespace ddph {
namespace {
template <class Fn>
Fn need(Fn fn, const char* what) {
  DDPH_CHECK(fn != nullptr, DDPH_UNSUPPORTED, "the communicator does not provide " << what);
  return fn;
}
// The fallback's sends and receives are parts of one collective span.
void send_unmarked(ddph_comm_t* comm, const FlatTensor& buf, int peer, void* stream) {
  DDPH_CALL(need(comm->send, "send")(comm->ctx, buf.dl(), peer, stream));
}
void recv_unmarked(ddph_comm_t* comm, FlatTensor& buf, int peer, void* stream) {
  DDPH_CALL(need(comm->recv, "recv")(comm->ctx, buf.dl(), peer, stream));
}

bool has_alltoallv(const ddph_comm_t* comm) {
  return comm->struct_size >= DDPH_COMM_SIZE_V1_1 && comm->alltoallv != nullptr;
}

// The send/recv loop behind comm_alltoallv for tables without alltoallv. At
// step k a rank sends to rank + k and receives from rank - k, so each step
// pairs ranks up instead of everyone waiting on the same peer. The counts
// are checked as a backend would check them.
void alltoallv_by_send_recv(ddph_comm_t* comm, const FlatTensor& send,
                            const std::vector<int64_t>& send_counts, FlatTensor& recv,
                            const std::vector<int64_t>& recv_counts, void* stream) {
  const int world = comm_size(comm), rank = comm_rank(comm);
  DDPH_CHECK(send.dl()->dtype.bits == recv.dl()->dtype.bits &&
                 send.dl()->dtype.code == recv.dl()->dtype.code,
             DDPH_INVALID_ARGUMENT, "alltoallv: recv dtype differs from send dtype");
  DType dtype;
  DDPH_CHECK(dtype_from_dl(send.dl()->dtype, &dtype), DDPH_UNSUPPORTED,
             "alltoallv: unsupported dtype");
  const size_t es = dtype_size(dtype);
  std::vector<int64_t> send_at(size_t(world) + 1, 0), recv_at(size_t(world) + 1, 0);
  for (size_t p = 0; p < size_t(world); ++p) {
    DDPH_CHECK(send_counts[p] >= 0 && recv_counts[p] >= 0, DDPH_INVALID_ARGUMENT,
               "alltoallv: a negative count for rank " << p);
    send_at[p + 1] = send_at[p] + send_counts[p];
    recv_at[p + 1] = recv_at[p] + recv_counts[p];
  }
  DDPH_CHECK(send_at[size_t(world)] == send.numel() && recv_at[size_t(world)] == recv.numel(),
             DDPH_INVALID_ARGUMENT,
             "alltoallv: the counts sum to " << send_at[size_t(world)] << " and "
                                             << recv_at[size_t(world)] << ", send and recv hold "
                                             << send.numel() << " and " << recv.numel());
  const size_t me = size_t(rank);
  DDPH_CHECK(send_counts[me] == recv_counts[me], DDPH_INVALID_ARGUMENT,
             "alltoallv: rank " << rank << " sends itself " << send_counts[me]
                                << " elements but expects " << recv_counts[me]);
  // The own block is copied on the host; device buffers need a backend's alltoallv.
  DDPH_CHECK(send.dl()->device.device_type == kDLCPU && recv.dl()->device.device_type == kDLCPU,
             DDPH_UNSUPPORTED,
             "alltoallv: the communicator has no alltoallv, and its send/recv fallback takes "
             "host memory only");
  char* in = static_cast<char*>(data_ptr(*send.dl()));
  char* out = static_cast<char*>(data_ptr(*recv.dl()));
  std::memcpy(out + size_t(recv_at[me]) * es, in + size_t(send_at[me]) * es,
              size_t(send_counts[me]) * es);
  const DLDevice device = send.dl()->device;
  for (int k = 1; k < world; ++k) {
    const size_t to = size_t((rank + k) % world), from = size_t((rank - k + world) % world);
    if (send_counts[to] != 0)
      send_unmarked(comm, FlatTensor(in + size_t(send_at[to]) * es, dtype, send_counts[to], device),
                    int(to), stream);
    if (recv_counts[from] != 0) {
      FlatTensor block(out + size_t(recv_at[from]) * es, dtype, recv_counts[from], device);
      recv_unmarked(comm, block, int(from), stream);
    }
  }
}

}  // namespace

int comm_rank(ddph_comm_t* comm) {
  return need(comm->rank, "rank")(comm->ctx);
}
int comm_size(ddph_comm_t* comm) {
  return need(comm->size, "size")(comm->ctx);
}

void comm_allreduce(ddph_comm_t* comm, FlatTensor& buf, ddph_reduce_op_t op, void* stream) {
  PhaseSpan span(DDPH_PHASE_COLLECTIVE);
  DDPH_CALL(need(comm->allreduce, "allreduce")(comm->ctx, buf.dl(), buf.dl(), op, stream));
}

void comm_allgather(ddph_comm_t* comm, const FlatTensor& send, FlatTensor& recv, void* stream) {
  PhaseSpan span(DDPH_PHASE_COLLECTIVE);
  DDPH_CALL(need(comm->allgather, "allgather")(comm->ctx, send.dl(), recv.dl(), stream));
}

void comm_reduce_scatter(ddph_comm_t* comm, const FlatTensor& send, FlatTensor& recv,
                         ddph_reduce_op_t op, void* stream) {
  PhaseSpan span(DDPH_PHASE_COLLECTIVE);
  DDPH_CALL(
      need(comm->reduce_scatter, "reduce_scatter")(comm->ctx, send.dl(), recv.dl(), op, stream));
}

void comm_broadcast(ddph_comm_t* comm, FlatTensor& buf, int root, void* stream) {
  PhaseSpan span(DDPH_PHASE_COLLECTIVE);
  DDPH_CALL(need(comm->broadcast, "broadcast")(comm->ctx, buf.dl(), root, stream));
}

void comm_barrier(ddph_comm_t* comm) {
  PhaseSpan span(DDPH_PHASE_COLLECTIVE);
  DDPH_CALL(need(comm->barrier, "barrier")(comm->ctx));
}

void comm_send(ddph_comm_t* comm, const FlatTensor& buf, int peer, void* stream) {
  PhaseSpan span(DDPH_PHASE_COLLECTIVE);
  send_unmarked(comm, buf, peer, stream);
}

void comm_recv(ddph_comm_t* comm, FlatTensor& buf, int peer, void* stream) {
  PhaseSpan span(DDPH_PHASE_COLLECTIVE);
  recv_unmarked(comm, buf, peer, stream);
}

void comm_alltoallv(ddph_comm_t* comm, const FlatTensor& send,
                    const std::vector<int64_t>& send_counts, FlatTensor& recv,
                    const std::vector<int64_t>& recv_counts, void* stream) {
  PhaseSpan span(DDPH_PHASE_COLLECTIVE);
  const size_t world = size_t(comm_size(comm));
  DDPH_CHECK(send_counts.size() == world && recv_counts.size() == world, DDPH_INVALID_ARGUMENT,
             "alltoallv: " << send_counts.size() << " send and " << recv_counts.size()
                           << " recv counts for " << world << " ranks");
  if (has_alltoallv(comm)) {
    DDPH_CALL(comm->alltoallv(comm->ctx, send.dl(), send_counts.data(), recv.dl(),
                              recv_counts.data(), stream));
    return;
  }
  DDPH_CHECK(comm_can_alltoallv(comm), DDPH_UNSUPPORTED,
             "the communicator provides neither alltoallv nor send/recv");
  alltoallv_by_send_recv(comm, send, send_counts, recv, recv_counts, stream);
}

bool comm_can_alltoallv(ddph_comm_t* comm) {
  // A world of one only copies its own block.
  return has_alltoallv(comm) || (comm->send != nullptr && comm->recv != nullptr) ||
         comm_size(comm) == 1;
}

}  // namespace ddph
