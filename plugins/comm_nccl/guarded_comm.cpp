#include "plugins/comm_nccl/guarded_comm.h"

#include <thread>

namespace ddph {
namespace comm_nccl {

void GuardedComm::abort(ddph_code_t code, const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (comm_ == nullptr) return;
  ncclCommAbort(comm_);
  comm_ = nullptr;
  code_ = code;
  failure_ = why + " (the NCCL communicator was aborted; open a new session)";
}

void GuardedComm::wait_ready(const char* what, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    ncclResult_t state = ncclSuccess;
    with(what, [&](ncclComm_t c) { return ncclCommGetAsyncError(c, &state); });
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) {
      const std::string why = std::string(what) + " failed: " + ncclGetErrorString(state);
      abort(DDPH_COMM_FAILURE, why);
      DDPH_FAIL(DDPH_COMM_FAILURE, "comm_nccl " << why);
    }
    if (std::chrono::steady_clock::now() > deadline) {
      const std::string why = std::string(what) + " did not complete within the timeout";
      abort(DDPH_TIMEOUT, why);
      DDPH_FAIL(DDPH_TIMEOUT, "comm_nccl " << why);
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

ncclComm_t GuardedComm::release() {
  std::lock_guard<std::mutex> lock(mu_);
  ncclComm_t c = comm_;
  comm_ = nullptr;
  failure_ = "the communicator is being destroyed";
  return c;
}

}  // namespace comm_nccl
}  // namespace ddph
