// Enqueued work must end within the communicator's timeout even though no
// hook waits for it (success on CUDA means "ordered on the stream"). The
// watchdog records an event after each operation on a caller's stream and a
// thread checks them against their deadlines and NCCL's asynchronous errors;
// a missed deadline or an error aborts the communicator, so the stream is
// released and the next call fails with the reason: PyTorch's NCCL watchdog,
// in small.
#pragma once

#include <cuda_runtime_api.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "plugins/comm_nccl/guarded_comm.h"

namespace ddph {
namespace comm_nccl {

class Watchdog {
 public:
  Watchdog(std::shared_ptr<GuardedComm> comm, int device, std::chrono::milliseconds timeout);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Watches the work enqueued on stream so far, as operation `what`.
  void track(cudaStream_t stream, const char* what);

 private:
  struct Pending {
    cudaEvent_t done;
    std::chrono::steady_clock::time_point deadline;
    const char* what;
  };
  void loop();
  // Checks the oldest entries; false once the communicator is aborted.
  bool check_pending();
  // Logs why (at ERROR) and aborts the communicator.
  void abort(ddph_code_t code, const std::string& why);

  std::shared_ptr<GuardedComm> comm_;
  int device_;
  std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Pending> pending_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace comm_nccl
}  // namespace ddph
