#include "tests/comm_gloo/test_host.h"

#include <cstdio>
#include <string>

namespace comm_gloo_test {
namespace {

struct TestError {
  ddph_code_t code;
  std::string message;
};

ddph_error_t* error_new(ddph_code_t code, const char* message) {
  return reinterpret_cast<ddph_error_t*>(new TestError{code, message ? message : ""});
}
void error_free(ddph_error_t* e) {
  delete reinterpret_cast<TestError*>(e);
}
ddph_code_t error_code(const ddph_error_t* e) {
  return e ? reinterpret_cast<const TestError*>(e)->code : DDPH_OK;
}
const char* error_message(const ddph_error_t* e) {
  return e ? reinterpret_cast<const TestError*>(e)->message.c_str() : "";
}
void log(ddph_log_level_t level, const char* family, const char* message) {
  if (level <= DDPH_LOG_WARN)
    std::fprintf(stderr, "[%s] %s\n", family ? family : "ddph", message ? message : "");
}

const ddph_host_t kHost = [] {
  ddph_host_t h{};
  h.struct_size = sizeof h;
  h.abi_major = DDPH_ABI_MAJOR;
  h.abi_minor = DDPH_ABI_MINOR;
  h.error_new = &error_new;
  h.error_free = &error_free;
  h.error_code = &error_code;
  h.error_message = &error_message;
  h.log = &log;
  return h;
}();

}  // namespace

const ddph_host_t* test_host() {
  return &kHost;
}

}  // namespace comm_gloo_test
