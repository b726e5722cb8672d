// The host table libddph.so hands to every plugin, and the error objects
// behind it. Everything here is [thread-safe].
#pragma once

#include <ddph/ddph.h>

#include <string>

// The definition of the ABI's opaque error type. Made only by error_new.
struct ddph_error {
  ddph_code_t code;
  std::string message;
};

namespace ddph {
namespace loader {

// Makes sure ddph::host() (used by core's make_c_error and DDPH_CALL inside the
// loader) is the loader's own table. Cheap; call before any core helper.
void install_loader_host();

}  // namespace loader
}  // namespace ddph
