// Checking a hook's or a communicator's options as a whole (ABI 1.5
// ddph_check_t): one check function per hook or communicator, run both by
// its table's check() (ddph validate and ddph_session_open, before
// connecting) and by its create(), so that each rule has one source.
#pragma once

#include <ddph/ddph.h>

#include "core/base/error.h"
#include "core/base/options.h"

namespace ddph {

// What a check function reads and fills. A rule that fails throws
// ddph::Error, through DDPH_CHECK_OPTION when one option is at fault.
struct OptionCheck {
  OptionCheck(const ddph_option_t* options, size_t num_options, DLDataType bucket_dtype)
      : options(options, num_options), bucket_dtype(bucket_dtype) {}
  Options options;  // complete with defaults
  // Hooks: the dtype a wrapper hands this hook; bits == 0 when not known
  // (always so when create() runs the check).
  DLDataType bucket_dtype{};
  // Set by DDPH_CHECK_OPTION: the option at fault (static storage).
  const char* bad_option = nullptr;
  // Wrappers: the dtype of the buckets they hand their inner hook; bits == 0
  // for "the dtype this hook was given".
  DLDataType inner_bucket_dtype{};
};

using OptionCheckFn = void (*)(OptionCheck& c);

// The table entry (ddph_hook_t.check, ddph_comm_factory_t.check): runs fn on
// c's options, filling bad_option and inner_bucket_dtype. No exception
// leaves it.
ddph_error_t* run_option_check(ddph_check_t* c, OptionCheckFn fn) noexcept;

// For create(): runs fn on the options create() received, with no bucket
// dtype known; throws its error.
void run_option_check(const ddph_option_t* options, size_t num_options, OptionCheckFn fn);

}  // namespace ddph

// DDPH_CHECK that names the option at fault: c is the OptionCheck, option a
// string literal (the option spec's name). cond is evaluated once.
#define DDPH_CHECK_OPTION(c, cond, option, msg) \
  do {                                          \
    if (!(cond)) {                              \
      (c).bad_option = (option);                \
      DDPH_FAIL(DDPH_INVALID_ARGUMENT, msg);    \
    }                                           \
  } while (0)
