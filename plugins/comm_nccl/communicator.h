// One NCCL communicator: ddph_comm_t's collectives on CUDA memory, enqueued
// on the caller's stream without waiting, and on host memory staged through
// the GPU (for the loader's own small control messages) with a bounded wait.
#pragma once

#include <cuda_runtime_api.h>
#include <gloo/rendezvous/store.h>
#include <nccl.h>

#include <chrono>
#include <initializer_list>
#include <memory>
#include <string>

#include "core/comm/args.h"
#include "core/comm/backend.h"
#include "plugins/comm_nccl/guarded_comm.h"
#include "plugins/comm_nccl/watchdog.h"

namespace ddph {
namespace comm_nccl {

struct NcclConfig : CommPlace {
  int device = 0;  // the CUDA device this rank uses
};

class Communicator : public CommBackend {
 public:
  // Collective: rank 0 makes the unique id and publishes it in store (under
  // the session's prefix), the others read it, all call
  // ncclCommInitRankConfig in non-blocking mode and wait up to the timeout.
  static std::unique_ptr<Communicator> connect(const NcclConfig& config,
                                               ::gloo::rendezvous::Store& store);
  ~Communicator() override;

  int rank() const override { return config_.rank; }
  int size() const override { return config_.world; }
  DDPH_COMM_BACKEND_COLLECTIVES;

 private:
  Communicator(const NcclConfig& config, ncclComm_t comm);
  // A Communicator owning comm, which is aborted if that cannot be made.
  static std::unique_ptr<Communicator> adopt(const NcclConfig& config, ncclComm_t comm);

  // One buffer of an operation: what it reads (`in`) and writes (`out`).
  struct Arg {
    CommBuf* buf;
    bool in, out;
  };
  // Runs enqueue(stream) with every Arg's data on the device. CUDA buffers:
  // on the caller's stream, watched, not waited for. Host buffers: copied to
  // pool memory on the staging stream, enqueued there, copied back, and
  // waited for up to the timeout. enqueue sees the device pointers in
  // place of the host ones.
  template <class Enqueue>
  void run(const char* what, std::initializer_list<Arg> args, void* stream, Enqueue&& enqueue);
  // nccl_check(comm_->with(what, fn)), aborting the communicator when it
  // throws: the peers have enqueued their side and would wait for this
  // rank's until the timeout, and a group that failed halfway leaves the
  // handle unusable.
  template <class Fn>
  void enqueue_or_abort(const char* what, Fn&& fn);
  // Waits for the staging stream up to the timeout, aborting on expiry.
  void wait_staging(const char* what);
  std::chrono::steady_clock::time_point deadline() const;
  // Host memory, or CUDA memory on this communicator's device.
  CommReach reach() const { return {"nccl", CommMemory::kHostOrDevice, config_.device}; }

  NcclConfig config_;
  std::shared_ptr<GuardedComm> comm_;
  cudaStream_t staging_ = nullptr;
  std::unique_ptr<Watchdog> watchdog_;
};

}  // namespace comm_nccl
}  // namespace ddph
