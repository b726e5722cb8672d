// A session's errors: the first error since the last flush, and whether
// the session is broken (after a communicator failure, a timeout, or ranks
// found out of step), after which no bucket runs. Buckets finish on the
// worker and, for a pipelined hook, on the finisher. [thread-safe]
#pragma once

#include <ddph/ddph.h>

#include <mutex>
#include <string>

namespace ddph {
namespace loader {

class SessionErrors {
 public:
  // The error a bucket gets instead of running once the session is
  // broken (a new C error), or NULL.
  ddph_error_t* broken_error();
  // A finished bucket's error (not NULL; still the caller's). ran: its hook
  // ran (or was refused); out_of_step: the ranks were found out of step.
  // Returns whether this call broke the session.
  bool record(ddph_error_t* error, bool ran, bool out_of_step);
  // The first error since the last call, as a new C error (NULL if none).
  ddph_error_t* take_first();

 private:
  std::mutex mu_;
  bool has_first_ = false;  // since the last take_first
  ddph_code_t first_code_ = DDPH_OK;
  std::string first_message_;
  bool broken_ = false;
  std::string broken_since_;
};

}  // namespace loader
}  // namespace ddph
