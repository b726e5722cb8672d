// Helpers of the powersgd tests: YAML, checkpoint blobs written from the
// format in docs/powersgd.md (not with the plugin's encoder), and the exact
// mean computed in double.
#pragma once

#include <ddph/ddph.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tests/support/shaped_bucket.h"

namespace ddph_test {
namespace psgd {

// "comm: ... hook: {family: powersgd, name: <hook>, options: {<options>}}";
// with `wrapper` (fp16_wrapper, bf16_wrapper) the powersgd hook is its inner.
std::string yaml(const std::string& hook, const std::string& options,
                 const std::string& wrapper = "");

// The shaped buckets of tests/support/shaped_bucket.h, under the names the
// powersgd tests use.
using ddph_test::numel_of;
using ddph_test::run_shaped;
using ddph_test::Shape;
using ddph_test::ShapedBucket;

// One bucket's memories in a hand-written checkpoint (P and Q count as
// present when either is non-empty).
struct Memory {
  std::vector<float> p, q, error;
};

// A powersgd hook blob as docs/powersgd.md describes it: kind 0 (powersgd)
// or 1 (batched_powersgd), the step, numpy's RandomState(seed) state
// (MT19937 init_genrand, position 624), the memories, the FNV-1a checksum.
std::string hook_blob_from_doc(uint32_t kind, uint64_t iter, uint32_t seed,
                               const std::map<uint64_t, Memory>& buckets);
// The session container of loader/session/state_blob.h around one powersgd record.
std::string session_blob(const std::string& hook_name, const std::string& hook_blob);

// Allgathers `mine` from every rank (through the session's communicator).
std::vector<float> gather(ddph_session_t* s, const std::vector<float>& mine);

// The worst |a - b| over elements, relative to max |b| (the scale of b).
double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace psgd
}  // namespace ddph_test
