#include "core/comm/host_staging.h"

#ifdef DDPH_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "core/base/error.h"
#include "core/comm/args.h"
#include "core/kernels/cuda/cuda_check.h"
#include "core/kernels/cuda/device_guard.h"
#endif

namespace ddph {

#ifdef DDPH_HAVE_CUDA
namespace {

// One argument of one call: the caller's tensor, or a host copy of it.
class StagedArg {
 public:
  // Host tensors pass through untouched. A CUDA tensor is checked, and with
  // copy_in its bytes are copied to `host` and waited for.
  StagedArg(const DLTensor* t, std::vector<unsigned char>& host, bool copy_in, void* stream,
            const char* collective, const char* arg, const std::string& who)
      : caller_(t) {
    if (t == nullptr || t->device.device_type != kDLCUDA) return;
    buf_ = check_comm_tensor(t, collective, arg, who.c_str(), CommMemory::kHostOrDevice);
    staged_ = true;
    const std::string where = who + " " + collective;
    cuda::DeviceGuard device(t->device.device_id, where.c_str());
    if (buf_.bytes() != 0) {
      // A host pointer labelled kDLCUDA would otherwise be read as device
      // memory by the copy: name the misuse instead.
      cudaPointerAttributes attr{};
      cuda::check(cudaPointerGetAttributes(&attr, buf_.data), where.c_str(),
                  "cudaPointerGetAttributes");
      DDPH_CHECK(attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged,
                 DDPH_INVALID_ARGUMENT,
                 collective << ": " << arg << " is labelled kDLCUDA but its data is not CUDA "
                            << "device memory");
    }
    if (host.size() < buf_.bytes()) host.resize(buf_.bytes());
    view_ = *t;
    view_.data = host.data();
    view_.byte_offset = 0;
    view_.device = DLDevice{kDLCPU, 0};
    if (copy_in && buf_.bytes() != 0) {
      auto s = static_cast<cudaStream_t>(stream);
      // Device to pageable host memory returns once copied; the wait also
      // orders the copy after the caller's earlier work on the stream.
      cuda::check(cudaMemcpyAsync(host.data(), buf_.data, buf_.bytes(), cudaMemcpyDeviceToHost, s),
                  where.c_str(), "cudaMemcpyAsync (device to host)", DDPH_COMM_FAILURE);
      cuda::check(cudaStreamSynchronize(s), where.c_str(), "cudaStreamSynchronize",
                  DDPH_COMM_FAILURE);
    }
  }

  // What the inner communicator gets.
  DLTensor* tensor() const { return staged_ ? &view_ : const_cast<DLTensor*>(caller_); }

  // Copies the host result back, enqueued on the caller's stream. From
  // pageable memory cudaMemcpyAsync returns once it has taken the bytes, so
  // the host buffer may be reused by the next call at once.
  void copy_out(void* stream, const char* collective, const std::string& who) const {
    if (!staged_ || buf_.bytes() == 0) return;
    const std::string where = who + " " + collective;
    cuda::DeviceGuard device(caller_->device.device_id, where.c_str());
    cuda::check(cudaMemcpyAsync(buf_.data, view_.data, buf_.bytes(), cudaMemcpyHostToDevice,
                                static_cast<cudaStream_t>(stream)),
                where.c_str(), "cudaMemcpyAsync (host to device)", DDPH_COMM_FAILURE);
  }

 private:
  const DLTensor* caller_;
  bool staged_ = false;
  CommBuf buf_{};
  mutable DLTensor view_{};
};

// Staging would hide that send and recv live on different devices.
void refuse_mixed(const DLTensor* send, const DLTensor* recv, const char* collective,
                  const std::string& who) {
  if (send == nullptr || recv == nullptr) return;
  if (send->device.device_type != kDLCUDA && recv->device.device_type != kDLCUDA) return;
  check_same_dtype(
      check_comm_tensor(send, collective, "send", who.c_str(), CommMemory::kHostOrDevice),
      check_comm_tensor(recv, collective, "recv", who.c_str(), CommMemory::kHostOrDevice),
      collective);
}

bool same_cuda_buffer(const DLTensor* a, const DLTensor* b) {
  return a != nullptr && b != nullptr && a->device.device_type == kDLCUDA &&
         b->device.device_type == kDLCUDA && a->data == b->data && a->byte_offset == b->byte_offset;
}

class HostStagedComm : public CommBackend {
 public:
  HostStagedComm(std::unique_ptr<CommBackend> inner, std::string who)
      : inner_(std::move(inner)), who_(std::move(who)) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }

