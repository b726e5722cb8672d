// The collectives. DDPH_AVG divides first (in the buffer's dtype, with the
// CPU kernels' numerics) and then sums, as ddph.h defines it.
#include <string>
#include <vector>

#include "core/base/error.h"
#include "core/kernels/cuda/device_guard.h"
#include "core/kernels/cuda/elementwise_cuda.h"
#include "core/kernels/cuda/scratch_pool.h"
#include "plugins/comm_nccl/communicator.h"
#include "plugins/comm_nccl/nccl_check.h"
#include "plugins/comm_nccl/nccl_types.h"

namespace ddph {
namespace comm_nccl {

template <class Fn>
void Communicator::enqueue_or_abort(const char* what, Fn&& fn) {
  try {
    nccl_check(comm_->with(what, fn), what);
  } catch (const Error& e) {
    // After the lock is released: abort takes it too.
    comm_->abort(DDPH_COMM_FAILURE, std::string(what) + " could not be enqueued: " + e.what());
    throw;
  }
}

template <class Enqueue>
void Communicator::run(const char* what, std::initializer_list<Arg> args, void* stream,
                       Enqueue&& enqueue) {
  cuda::DeviceGuard device(config_.device, "comm_nccl");
  bool on_cuda = false;
  for (const Arg& a : args) on_cuda = on_cuda || a.buf->on_cuda();
  if (on_cuda) {
    cudaStream_t s = static_cast<cudaStream_t>(stream);
    enqueue_or_abort(what, [&](ncclComm_t c) { return enqueue(c, s); });
    comm_->wait_ready(what, deadline());
    watchdog_->track(s, what);
    return;
  }
  // Host memory: NCCL reaches only device memory, so stage through
  // stream-ordered pool memory (core/kernels/cuda/scratch_pool.h).
  std::vector<void*> host;
  for (const Arg& a : args) host.push_back(a.buf->data);
  auto restore = [&] {
    size_t i = 0;
    for (const Arg& a : args) {
      if (a.buf->data != host[i]) cuda::scratch_free(a.buf->data, staging_);
      a.buf->data = host[i++];
    }
  };
  try {
    size_t i = 0;
    for (const Arg& a : args) {
      void* d = nullptr;
      if (a.buf->bytes() > 0) {
        DDPH_CUDA(cuda::scratch_alloc(&d, a.buf->bytes(), config_.device, staging_));
        a.buf->data = d;
        if (a.in)
          DDPH_CUDA(cudaMemcpyAsync(d, host[i], a.buf->bytes(), cudaMemcpyHostToDevice, staging_));
      }
      ++i;
    }
    enqueue_or_abort(what, [&](ncclComm_t c) { return enqueue(c, staging_); });
    comm_->wait_ready(what, deadline());
    // The collective must be done before the copies back are enqueued: a
    // copy into pageable memory blocks until it has run, where no timeout
    // applies, and after an abort the buffers hold no result. wait_ready
    // throws if the communicator failed or was aborted meanwhile.
    wait_staging(what);
    comm_->wait_ready(what, deadline());
    i = 0;
    for (const Arg& a : args) {
      if (a.out && a.buf->bytes() > 0)
        DDPH_CUDA(cudaMemcpyAsync(host[i], a.buf->data, a.buf->bytes(), cudaMemcpyDeviceToHost,
                                  staging_));
      ++i;
    }
    restore();
    wait_staging(what);
  } catch (...) {
    restore();
    throw;
  }
}

void Communicator::allreduce(const DLTensor* send_t, DLTensor* recv_t, ddph_reduce_op_t op,
                             void* stream) {
  const char* what = "allreduce";
  CommPair args = check_allreduce_args(send_t, recv_t, op, reach());
  CommBuf &send = args.send, &recv = args.recv;
  if (send.numel == 0) return;
  const bool in_place = check_allreduce_buffers(send, recv, what);
  const int world = size();
  if (in_place) {
    run(what, {{&recv, true, true}}, stream, [&](ncclComm_t c, cudaStream_t s) {
      if (op == DDPH_AVG)
        DDPH_CUDA(cuda::divide_inplace(recv.dtype, recv.data, recv.numel, world, s));
      return ncclAllReduce(recv.data, recv.data, recv.numel, nccl_type(recv.dtype), nccl_op(op), c,
                           s);
    });
    return;
  }
  run(what, {{&send, true, false}, {&recv, false, true}}, stream,
      [&](ncclComm_t c, cudaStream_t s) {
        const void* from = send.data;
        if (op == DDPH_AVG) {
          // send is the caller's: divide a copy of it, in recv.
          DDPH_CUDA(
              cudaMemcpyAsync(recv.data, send.data, send.bytes(), cudaMemcpyDeviceToDevice, s));
          DDPH_CUDA(cuda::divide_inplace(recv.dtype, recv.data, recv.numel, world, s));
          from = recv.data;
        }
        return ncclAllReduce(from, recv.data, recv.numel, nccl_type(recv.dtype), nccl_op(op), c, s);
      });
}

void Communicator::allgather(const DLTensor* send_t, DLTensor* recv_t, void* stream) {
  const char* what = "allgather";
  CommPair args = check_allgather_args(send_t, recv_t, size(), reach());
  CommBuf &send = args.send, &recv = args.recv;
  if (send.numel == 0) return;
  // In place (as ddph.h allows and NCCL supports) is how the quantization
  // protocols gather.
  check_allgather_buffers(send, recv, rank(), what);
  run(what, {{&send, true, false}, {&recv, false, true}}, stream,
      [&](ncclComm_t c, cudaStream_t s) {
        return ncclAllGather(send.data, recv.data, send.numel, nccl_type(send.dtype), c, s);
      });
}

void Communicator::reduce_scatter(const DLTensor* send_t, DLTensor* recv_t, ddph_reduce_op_t op,
                                  void* stream) {
  const char* what = "reduce_scatter";
  CommPair args = check_reduce_scatter_args(send_t, recv_t, op, size(), reach());
  CommBuf &send = args.send, &recv = args.recv;
  if (recv.numel == 0) return;
  const int world = size();
  // send is copied when DDPH_AVG divides it, or when it overlaps recv
  // (ddph.h allows any alias, as Gloo and MPI take). A nonblocking
  // communicator may still be putting the reduce-scatter on the stream when
  // ncclReduceScatter returns (ncclInProgress), so the copy is freed only
  // once run() has waited for that, or on the way out of a failure.
  void* divided = nullptr;
  cudaStream_t divided_on = nullptr;
  struct FreeDivided {
    void*& p;
    cudaStream_t& s;
    int device;
    ~FreeDivided() {
      // On the communicator's device (a NULL stream is the current
      // device's); stream-ordered, so after the reduce-scatter's read.
      if (p != nullptr) cuda::quietly_on_device(device, [&] { cuda::scratch_free(p, s); });
    }
  } free_divided{divided, divided_on, config_.device};
  run(what, {{&send, true, false}, {&recv, false, true}}, stream,
      [&](ncclComm_t c, cudaStream_t s) {
        const void* from = send.data;
        if (op == DDPH_AVG || overlaps(send, recv)) {
          DDPH_CUDA(cuda::scratch_alloc(&divided, send.bytes(), config_.device, s));
          divided_on = s;
          DDPH_CUDA(cudaMemcpyAsync(divided, send.data, send.bytes(), cudaMemcpyDeviceToDevice, s));
          if (op == DDPH_AVG)
            DDPH_CUDA(cuda::divide_inplace(send.dtype, divided, send.numel, world, s));
          from = divided;
        }
        return ncclReduceScatter(from, recv.data, recv.numel, nccl_type(recv.dtype), nccl_op(op), c,
                                 s);
      });
}

void Communicator::broadcast(DLTensor* buf_t, int root, void* stream) {
  const char* what = "broadcast";
  CommBuf buf = check_comm_tensor(buf_t, what, "buf", reach());
  check_root(root, size(), what);
  if (buf.numel == 0) return;
  run(what, {{&buf, true, true}}, stream, [&](ncclComm_t c, cudaStream_t s) {
    return ncclBroadcast(buf.data, buf.data, buf.numel, nccl_type(buf.dtype), root, c, s);
  });
}

void Communicator::barrier() {
  // A one-element allreduce through the staging path, which waits.
  int32_t token = 0;
  int64_t shape = 1;
  DLTensor t{};
  t.data = &token;
  t.device = {kDLCPU, 0};
  t.ndim = 1;
  t.dtype = {kDLInt, 32, 1};
  t.shape = &shape;
  allreduce(&t, &t, DDPH_SUM, nullptr);
}

void Communicator::send(const DLTensor* buf_t, int peer, void* stream) {
  const char* what = "send";
  CommBuf buf = check_p2p_args(buf_t, peer, rank(), size(), what, reach());
  run(what, {{&buf, true, false}}, stream, [&](ncclComm_t c, cudaStream_t s) {
    return ncclSend(buf.data, buf.numel, nccl_type(buf.dtype), peer, c, s);
  });
}

void Communicator::recv(DLTensor* buf_t, int peer, void* stream) {
  const char* what = "recv";
  CommBuf buf = check_p2p_args(buf_t, peer, rank(), size(), what, reach());
  run(what, {{&buf, false, true}}, stream, [&](ncclComm_t c, cudaStream_t s) {
    return ncclRecv(buf.data, buf.numel, nccl_type(buf.dtype), peer, c, s);
  });
}

void Communicator::alltoallv(const DLTensor* send_t, const int64_t* send_counts, DLTensor* recv_t,
                             const int64_t* recv_counts, void* stream) {
  const char* what = "alltoallv";
  const int me = rank();
  CommPair args =
      check_alltoallv_args(send_t, send_counts, recv_t, recv_counts, me, size(), reach());
  CommBuf &send = args.send, &recv = args.recv;
  const size_t es = dtype_size(send.dtype);
  run(what, {{&send, true, false}, {&recv, false, true}}, stream,
      [&](ncclComm_t c, cudaStream_t s) {
        const ncclDataType_t type = nccl_type(send.dtype);
        char* sp = static_cast<char*>(send.data);
        char* rp = static_cast<char*>(recv.data);
        // One group: NCCL matches the sends and receives of all peers at once.
        DDPH_NCCL(ncclGroupStart());
        try {
          for (int p = 0; p < size(); ++p) {
            if (p != me) {
              if (send_counts[p] > 0)
                DDPH_NCCL(ncclSend(sp, size_t(send_counts[p]), type, p, c, s));
              if (recv_counts[p] > 0)
                DDPH_NCCL(ncclRecv(rp, size_t(recv_counts[p]), type, p, c, s));
            } else if (send_counts[p] > 0) {
              DDPH_CUDA(cudaMemcpyAsync(rp, sp, size_t(send_counts[p]) * es,
                                        cudaMemcpyDeviceToDevice, s));
            }
            sp += size_t(send_counts[p]) * es;
            rp += size_t(recv_counts[p]) * es;
          }
        } catch (...) {
          // A group left open would silently swallow this thread's later
          // NCCL calls.
          ncclGroupEnd();
          throw;
        }
        return ncclGroupEnd();
      });
}

}  // namespace comm_nccl
}  // namespace ddph
