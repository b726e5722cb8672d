#include "loader/session/errors.h"

#include "core/base/error.h"

namespace ddph {
namespace loader {

ddph_error_t* SessionErrors::broken_error() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!broken_) return nullptr;
  return make_c_error(DDPH_COMM_FAILURE, "session is broken since: " + broken_since_);
}

bool SessionErrors::record(ddph_error_t* error, bool ran, bool out_of_step) {
  const ddph_code_t code = ddph_error_code(error);
  std::lock_guard<std::mutex> lock(mu_);
  if (!has_first_) {
    has_first_ = true;
    first_code_ = code;
    first_message_ = ddph_error_message(error);
  }
  // A bucket that never ran (the session was already broken) breaks nothing.
  if (!ran || broken_ || !(code == DDPH_COMM_FAILURE || code == DDPH_TIMEOUT || out_of_step))
    return false;
  broken_ = true;
  broken_since_ = std::string(code_name(code)) + ": " + ddph_error_message(error);
  return true;
}

ddph_error_t* SessionErrors::take_first() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!has_first_) return nullptr;
  has_first_ = false;
  return make_c_error(first_code_, first_message_);
}

}  // namespace loader
}  // namespace ddph
