// Loading hook plugins the way the loader does (dlopen + ddph_plugin_entry
// with a host table) and driving their C tables directly from tests.
#pragma once

#include <ddph/ddph.h>

#include <atomic>
#include <string>
#include <vector>

#include "core/base/dtype.h"
#include "tests/support/host.h"

namespace ddph_test {

// Loads DDPH_PLUGIN_DIR/libddph_<family>.so once per process and returns its
// description (never unloaded). Throws std::runtime_error with dlerror().
const ddph_plugin_t* load_plugin(const char* family);
// The named hook of the family; throws if absent.
const ddph_hook_t* find_hook(const char* family, const char* name);

// A created hook state, destroyed with its owner.
class HookInstance {
 public:
  // Throws std::runtime_error with the code and message if create fails.
  // options (borrowed for the call) go to create() as given: the hook's
  // defaults fill the rest, as for a host that passes none.
  HookInstance(const ddph_hook_t* hook, ddph_comm_t* comm, const ddph_hook_ref_t* inner = nullptr,
               const std::vector<ddph_option_t>& options = {});
  ~HookInstance();
  HookInstance(const HookInstance&) = delete;
  HookInstance& operator=(const HookInstance&) = delete;
  ddph_hook_ref_t ref() const { return {hook_, state_}; }
  void* state() const { return state_; }

 private:
  const ddph_hook_t* hook_;
  void* state_ = nullptr;
};

// Calls create and returns its error (state destroyed on success).
ErrorInfo try_create(const ddph_hook_t* hook, ddph_comm_t* comm, const ddph_hook_ref_t* inner);

// A 1-D CPU bucket over caller-owned data.
struct BucketView {
  BucketView(void* data, DLDataType dtype, int64_t numel, uint64_t index = 0, uint64_t step = 0);
  int64_t shape;
  ddph_bucket_t bucket;
};

// What one run_bucket call did: the error it returned, or the one done got.
struct RunOutcome {
  ErrorInfo returned;   // from run_bucket itself
  ErrorInfo completed;  // passed to done
  int done_calls = 0;
};
// Runs the bucket and waits (up to 30 s) for done; waits 50 ms more to catch
// a second done call.
RunOutcome run_bucket(const ddph_hook_ref_t& hook, const ddph_bucket_t* bucket);

DLDataType dl(ddph::DType t);

}  // namespace ddph_test
