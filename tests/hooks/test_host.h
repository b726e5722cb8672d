// The host table the hook tests hand to plugins. A stand-in for libddph.so's
// ddph_host() while the loader is being written; swap this one file when it
// is there.
#pragma once

#include <ddph/ddph.h>

#include <string>

namespace ddph_test {

const ddph_host_t* test_host();

// Code and message of an error made by test_host(), freeing it. NULL gives
// DDPH_OK and "".
struct ErrorInfo {
  ddph_code_t code = DDPH_OK;
  std::string message;
};
ErrorInfo take_error(ddph_error_t* error);

}  // namespace ddph_test
