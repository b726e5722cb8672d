// The NCCL handle, shared by the caller's thread and the watchdog. Once
// either side aborts it (ncclCommAbort frees the handle), every later use
// fails fast with the reason instead of touching freed memory.
#pragma once

#include <nccl.h>

#include <chrono>
#include <mutex>
#include <string>

#include "core/base/error.h"

namespace ddph {
namespace comm_nccl {

class GuardedComm {
 public:
  explicit GuardedComm(ncclComm_t comm) : comm_(comm) {}
  GuardedComm(const GuardedComm&) = delete;
  GuardedComm& operator=(const GuardedComm&) = delete;

  // Runs fn(handle) under the lock. Throws the abort reason (with `what`)
  // once aborted. Calls in non-blocking mode return at once, so the lock is
  // never held while NCCL waits for peers.
  template <class F>
  auto with(const char* what, F&& fn) {
    std::lock_guard<std::mutex> lock(mu_);
    DDPH_CHECK(comm_ != nullptr, code_, "comm_nccl " << what << ": " << failure_);
    return fn(comm_);
  }

  // Aborts the communicator (idempotent): pending operations end, the handle
  // is freed, and later calls fail with `why` and code.
  void abort(ddph_code_t code, const std::string& why);

  // Polls ncclCommGetAsyncError until the last call has finished enqueuing
  // (non-blocking mode), the deadline passes (abort, DDPH_TIMEOUT), or NCCL
  // reports an error (abort, DDPH_COMM_FAILURE).
  void wait_ready(const char* what, std::chrono::steady_clock::time_point deadline);

  // The handle for a final ncclCommFinalize/Destroy; NULL once aborted.
  ncclComm_t release();

 private:
  std::mutex mu_;
  ncclComm_t comm_;
  ddph_code_t code_ = DDPH_COMM_FAILURE;
  std::string failure_;
};

}  // namespace comm_nccl
}  // namespace ddph
