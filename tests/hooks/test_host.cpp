#include "tests/hooks/test_host.h"

#include <cstdio>
#include <cstdlib>

namespace ddph_test {
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
  if (std::getenv("DDPH_TEST_VERBOSE") != nullptr)
    std::fprintf(stderr, "[%d] %s: %s\n", int(level), family ? family : "-", message);
}

}  // namespace

const ddph_host_t* test_host() {
  static const ddph_host_t host = [] {
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
  return &host;
}

ErrorInfo take_error(ddph_error_t* error) {
  ErrorInfo info;
  if (error == nullptr) return info;
  info.code = error_code(error);
  info.message = error_message(error);
  error_free(error);
  return info;
}

}  // namespace ddph_test
