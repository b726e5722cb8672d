#include "loader/host_table.h"

#include <mutex>
#include <new>

#include "core/base/host.h"
#include "loader/log_sink.h"
#include "loader/session/span_registry.h"

namespace ddph {
namespace loader {
namespace {

ddph_error_t* error_new(ddph_code_t code, const char* message) {
  // An error with DDPH_OK would read as success to its receiver; make it a bug report.
  if (code == DDPH_OK) code = DDPH_INTERNAL;
  try {
    return new ddph_error{code, message != nullptr ? message : ""};
  } catch (...) {
    // Copying the message ran out of memory; an empty message allocates nothing.
    return new (std::nothrow) ddph_error{DDPH_OUT_OF_MEMORY, std::string()};
  }
}

void error_free(ddph_error_t* e) { delete e; }
ddph_code_t error_code(const ddph_error_t* e) { return e != nullptr ? e->code : DDPH_OK; }
const char* error_message(const ddph_error_t* e) { return e != nullptr ? e->message.c_str() : ""; }

const ddph_host_t kHost = [] {
  ddph_host_t h{};
  h.struct_size = sizeof h;
  h.abi_major = DDPH_ABI_MAJOR;
  h.abi_minor = DDPH_ABI_MINOR;
  h.error_new = &error_new;
  h.error_free = &error_free;
  h.error_code = &error_code;
  h.error_message = &error_message;
  h.log = &deliver_log_line;
  h.span = &record_span;
  return h;
}();

}  // namespace

void install_loader_host() {
  static std::once_flag once;
  std::call_once(once, [] { set_host(&kHost); });
}

}  // namespace loader
}  // namespace ddph

extern "C" {

const ddph_host_t* ddph_host(void) {
  ddph::loader::install_loader_host();
  return &ddph::loader::kHost;
}

const char* ddph_version(void) {
#define DDPH_STR2(x) #x
#define DDPH_STR(x) DDPH_STR2(x)
  return DDPH_STR(DDPH_ABI_MAJOR) "." DDPH_STR(DDPH_ABI_MINOR);
}

ddph_code_t ddph_error_code(const ddph_error_t* e) {
  return ddph::loader::error_code(e);
}
const char* ddph_error_message(const ddph_error_t* e) {
  return ddph::loader::error_message(e);
}
void ddph_error_free(ddph_error_t* e) {
  delete e;
}

}  // extern "C"
