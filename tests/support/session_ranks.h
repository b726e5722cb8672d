// Helpers for tests that run real ranks over Gloo through the public
// session API (libddph.so), each rank a separate process.
#pragma once

#include <ddph/ddph.h>

#include <cstdint>
#include <string>
#include <vector>

namespace ddph_test {

// Opens a session from YAML text with a file store in dir; NULL and a
// printed message on failure.
ddph_session_t* open_session(const std::string& yaml, int rank, int world, const std::string& dir);

// The same, printing nothing: on failure NULL, with the error's text in
// *error (for tests of the message).
ddph_session_t* open_session(const std::string& yaml, int rank, int world, const std::string& dir,
                             std::string* error);

// Opens a session of `comm: {backend: host}` YAML text on the host's
// communicator `comm` (borrowed; it must outlive the session); printing
// nothing: on failure NULL, with the error's text in *error.
ddph_session_t* open_on_host_comm(const std::string& yaml, int rank, int world, ddph_comm_t* comm,
                                  std::string* error);

// What ddph_session_open says to YAML text (file store in dir): its code and
// message, or DDPH_OK and "" when it opens (the session is closed again).
struct OpenOutcome {
  ddph_code_t code = DDPH_OK;
  std::string message;
};
OpenOutcome open_outcome(const std::string& yaml, int rank, int world, const std::string& dir);

// A float32 bucket over data, with one parameter view per `param_sizes` entry.
struct FloatBucket {
  FloatBucket(std::vector<float>& data, uint64_t index, uint64_t step, bool is_last);
  ddph_bucket_t bucket{};
  int64_t shape[1];
};

// Submits, flushes, and returns the error code (DDPH_OK on success); prints
// the message of an error.
ddph_code_t run_bucket(ddph_session_t* s, FloatBucket& b);
// Any bucket: submits, flushes, returns the code of its error (from submit
// or from done) with the text in *message ("" on success), printing nothing.
ddph_code_t run_bucket(ddph_session_t* s, const ddph_bucket_t& b, std::string* message);

// True when every rank passed the same bytes (allgathered through the
// session's communicator).
bool same_on_all_ranks(ddph_session_t* s, const void* bytes, size_t n);

// ddph_session_save_state into a string; empty (and a printed message) on
// failure.
std::string session_state(ddph_session_t* s);
// ddph_session_load_state of `blob`: its code, and its message in *message
// ("" on success) when message is not NULL; prints nothing.
ddph_code_t load_state(ddph_session_t* s, const std::string& blob, std::string* message);
// Offers s every single-byte change (XOR 0x20) of `blob`, a saved session
// state, and of each hook's record inside an otherwise valid container
// (tests/support/checkpoint_layout.h); returns how many load_state did not
// refuse with DDPH_INVALID_ARGUMENT, and sets *offered to how many it tried.
size_t accepted_byte_changes(ddph_session_t* s, const std::string& blob, size_t* offered);
// The first hook's own blob inside a session state blob, read by
// tests/support/checkpoint_layout.h; empty on a bad container.
std::string hook_blob(const std::string& session_blob);

// Every rank's `mine` (the same length on each), in rank order: an
// allgather on the session's communicator.
std::vector<float> gather_floats(ddph_session_t* s, const std::vector<float>& mine, int world);

}  // namespace ddph_test
