// What the checks share inside their child process: opening the plugin,
// creating a hook with its default options (wrappers around a trivial inner
// hook), a bucket with a lent parameter view, and waiting for completion.
#pragma once

#include <ddph/ddph.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "conformance/lent_bucket.h"
#include "core/base/options.h"

namespace ddph::plugin_checks {

// dlopen + ddph_plugin_entry(ddph_host()); NULL and *error on failure. The
// library stays loaded until the child exits.
const ddph_plugin_t* open_plugin(const std::string& path, std::string* error);

// The name of an option without a default, or "" when create() can run with
// defaults only.
std::string required_option(const ddph_hook_t* h);

// ABI 1.5 check() with the default options and no bucket dtype: "" when it
// accepts them (as create() does), else what went wrong. A check that
// refuses its own defaults would refuse every job that leaves them alone.
std::string check_with_defaults(ddph_error_t* (*check)(ddph_check_t*),
                                const ddph_option_spec_t* specs, size_t num_specs);

// A hook created with its defaults on comm; wrappers get trivial_inner().
class Instance {
 public:
  Instance(const ddph_hook_t* h, ddph_comm_t* comm);
  ~Instance();
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;
  void* state() const { return state_; }
  bool ok() const { return state_ != nullptr && error_.empty(); }
  const std::string& error() const { return error_; }  // "" on success

 private:
  const ddph_hook_t* hook_;
  ddph_hook_ref_t inner_{nullptr, nullptr};
  void* state_ = nullptr;
  std::string error_;
};

// Allreduce (AVG) through the communicator, any dtype, done exactly once:
// the inner hook that wrappers are validated around.
const ddph_hook_t* trivial_inner();

// A LentBucket of n elements with a pattern of values and the most square
// rows x cols (rows * cols == n) parameter view, so matrix hooks see a matrix.
struct TestBucket : LentBucket {
  TestBucket(int64_t n, uint64_t step);
  float* values() { return data.data(); }
  int64_t n;
};

// One run_bucket call and what came of it.
struct RunResult {
  bool returned_error = false;  // run_bucket itself refused the bucket
  int done_calls = 0;
  ddph_code_t code = DDPH_OK;  // of the returned error, else of done's
  std::string message;
  std::string problem;  // non-empty: the contract was broken (done not once, ...)
};
RunResult run_once(const ddph_hook_t* h, void* state, const ddph_bucket_t* bucket,
                   double done_wait_s, bool null_done = false);

std::string code_text(ddph_code_t code);

}  // namespace ddph::plugin_checks
