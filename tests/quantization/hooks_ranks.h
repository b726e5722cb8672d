// Helpers of the quantization hook tests: rank inputs, YAML, the error
// bound a quantized mean must meet, PyTorch's reference result, and the
// wire and state figures read through the session API.
#pragma once

#include <ddph/ddph.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tests/support/session_ranks.h"

namespace ddph_test {
namespace quant {

constexpr size_t kChannel = 512;

// Rank- and step-dependent gradient values. Every rank can compute every
// rank's input. Elements [1024, 1536) are all negative and [2048, 2560)
// constant, so those channels exercise a clamped zero point and a tiny scale.
float input(int rank, uint64_t step, size_t i);
std::vector<float> inputs(int rank, uint64_t step, size_t n);

// "comm: ... hook: {family: quantization, name: <hook>, options: {<options>}}"
std::string yaml(const std::string& hook, const std::string& options);

struct Config {
  const char* hook;      // per_tensor | per_channel
  const char* protocol;  // allgather | reduce_scatter
  int bits;
  const char* rounding;  // nearest | stochastic
  std::string options() const;
  std::string name() const;
};

// Per-element bound on |result - exact mean| for config c over world ranks
// at step 0 (no error feedback), from the scales of every rank's channels.
std::vector<double> error_bound(const Config& c, int world, size_t n);

// PyTorch's quantization_pertensor_hook (channel 0) or
// quantization_perchannel_hook result for `world` ranks of input(r, 0, .),
// computed by /usr/bin/python3 with torch; empty if torch is missing.
// Call in the parent (it runs a subprocess once and caches).
const std::vector<float>& torch_reference(int world, size_t n, bool per_channel);

// The session's wire bytes after a barrier: comm_gloo reads the kernel's
// count of bytes transmitted, which lags a send the peer has not read yet;
// once every rank is past the barrier, every earlier byte has been received.
// Each reading includes its own barrier's few bytes.
uint64_t settled_wire_bytes(ddph_session_t* s);
// Whether `mine` is true on every rank (an allgather on the session's comm).
bool all_ranks_true(ddph_session_t* s, bool mine);


// Runs one bucket; returns its code and fills *message with its error text.
ddph_code_t run_bucket_msg(ddph_session_t* s, std::vector<float>& data, uint64_t index,
                           uint64_t step, std::string* message);

// The session helpers the quantization tests call as quant::
// (tests/support/session_ranks.h).
using ddph_test::gather_floats;
using ddph_test::hook_blob;
using ddph_test::session_state;

}  // namespace quant
}  // namespace ddph_test
