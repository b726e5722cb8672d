// Validation of the tensors handed to a communicator's collectives, shared by
// every backend so that each names the collective and the argument the same
// way.
#pragma once

#include <ddph/ddph.h>

#include <cstddef>

#include "core/base/dtype.h"

namespace ddph {

// Where a backend can reach memory.
enum class CommMemory {
  kHost,          // kDLCPU and kDLCUDAHost (Gloo, MPI)
  kHostOrDevice,  // also kDLCUDA (NCCL, which stages host memory through the GPU)
};

// A checked 1-D buffer.
struct CommBuf {
  void* data;
  DType dtype;
  size_t numel;
  DLDevice device;
  size_t bytes() const { return numel * dtype_size(dtype); }
  bool on_cuda() const { return device.device_type == kDLCUDA; }
};

// t must be non-NULL, 1-D contiguous, in memory the backend reaches, of a
// dtype ddphooks reduces. `backend` names the communicator in messages
// ("gloo"). Throws DDPH_INVALID_ARGUMENT or DDPH_UNSUPPORTED otherwise.
CommBuf check_comm_tensor(const DLTensor* t, const char* collective, const char* arg,
                          const char* backend, CommMemory memory);

// What a backend reaches, for the checks of whole calls below.
struct CommReach {
  const char* backend;  // names the communicator in messages ("gloo")
  CommMemory memory;
  int cuda_device = -1;  // where >= 0, CUDA tensors must be on this device
};

// check_comm_tensor with reach's backend and memory, and its device.
CommBuf check_comm_tensor(const DLTensor* t, const char* collective, const char* arg,
                          const CommReach& reach);

// A call's checked send and recv.
struct CommPair {
  CommBuf send, recv;
};
// allreduce's: a reduction op; recv has send's dtype, device and numel.
CommPair check_allreduce_args(const DLTensor* send, const DLTensor* recv, ddph_reduce_op_t op,
                              const CommReach& reach);
// reduce_scatter's: a reduction op; send has `size` times recv's numel.
CommPair check_reduce_scatter_args(const DLTensor* send, const DLTensor* recv, ddph_reduce_op_t op,
                                   int size, const CommReach& reach);
// allgather's: recv has `size` times send's numel.
CommPair check_allgather_args(const DLTensor* send, const DLTensor* recv, int size,
                              const CommReach& reach);
// send's and recv's buffer and peer (check_peer).
CommBuf check_p2p_args(const DLTensor* buf, int peer, int rank, int size, const char* collective,
                       const CommReach& reach);
// broadcast's root must be in [0, size).
void check_root(int root, int size, const char* collective);

// recv must have send's dtype and live on the same device.
void check_same_dtype(const CommBuf& send, const CommBuf& recv, const char* collective);

// numel must equal expected; `rule` says why ("send numel", "size() * recv numel").
void check_numel(const CommBuf& b, size_t expected, const char* collective, const char* arg,
                 const char* rule);

// True when the two buffers share any byte.
bool overlaps(const CommBuf& a, const CommBuf& b);

// allreduce's buffers are one (in place) or apart; true when in place.
bool check_allreduce_buffers(const CommBuf& send, const CommBuf& recv, const char* collective);

// allgather's send is this rank's block of recv (in place, as
// MPI_IN_PLACE) or apart from recv; true when in place (or empty).
bool check_allgather_buffers(const CommBuf& send, const CommBuf& recv, int rank,
                             const char* collective);

void check_op(ddph_reduce_op_t op, const char* collective);

// peer must be in [0, size) and not this rank.
void check_peer(int peer, int rank, int size, const char* collective);

// alltoallv's: send and recv of one dtype and apart; counts of size
// entries, >= 0, summing to send's and recv's numel, and this rank's own
// block as long in both.
CommPair check_alltoallv_args(const DLTensor* send, const int64_t* send_counts,
                              const DLTensor* recv, const int64_t* recv_counts, int rank, int size,
                              const CommReach& reach);

}  // namespace ddph
