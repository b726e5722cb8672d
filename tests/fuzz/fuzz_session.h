// Sessions for the fuzzers: world 1 over Gloo with a private file store, the
// build's plugins on the search path, opened once and reused across inputs.
#pragma once

#include <ddph/ddph.h>

#include <string>
#include <vector>

namespace ddph_fuzz {

// Opens one session per hook YAML ("{family: ..., name: ...}"); aborts the
// fuzzer with a message if one does not open (a build problem, not a find).
std::vector<ddph_session_t*> open_sessions(const std::vector<std::string>& hooks);

// Submits and flushes; returns the code (errors are fine, crashes are not).
ddph_code_t run(ddph_session_t* s, ddph_bucket_t* b);

}  // namespace ddph_fuzz
