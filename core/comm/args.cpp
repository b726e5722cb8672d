#include "core/comm/args.h"

#include <cstdint>

#include "core/base/error.h"
#include "core/base/tensor.h"

namespace ddph {

CommBuf check_comm_tensor(const DLTensor* t, const char* collective, const char* arg,
                          const char* backend, CommMemory memory) {
  DDPH_CHECK(t != nullptr, DDPH_INVALID_ARGUMENT, collective << ": " << arg << " is NULL");
  const DLDeviceType dev = t->device.device_type;
  const bool host = dev == kDLCPU || dev == kDLCUDAHost;
  DDPH_CHECK(host || (memory == CommMemory::kHostOrDevice && dev == kDLCUDA), DDPH_UNSUPPORTED,
             collective << ": " << arg << " is on device type " << int(dev) << "; the " << backend
                        << " communicator reaches "
                        << (memory == CommMemory::kHost ? "host memory only (kDLCPU)"
                                                        : "host and CUDA memory only"));
  DDPH_CHECK(is_flat(*t), DDPH_INVALID_ARGUMENT,
             collective << ": " << arg << " must be 1-D contiguous (ndim " << t->ndim << ")");
  DDPH_CHECK(t->shape[0] >= 0, DDPH_INVALID_ARGUMENT,
             collective << ": " << arg << " has negative shape[0] " << t->shape[0]);
  DType dtype;
  char text[32];
  DDPH_CHECK(dtype_from_dl(t->dtype, &dtype), DDPH_UNSUPPORTED,
             collective << ": " << arg << " has dtype " << dl_dtype_text(t->dtype, text)
                        << ", which the " << backend
                        << " communicator does not support (float32, float64, float16, bfloat16, "
                           "int32, int64, uint8)");
  DDPH_CHECK(t->data != nullptr || t->shape[0] == 0, DDPH_INVALID_ARGUMENT,
             collective << ": " << arg << "->data is NULL for " << t->shape[0] << " elements");
  return CommBuf{data_ptr(*t), dtype, size_t(t->shape[0]), t->device};
}

CommBuf check_comm_tensor(const DLTensor* t, const char* collective, const char* arg,
                          const CommReach& reach) {
  CommBuf b = check_comm_tensor(t, collective, arg, reach.backend, reach.memory);
  DDPH_CHECK(!b.on_cuda() || reach.cuda_device < 0 || b.device.device_id == reach.cuda_device,
             DDPH_INVALID_ARGUMENT,
             collective << ": " << arg << " is on CUDA device " << b.device.device_id
                        << " but this communicator uses device " << reach.cuda_device);
  return b;
}

namespace {

CommPair check_pair(const DLTensor* send, const DLTensor* recv, const char* collective,
                    const CommReach& reach) {
  CommPair p{check_comm_tensor(send, collective, "send", reach),
             check_comm_tensor(recv, collective, "recv", reach)};
  check_same_dtype(p.send, p.recv, collective);
  return p;
}

}  // namespace

CommPair check_allreduce_args(const DLTensor* send, const DLTensor* recv, ddph_reduce_op_t op,
                              const CommReach& reach) {
  const char* what = "allreduce";
  check_op(op, what);
  CommPair p = check_pair(send, recv, what, reach);
  check_numel(p.recv, p.send.numel, what, "recv", "send numel");
  return p;
}

CommPair check_reduce_scatter_args(const DLTensor* send, const DLTensor* recv, ddph_reduce_op_t op,
                                   int size, const CommReach& reach) {
  const char* what = "reduce_scatter";
  check_op(op, what);
  CommPair p = check_pair(send, recv, what, reach);
  check_numel(p.send, size_t(size) * p.recv.numel, what, "send", "size() * recv numel");
  return p;
}

CommPair check_allgather_args(const DLTensor* send, const DLTensor* recv, int size,
                              const CommReach& reach) {
  const char* what = "allgather";
  CommPair p = check_pair(send, recv, what, reach);
  check_numel(p.recv, size_t(size) * p.send.numel, what, "recv", "size() * send numel");
  return p;
}

CommBuf check_p2p_args(const DLTensor* buf, int peer, int rank, int size, const char* collective,
                       const CommReach& reach) {
  CommBuf b = check_comm_tensor(buf, collective, "buf", reach);
  check_peer(peer, rank, size, collective);
  return b;
}

void check_root(int root, int size, const char* collective) {
  DDPH_CHECK(root >= 0 && root < size, DDPH_INVALID_ARGUMENT,
             collective << ": root " << root << " is outside [0, " << size << ")");
}

void check_same_dtype(const CommBuf& send, const CommBuf& recv, const char* collective) {
  DDPH_CHECK(send.dtype == recv.dtype, DDPH_INVALID_ARGUMENT,
             collective << ": recv dtype " << dtype_name(recv.dtype) << " differs from send dtype "
                        << dtype_name(send.dtype));
  DDPH_CHECK(send.on_cuda() == recv.on_cuda() &&
                 (!send.on_cuda() || send.device.device_id == recv.device.device_id),
             DDPH_INVALID_ARGUMENT,
             collective << ": send and recv are on different devices (types "
                        << int(send.device.device_type) << "/" << int(recv.device.device_type)
                        << ", ids " << send.device.device_id << "/" << recv.device.device_id
                        << ")");
}

void check_numel(const CommBuf& b, size_t expected, const char* collective, const char* arg,
                 const char* rule) {
  DDPH_CHECK(b.numel == expected, DDPH_INVALID_ARGUMENT,
             collective << ": " << arg << " has " << b.numel << " elements, expected " << expected
                        << " (" << rule << ")");
}

bool overlaps(const CommBuf& a, const CommBuf& b) {
  if (a.bytes() == 0 || b.bytes() == 0) return false;
  auto pa = reinterpret_cast<uintptr_t>(a.data), pb = reinterpret_cast<uintptr_t>(b.data);
  return pa < pb + b.bytes() && pb < pa + a.bytes();
}

bool check_allreduce_buffers(const CommBuf& send, const CommBuf& recv, const char* collective) {
  const bool in_place = send.data == recv.data;
  DDPH_CHECK(in_place || !overlaps(send, recv), DDPH_INVALID_ARGUMENT,
             collective << ": send and recv overlap without being the same buffer");
  return in_place;
}

bool check_allgather_buffers(const CommBuf& send, const CommBuf& recv, int rank,
                             const char* collective) {
  const char* own = static_cast<const char*>(recv.data) + size_t(rank) * send.bytes();
  const bool in_place = send.numel == 0 || send.data == own;
  DDPH_CHECK(in_place || !overlaps(send, recv), DDPH_INVALID_ARGUMENT,
             collective << ": send overlaps recv but is not rank " << rank << "'s block of it");
  return in_place;
}

void check_op(ddph_reduce_op_t op, const char* collective) {
  DDPH_CHECK(
      op == DDPH_SUM || op == DDPH_AVG || op == DDPH_MAX || op == DDPH_MIN, DDPH_INVALID_ARGUMENT,
      collective << ": op " << int(op) << " is not DDPH_SUM, DDPH_AVG, DDPH_MAX or DDPH_MIN");
}

void check_peer(int peer, int rank, int size, const char* collective) {
  DDPH_CHECK(peer >= 0 && peer < size, DDPH_INVALID_ARGUMENT,
             collective << ": peer " << peer << " is outside [0, " << size << ")");
  DDPH_CHECK(peer != rank, DDPH_INVALID_ARGUMENT,
             collective << ": peer " << peer << " is this rank itself");
}

CommPair check_alltoallv_args(const DLTensor* send_t, const int64_t* send_counts,
                              const DLTensor* recv_t, const int64_t* recv_counts, int rank,
                              int size, const CommReach& reach) {
  const char* what = "alltoallv";
  const CommPair pair = check_pair(send_t, recv_t, what, reach);
  const CommBuf &send = pair.send, &recv = pair.recv;
  DDPH_CHECK(send_counts != nullptr && recv_counts != nullptr, DDPH_INVALID_ARGUMENT,
             what << ": send_counts or recv_counts is NULL");
  DDPH_CHECK(send.numel == 0 || recv.numel == 0 || !overlaps(send, recv), DDPH_INVALID_ARGUMENT,
             what << ": send and recv overlap");
  uint64_t send_total = 0, recv_total = 0;
  for (int p = 0; p < size; ++p) {
    DDPH_CHECK(send_counts[p] >= 0 && recv_counts[p] >= 0, DDPH_INVALID_ARGUMENT,
               what << ": the count for rank " << p << " is negative");
    send_total += uint64_t(send_counts[p]);
    recv_total += uint64_t(recv_counts[p]);
  }
  check_numel(send, size_t(send_total), what, "send", "the sum of send_counts");
  check_numel(recv, size_t(recv_total), what, "recv", "the sum of recv_counts");
  DDPH_CHECK(send_counts[rank] == recv_counts[rank], DDPH_INVALID_ARGUMENT,
             what << ": rank " << rank << " sends itself " << send_counts[rank]
                  << " elements but expects " << recv_counts[rank]);
  return pair;
}

}  // namespace ddph
