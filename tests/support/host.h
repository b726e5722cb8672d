// Tests hand plugins the loader's own host table (libddph.so's ddph_host()),
// so errors made by plugins are the objects a real host receives.
#pragma once

#include <ddph/ddph.h>

#include <string>

namespace ddph_test {

// Code and message of an error, freeing it. NULL gives DDPH_OK and "".
struct ErrorInfo {
  ddph_code_t code = DDPH_OK;
  std::string message;
};

inline ErrorInfo take_error(ddph_error_t* error) {
  ErrorInfo info{ddph_error_code(error), ddph_error_message(error)};
  ddph_error_free(error);
  return info;
}

}  // namespace ddph_test
