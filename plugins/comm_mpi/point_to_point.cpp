// send/recv, alltoallv and split: the operations that address peers one by
// one, on the same staging and timeout rules as the collectives.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/base/error.h"
#include "plugins/comm_mpi/communicator.h"
#include "plugins/comm_mpi/mpi_types.h"

namespace ddph {
namespace comm_mpi {
namespace {

// Point-to-point messages and collectives never match each other in MPI;
// one tag keeps sends to a peer in order (MPI's non-overtaking rule).
constexpr int kP2PTag = 0;
// Bounds the memory held by posted sends nobody has received yet.
constexpr size_t kMaxPendingSends = 64;

}  // namespace

CommBuf Communicator::check_p2p(const DLTensor* buf_t, int peer, const char* what) {
  const CommBuf buf = check_p2p_args(buf_t, peer, rank_, size_, what, kReach);
  check_mpi_count(buf.numel, what, "buf numel");
  check_not_broken(what);
  return buf;
}

void Communicator::send(const DLTensor* buf_t, int peer, void* /*stream*/) {
  const char* what = "send";
  const CommBuf buf = check_p2p(buf_t, peer, what);
  if (buf.numel == 0) return;
  reap_sends(what);
  if (pending_sends_.size() >= kMaxPendingSends) {
    // Wait for the oldest only: that keeps memory bounded.
    PendingSend& oldest = *pending_sends_.front();
    wait(&oldest.request, what, {&oldest.data});
    pending_sends_.pop_front();
  }
  auto pending = std::make_unique<PendingSend>();
  pending->peer = peer;
  char* stage = pending->data.get(buf.bytes());
  std::memcpy(stage, buf.data, buf.bytes());
  check(MPI_Isend(stage, int(buf.numel), mpi_datatype(buf.dtype), peer, kP2PTag, comm_,
                  &pending->request),
        "MPI_Isend", what);
  pending_sends_.push_back(std::move(pending));
  count(buf.bytes());
}

void Communicator::recv(DLTensor* buf_t, int peer, void* /*stream*/) {
  const char* what = "recv";
  const CommBuf buf = check_p2p(buf_t, peer, what);
  if (buf.numel == 0) return;
  reap_sends(what);
  char* work = staging_ ? recv_stage_.get(buf.bytes()) : static_cast<char*>(buf.data);
  MPI_Request req = MPI_REQUEST_NULL;
  check(MPI_Irecv(work, int(buf.numel), mpi_datatype(buf.dtype), peer, kP2PTag, comm_, &req),
        "MPI_Irecv", what);
  MPI_Status status;
  wait(&req, what, {&recv_stage_}, &status);
  // A longer message fails in MPI (truncation); a shorter one must not pass
  // for a full buffer.
  int got = 0;
  check(MPI_Get_count(&status, mpi_datatype(buf.dtype), &got), "MPI_Get_count", what);
  DDPH_CHECK(size_t(got) == buf.numel, DDPH_INVALID_ARGUMENT,
             where(what) << ": peer " << peer << " sent " << got << " elements, but buf holds "
                         << buf.numel);
  if (work != buf.data) std::memcpy(buf.data, work, buf.bytes());
}

void Communicator::alltoallv(const DLTensor* send_t, const int64_t* send_counts, DLTensor* recv_t,
                             const int64_t* recv_counts, void* /*stream*/) {
  const char* what = "alltoallv";
  const auto [send, recv] =
      check_alltoallv_args(send_t, send_counts, recv_t, recv_counts, rank_, size_, kReach);
  const size_t world = size_t(size_);
  std::vector<int> scounts(world), sdispls(world), rcounts(world), rdispls(world);
  int64_t send_total = 0, recv_total = 0;
  for (size_t p = 0; p < world; ++p) {
    // Offsets are MPI ints too: check the running totals before each block.
    check_mpi_count(size_t(send_total), what, "a send offset");
    check_mpi_count(size_t(recv_total), what, "a recv offset");
    check_mpi_count(size_t(send_counts[p]), what, "a send count");
    check_mpi_count(size_t(recv_counts[p]), what, "a recv count");
    sdispls[p] = int(send_total);
    rdispls[p] = int(recv_total);
    scounts[p] = int(send_counts[p]);
    rcounts[p] = int(recv_counts[p]);
    send_total += send_counts[p];
    recv_total += recv_counts[p];
  }
  reap_sends(what);
  check_not_broken(what);
  agree({int64_t(CallKind::kAlltoallv), int64_t(send.dtype), -1, -1, -1}, what, send_counts,
        recv_counts);
  const size_t es = dtype_size(send.dtype);
  // Never a NULL buffer, even for empty tensors: MPI may reject one.
  const bool direct = !staging_ && send.bytes() > 0 && recv.bytes() > 0;
  char* in =
      direct ? static_cast<char*>(send.data) : send_stage_.get(std::max<size_t>(send.bytes(), 1));
  char* out =
      direct ? static_cast<char*>(recv.data) : recv_stage_.get(std::max<size_t>(recv.bytes(), 1));
  if (in != send.data) std::memcpy(in, send.data, send.bytes());
  const MPI_Datatype type = mpi_datatype(send.dtype);
  MPI_Request req = MPI_REQUEST_NULL;
  check(MPI_Ialltoallv(in, scounts.data(), sdispls.data(), type, out, rcounts.data(),
                       rdispls.data(), type, comm_, &req),
        "MPI_Ialltoallv", what);
  wait(&req, what, {&send_stage_, &recv_stage_});
  if (out != recv.data) std::memcpy(recv.data, out, recv.bytes());
  count(uint64_t(send_total - send_counts[size_t(rank_)]) * es);
}

std::unique_ptr<CommBackend> Communicator::split(int color, int key) {
  const char* what = "split";
  reap_sends(what);
  check_not_broken(what);
  // MPI_Comm_split blocks without a timeout. The agreement first, within
  // the timeout, proves that all ranks have arrived, so the split that
  // follows cannot wait on a missing one.
  agree({int64_t(CallKind::kSplit), -1, -1, -1, -1}, what);
  MPI_Comm sub = MPI_COMM_NULL;
  check(MPI_Comm_split(comm_, color < 0 ? MPI_UNDEFINED : color, key, &sub), "MPI_Comm_split",
        what);
  if (sub == MPI_COMM_NULL) return nullptr;
  try {
    return std::make_unique<Communicator>(sub, timeout_, staging_, bytes_);
  } catch (...) {
    MPI_Comm_free(&sub);
    throw;
  }
}

}  // namespace comm_mpi
}  // namespace ddph
