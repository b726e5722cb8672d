#include "core/base/error.h"

#include "core/base/host.h"

namespace ddph {

const char* code_name(ddph_code_t code) {
  switch (code) {
    case DDPH_OK: return "DDPH_OK";
    case DDPH_INVALID_ARGUMENT: return "DDPH_INVALID_ARGUMENT";
    case DDPH_UNSUPPORTED: return "DDPH_UNSUPPORTED";
    case DDPH_NOT_FOUND: return "DDPH_NOT_FOUND";
    case DDPH_VERSION_MISMATCH: return "DDPH_VERSION_MISMATCH";
    case DDPH_COMM_FAILURE: return "DDPH_COMM_FAILURE";
    case DDPH_TIMEOUT: return "DDPH_TIMEOUT";
    case DDPH_OUT_OF_MEMORY: return "DDPH_OUT_OF_MEMORY";
    case DDPH_INTERNAL: return "DDPH_INTERNAL";
    case DDPH_NONFINITE: return "DDPH_NONFINITE";
  }
  return "DDPH_UNKNOWN_CODE";
}

void throw_if_error(ddph_error_t* error) {
  if (error == nullptr) return;
  const ddph_host_t* h = host();
  ddph_code_t code = h->error_code(error);
  std::string message = h->error_message(error);
  h->error_free(error);
  throw Error(code, message);
}

ddph_error_t* make_c_error(ddph_code_t code, const std::string& message) {
  return host()->error_new(code == DDPH_OK ? DDPH_INTERNAL : code, message.c_str());
}

}  // namespace ddph
