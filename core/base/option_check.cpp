#include "core/base/option_check.h"

namespace ddph {

ddph_error_t* run_option_check(ddph_check_t* c, OptionCheckFn fn) noexcept {
  const char* bad_option = nullptr;
  ddph_error_t* error = guard([&] {
    DDPH_CHECK(c != nullptr && c->struct_size >= DDPH_CHECK_SIZE_V1_5, DDPH_INVALID_ARGUMENT,
               "check: the ddph_check_t is NULL or older than v1.5");
    c->bad_option = nullptr;
    c->inner_bucket_dtype = DLDataType{};
    OptionCheck check(c->options, c->num_options, c->bucket_dtype);
    try {
      fn(check);
    } catch (...) {
      bad_option = check.bad_option;
      throw;
    }
    c->inner_bucket_dtype = check.inner_bucket_dtype;
  });
  if (error != nullptr && c != nullptr && c->struct_size >= DDPH_CHECK_SIZE_V1_5)
    c->bad_option = bad_option;
  return error;
}

void run_option_check(const ddph_option_t* options, size_t num_options, OptionCheckFn fn) {
  OptionCheck check(options, num_options, DLDataType{});
  fn(check);
}

}  // namespace ddph
