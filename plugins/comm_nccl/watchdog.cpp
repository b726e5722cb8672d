#include "plugins/comm_nccl/watchdog.h"

#include <sstream>

#include "core/base/host.h"
#include "plugins/comm_nccl/nccl_check.h"

namespace ddph {
namespace comm_nccl {

Watchdog::Watchdog(std::shared_ptr<GuardedComm> comm, int device, std::chrono::milliseconds timeout)
    : comm_(std::move(comm)), device_(device), timeout_(timeout), thread_([this] { loop(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  for (Pending& p : pending_) cudaEventDestroy(p.done);
}

void Watchdog::track(cudaStream_t stream, const char* what) {
  cudaEvent_t done = nullptr;
  DDPH_CUDA(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  const cudaError_t recorded = cudaEventRecord(done, stream);
  if (recorded != cudaSuccess) cudaEventDestroy(done);
  DDPH_CUDA(recorded);
  {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back({done, std::chrono::steady_clock::now() + timeout_, what});
  }
  wake_.notify_all();
}

bool Watchdog::check_pending() {
  const auto now = std::chrono::steady_clock::now();
  while (!pending_.empty()) {
    Pending& p = pending_.front();
    const cudaError_t state = cudaEventQuery(p.done);
    if (state == cudaSuccess) {
      cudaEventDestroy(p.done);
      pending_.pop_front();
      continue;
    }
    if (state == cudaErrorNotReady && now <= p.deadline) break;
    std::ostringstream why;
    if (state == cudaErrorNotReady)
      why << p.what << " did not complete within " << timeout_.count() << " ms";
    else
      why << p.what << " failed on the GPU: " << cudaGetErrorString(state);
    abort(state == cudaErrorNotReady ? DDPH_TIMEOUT : DDPH_COMM_FAILURE, why.str());
    return false;
  }
  // Errors NCCL found in the background (a peer gone, a network error).
  ncclResult_t async = ncclSuccess;
  try {
    comm_->with("watchdog", [&](ncclComm_t c) { return ncclCommGetAsyncError(c, &async); });
  } catch (const Error&) {
    return false;  // already aborted
  }
  if (async != ncclSuccess && async != ncclInProgress) {
    abort(DDPH_COMM_FAILURE,
          std::string("NCCL reported an asynchronous error: ") + ncclGetErrorString(async));
    return false;
  }
  return true;
}

void Watchdog::abort(ddph_code_t code, const std::string& why) {
  // The next call on this communicator fails with the reason, but after the
  // last bucket of a job there may be no next call: the log keeps it.
  log(DDPH_LOG_ERROR, "comm_nccl", "aborting the communicator: " + why);
  comm_->abort(code, why);
}

void Watchdog::loop() {
  cudaSetDevice(device_);
  std::unique_lock<std::mutex> lock(mu_);
  bool alive = true;
  while (!stop_ && alive) {
    // Busy work is polled every millisecond; an idle communicator still
    // hears about asynchronous errors within 100 ms.
    wake_.wait_for(lock, std::chrono::milliseconds(pending_.empty() ? 100 : 1));
    if (stop_) break;
    alive = check_pending();
  }
}

}  // namespace comm_nccl
}  // namespace ddph
