#include "plugins/comm_gloo/errors.h"

#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <cerrno>
#include <new>
#include <sstream>

namespace ddph {
namespace comm_gloo {
namespace {

bool sigpipe_pending() {
  sigset_t pending;
  sigemptyset(&pending);
  return sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
}

bool contains(const std::string& s, const char* needle) {
  return s.find(needle) != std::string::npos;
}

}  // namespace

SigpipeBlock::SigpipeBlock() {
  was_pending_ = sigpipe_pending();
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGPIPE);
  if (pthread_sigmask(SIG_BLOCK, &block, &old) == 0) changed_mask_ = !sigismember(&old, SIGPIPE);
}

SigpipeBlock::~SigpipeBlock() {
  // Only a SIGPIPE that gloo raised is swallowed; one that was already
  // pending belongs to the host and stays.
  if (!was_pending_ && sigpipe_pending()) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    struct timespec zero = {0, 0};
    while (sigtimedwait(&set, nullptr, &zero) == -1 && errno == EINTR) {
    }
  }
  if (changed_mask_) {
    sigset_t unblock;
    sigemptyset(&unblock);
    sigaddset(&unblock, SIGPIPE);
    pthread_sigmask(SIG_UNBLOCK, &unblock, nullptr);
  }
}

ddph_code_t code_for_gloo_text(const std::string& text) {
  // gloo 0.5 has no dedicated timeout exception: its timeouts are IoExceptions
  // saying "Timed out ...", "Wait timeout ..." or "Connect timeout ...".
  if (contains(text, "Timed out") || contains(text, "timed out") || contains(text, "timeout") ||
      contains(text, "Timeout"))
    return DDPH_TIMEOUT;
  return DDPH_COMM_FAILURE;
}

Error translate_current_exception(const char* what, int rank) {
  std::ostringstream prefix;
  prefix << what << " on rank " << rank << ": ";
  try {
    throw;
  } catch (const Error& e) {
    // Already ours (the host store, or a check inside the call): keep its code.
    return Error(e.code(), prefix.str() + e.what());
  } catch (const ::gloo::IoException& e) {
    return Error(code_for_gloo_text(e.what()), prefix.str() + "gloo: " + e.what());
  } catch (const ::gloo::EnforceNotMet& e) {
    return Error(code_for_gloo_text(e.what()), prefix.str() + "gloo: " + e.what());
  } catch (const ::gloo::Exception& e) {
    return Error(code_for_gloo_text(e.what()), prefix.str() + "gloo: " + e.what());
  } catch (const std::bad_alloc&) {
    return Error(DDPH_OUT_OF_MEMORY, prefix.str() + "out of memory");
  } catch (const std::exception& e) {
    return Error(DDPH_COMM_FAILURE, prefix.str() + e.what());
  } catch (...) {
    return Error(DDPH_INTERNAL, prefix.str() + "unknown exception");
  }
}

}  // namespace comm_gloo
}  // namespace ddph
