// Turning gloo's exceptions into ddph::Error with the right code, and keeping
// a gloo call from killing the process with SIGPIPE.
#pragma once

#include <string>

#include "core/base/error.h"

namespace ddph {
namespace comm_gloo {

// Blocks SIGPIPE on the calling thread while alive. gloo writes to its
// sockets with writev(), which raises SIGPIPE when a peer has died; the
// default action would kill the survivor instead of giving it an error.
// A SIGPIPE raised meanwhile is consumed before the old mask comes back.
class SigpipeBlock {
 public:
  SigpipeBlock();
  ~SigpipeBlock();
  SigpipeBlock(const SigpipeBlock&) = delete;
  SigpipeBlock& operator=(const SigpipeBlock&) = delete;

 private:
  bool was_pending_ = false;
  bool changed_mask_ = false;
};

// DDPH_TIMEOUT when gloo's text says it timed out, else DDPH_COMM_FAILURE.
ddph_code_t code_for_gloo_text(const std::string& text);

// The error for a gloo exception thrown while doing `what` on `rank`.
// Call from inside a catch block: it inspects the current exception.
Error translate_current_exception(const char* what, int rank);

// Runs fn (which calls gloo) with SIGPIPE blocked and rethrows any exception
// as ddph::Error naming what and rank.
template <class Fn>
void gloo_call(const char* what, int rank, Fn&& fn) {
  SigpipeBlock block;
  try {
    fn();
  } catch (...) {
    throw translate_current_exception(what, rank);
  }
}

}  // namespace comm_gloo
}  // namespace ddph
