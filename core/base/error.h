// Errors inside ddphooks are C++ exceptions of one type, ddph::Error. They are
// turned into ddph_error_t objects at the C boundary by ddph::guard(), so no
// exception ever crosses the ABI.
#pragma once

#include <ddph/ddph.h>

#include <sstream>
#include <stdexcept>
#include <string>

namespace ddph {

class Error : public std::runtime_error {
 public:
  Error(ddph_code_t code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ddph_code_t code() const { return code_; }

 private:
  ddph_code_t code_;
};

// Name of a code, as printed in messages ("DDPH_TIMEOUT").
const char* code_name(ddph_code_t code);

// Throws the error a C call returned, taking ownership of it (frees it).
void throw_if_error(ddph_error_t* error);

// Makes a C error object through the host table of this shared object.
ddph_error_t* make_c_error(ddph_code_t code, const std::string& message);

// Runs body and turns any exception into a C error; NULL when body returns.
template <class Body>
ddph_error_t* guard(Body&& body) noexcept {
  try {
    body();
    return nullptr;
  } catch (const Error& e) {
    return make_c_error(e.code(), e.what());
  } catch (const std::bad_alloc&) {
    return make_c_error(DDPH_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return make_c_error(DDPH_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return make_c_error(DDPH_INTERNAL, "internal error: unknown exception");
  }
}

}  // namespace ddph

// The one check macro: DDPH_CHECK(cond, code, "text " << value).
#define DDPH_CHECK(cond, code, msg)         \
  do {                                      \
    if (!(cond)) {                          \
      std::ostringstream ddph_check_os_;    \
      ddph_check_os_ << msg;                \
      throw ::ddph::Error((code), ddph_check_os_.str()); \
    }                                       \
  } while (0)

#define DDPH_FAIL(code, msg) DDPH_CHECK(false, code, msg)

// Calls a C function that returns ddph_error_t* and rethrows its error.
#define DDPH_CALL(expr) ::ddph::throw_if_error(expr)
