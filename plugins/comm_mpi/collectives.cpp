// The collectives of ddph_comm_t on MPI's nonblocking collectives. Each
// checks its arguments fully before calling MPI, and waits within the
// timeout. With staging on (the default) MPI works on this communicator's
// own buffers, copied in and out (see communicator.h for why); with it off,
// on the caller's.
//
// Bytes sent are counted with the usual bandwidth-optimal algorithms'
// per-rank payload (docs/mpi.md): allreduce 2(p-1)/p of the buffer,
// reduce_scatter and allgather (p-1) blocks, broadcast (p-1) buffers from
// the root.
#include <algorithm>
#include <cstring>

#include "core/base/error.h"
#include "core/kernels/divide.h"
#include "plugins/comm_mpi/communicator.h"
#include "plugins/comm_mpi/mpi_types.h"
#include "plugins/comm_mpi/nbc_tuning.h"

namespace ddph {
namespace comm_mpi {
namespace {

// dst = src, divided by `divisor` when it is not 1 (AVG's divide-first).
// Chunk by chunk, so that each chunk is divided while it is still in cache
// rather than in a second pass over the whole buffer. dst may be src.
void copy_divided(DType dtype, char* dst, const void* src, size_t numel, int divisor) {
  constexpr size_t kChunkBytes = 128 * 1024;
  const size_t es = dtype_size(dtype), chunk = kChunkBytes / es;
  const char* in = static_cast<const char*>(src);
  for (size_t at = 0; at < numel; at += chunk) {
    const size_t n = std::min(chunk, numel - at);
    if (dst != in) std::memcpy(dst + at * es, in + at * es, n * es);
    if (divisor != 1) divide_inplace(dtype, dst + at * es, n, divisor);
  }
}

}  // namespace

void Communicator::allreduce(const DLTensor* send_t, DLTensor* recv_t, ddph_reduce_op_t op,
                             void* /*stream: host memory only*/) {
  const char* what = "allreduce";
  const auto [send, recv] = check_allreduce_args(send_t, recv_t, op, kReach);
  check_mpi_count(send.numel, what, "send numel");
  check_allreduce_buffers(send, recv, what);
  reap_sends(what);
  check_not_broken(what);
  agree({int64_t(CallKind::kAllreduce), int64_t(send.dtype), int64_t(send.numel), op, -1}, what);
  if (send.numel == 0) return;
  // MPI reduces `work` in place: the staging buffer, or recv itself.
  char* work = staging_ ? send_stage_.get(send.bytes()) : static_cast<char*>(recv.data);
  // DDPH_AVG: PyTorch's divide-first numerics, then a SUM.
  copy_divided(send.dtype, work, send.data, send.numel, op == DDPH_AVG ? size_ : 1);
  MPI_Request req = MPI_REQUEST_NULL;
  {
    RingHint ring(send.bytes());
    check(MPI_Iallreduce(MPI_IN_PLACE, work, int(send.numel), mpi_datatype(send.dtype),
                         mpi_op(send.dtype, op), comm_, &req),
          "MPI_Iallreduce", what);
  }
  wait(&req, what, {&send_stage_});
  if (work != recv.data) std::memcpy(recv.data, work, recv.bytes());
  count(2 * uint64_t(size_ - 1) * send.bytes() / uint64_t(size_));
}

void Communicator::reduce_scatter(const DLTensor* send_t, DLTensor* recv_t, ddph_reduce_op_t op,
                                  void* /*stream*/) {
  const char* what = "reduce_scatter";
  const auto [send, recv] = check_reduce_scatter_args(send_t, recv_t, op, size_, kReach);
  check_mpi_count(recv.numel, what, "recv numel");
  reap_sends(what);
  check_not_broken(what);
  agree({int64_t(CallKind::kReduceScatter), int64_t(recv.dtype), int64_t(recv.numel), op, -1},
        what);
  if (recv.numel == 0) return;
  // The input is copied when it must change (AVG divides first) or may
  // alias the output, which MPI forbids.
  const bool copy_in = staging_ || op == DDPH_AVG || overlaps(send, recv);
  char* in = copy_in ? send_stage_.get(send.bytes()) : static_cast<char*>(send.data);
  char* out = staging_ ? recv_stage_.get(recv.bytes()) : static_cast<char*>(recv.data);
  if (copy_in) copy_divided(send.dtype, in, send.data, send.numel, op == DDPH_AVG ? size_ : 1);
  MPI_Request req = MPI_REQUEST_NULL;
  check(MPI_Ireduce_scatter_block(in, out, int(recv.numel), mpi_datatype(send.dtype),
                                  mpi_op(send.dtype, op), comm_, &req),
        "MPI_Ireduce_scatter_block", what);
  wait(&req, what, {&send_stage_, &recv_stage_});
  if (out != recv.data) std::memcpy(recv.data, out, recv.bytes());
  count(uint64_t(size_ - 1) * recv.bytes());
}

void Communicator::allgather(const DLTensor* send_t, DLTensor* recv_t, void* /*stream*/) {
  const char* what = "allgather";
  const auto [send, recv] = check_allgather_args(send_t, recv_t, size_, kReach);
  check_mpi_count(send.numel, what, "send numel");
  reap_sends(what);
  check_not_broken(what);
  agree({int64_t(CallKind::kAllgather), int64_t(send.dtype), int64_t(send.numel), -1, -1}, what);
  if (send.numel == 0) return;
  // send may be this rank's block of recv (in place): MPI forbids the
  // overlap, so it is copied then.
  const bool copy_in = staging_ || overlaps(send, recv);
  char* in = copy_in ? send_stage_.get(send.bytes()) : static_cast<char*>(send.data);
  char* out = staging_ ? recv_stage_.get(recv.bytes()) : static_cast<char*>(recv.data);
  if (copy_in) std::memcpy(in, send.data, send.bytes());
  MPI_Request req = MPI_REQUEST_NULL;
  const MPI_Datatype type = mpi_datatype(send.dtype);
  check(MPI_Iallgather(in, int(send.numel), type, out, int(send.numel), type, comm_, &req),
        "MPI_Iallgather", what);
  wait(&req, what, {&send_stage_, &recv_stage_});
  if (out != recv.data) std::memcpy(recv.data, out, recv.bytes());
  count(uint64_t(size_ - 1) * send.bytes());
}

void Communicator::broadcast(DLTensor* buf_t, int root, void* /*stream*/) {
  const char* what = "broadcast";
  const CommBuf buf = check_comm_tensor(buf_t, what, "buf", kReach);
  check_root(root, size_, what);
  check_mpi_count(buf.numel, what, "buf numel");
  reap_sends(what);
  check_not_broken(what);
  agree({int64_t(CallKind::kBroadcast), int64_t(buf.dtype), int64_t(buf.numel), -1, root}, what);
  if (buf.numel == 0) return;
  char* work = staging_ ? send_stage_.get(buf.bytes()) : static_cast<char*>(buf.data);
  if (rank_ == root && work != buf.data) std::memcpy(work, buf.data, buf.bytes());
  MPI_Request req = MPI_REQUEST_NULL;
  check(MPI_Ibcast(work, int(buf.numel), mpi_datatype(buf.dtype), root, comm_, &req), "MPI_Ibcast",
        what);
  wait(&req, what, {&send_stage_});
  if (rank_ != root && work != buf.data) std::memcpy(buf.data, work, buf.bytes());
  if (rank_ == root) count(uint64_t(size_ - 1) * buf.bytes());
}

void Communicator::barrier() {
  const char* what = "barrier";
  reap_sends(what);
  check_not_broken(what);
  // The agreement's allreduce is the barrier: no rank has its sum before
  // every rank has arrived.
  agree({int64_t(CallKind::kBarrier), -1, -1, -1, -1}, what);
}

}  // namespace comm_mpi
}  // namespace ddph