  void allreduce(const DLTensor* send, DLTensor* recv, ddph_reduce_op_t op, void* stream) override {
    // In place stays in place: one host copy serves as send and recv.
    refuse_mixed(send, recv, "allreduce", who_);
    const bool in_place = same_cuda_buffer(send, recv);
    StagedArg s(send, send_host_, true, stream, "allreduce", "send", who_);
    StagedArg r(in_place ? nullptr : recv, recv_host_, false, stream, "allreduce", "recv", who_);
    inner_->allreduce(s.tensor(), in_place ? s.tensor() : r.tensor(), op, nullptr);
    (in_place ? s : r).copy_out(stream, "allreduce", who_);
  }

  void allgather(const DLTensor* send, DLTensor* recv, void* stream) override {
    refuse_mixed(send, recv, "allgather", who_);
    StagedArg s(send, send_host_, true, stream, "allgather", "send", who_);
    StagedArg r(recv, recv_host_, false, stream, "allgather", "recv", who_);
    inner_->allgather(s.tensor(), r.tensor(), nullptr);
    r.copy_out(stream, "allgather", who_);
  }

  void reduce_scatter(const DLTensor* send, DLTensor* recv, ddph_reduce_op_t op,
                      void* stream) override {
    refuse_mixed(send, recv, "reduce_scatter", who_);
    StagedArg s(send, send_host_, true, stream, "reduce_scatter", "send", who_);
    StagedArg r(recv, recv_host_, false, stream, "reduce_scatter", "recv", who_);
    inner_->reduce_scatter(s.tensor(), r.tensor(), op, nullptr);
    r.copy_out(stream, "reduce_scatter", who_);
  }

  void broadcast(DLTensor* buf, int root, void* stream) override {
    // Only the root's bytes matter going in, only the others' coming out.
    const bool is_root = root == inner_->rank();
    StagedArg b(buf, send_host_, is_root, stream, "broadcast", "buf", who_);
    inner_->broadcast(b.tensor(), root, nullptr);
    if (!is_root) b.copy_out(stream, "broadcast", who_);
  }

  void barrier() override { inner_->barrier(); }

  void send(const DLTensor* buf, int peer, void* stream) override {
    StagedArg b(buf, send_host_, true, stream, "send", "buf", who_);
    inner_->send(b.tensor(), peer, nullptr);
  }

  void recv(DLTensor* buf, int peer, void* stream) override {
    StagedArg b(buf, recv_host_, false, stream, "recv", "buf", who_);
    inner_->recv(b.tensor(), peer, nullptr);
    b.copy_out(stream, "recv", who_);
  }

  void alltoallv(const DLTensor* send, const int64_t* send_counts, DLTensor* recv,
                 const int64_t* recv_counts, void* stream) override {
    refuse_mixed(send, recv, "alltoallv", who_);
    StagedArg s(send, send_host_, true, stream, "alltoallv", "send", who_);
    StagedArg r(recv, recv_host_, false, stream, "alltoallv", "recv", who_);
    inner_->alltoallv(s.tensor(), send_counts, r.tensor(), recv_counts, nullptr);
    r.copy_out(stream, "alltoallv", who_);
  }

  std::unique_ptr<CommBackend> split(int color, int key) override {
    std::unique_ptr<CommBackend> sub = inner_->split(color, key);
    if (!sub) return nullptr;
    return std::make_unique<HostStagedComm>(std::move(sub), who_);
  }

  bool counts_bytes() const override { return inner_->counts_bytes(); }
  uint64_t bytes_sent() override { return inner_->bytes_sent(); }
  bool counts_bytes_per_peer() const override { return inner_->counts_bytes_per_peer(); }
  uint64_t bytes_sent_to(int peer) override { return inner_->bytes_sent_to(peer); }

 private:
  std::unique_ptr<CommBackend> inner_;
  std::string who_;
  // Reused host copies, grown as needed: calls on one communicator are
  // serialized (ddph.h), so two suffice.
  std::vector<unsigned char> send_host_, recv_host_;
};

}  // namespace
#endif

std::unique_ptr<CommBackend> stage_cuda_through_host(std::unique_ptr<CommBackend> inner,
                                                     const char* who) {
#ifdef DDPH_HAVE_CUDA
  return std::make_unique<HostStagedComm>(std::move(inner), who);
#else
  (void)who;
  return inner;
#endif
}

}  // namespace ddph
