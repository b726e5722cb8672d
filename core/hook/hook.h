// Writing a hook in C++: derive from ddph::Hook, say in the class what its
// table shows (name, summary, flags, options), then expose it as a
// ddph_hook_t table with ddph::hook_table<T>(). The table's functions check
// their arguments, validate the bucket, and turn exceptions into C errors.
#pragma once

#include <ddph/ddph.h>

#include <atomic>
#include <type_traits>

#include "core/base/device_allocator.h"
#include "core/base/error.h"
#include "core/base/option_check.h"
#include "core/base/option_specs.h"
#include "core/hook/bucket_check.h"

namespace ddph {

// The caller's completion callback. Call exactly one of ok/fail, once.
class Completion {
 public:
  Completion(ddph_done_fn fn, void* user) : fn_(fn), user_(user) {}
  void ok() const { fn_(user_, nullptr); }
  void fail(const Error& e) const { fn_(user_, make_c_error(e.code(), e.what())); }
  // Passes on an error object (owned) or success (NULL).
  void finish(ddph_error_t* error) const { fn_(user_, error); }

 private:
  ddph_done_fn fn_;
  void* user_;
};

class Hook {
 public:
  virtual ~Hook() = default;
  // Reduces bucket (already validated; dtype is its buffer's type). Calls
  // done exactly once, unless it throws, in which case it must not call done.
  virtual void run(const ddph_bucket_t& bucket, DType dtype, const Completion& done) = 0;
  // Checkpointing; only reached when the table says the hook keeps state.
  virtual void save_state(ddph_write_fn, void*) {}
  virtual void load_state(const void*, size_t) {}
  // This state's DDPH_HOOK_STATELESS where it depends on the options (ABI
  // 1.9): table_flags with the flag set or cleared. Offered in the table
  // only by a class that declares `static constexpr bool kStatelessByState`.
  virtual uint32_t state_flags(uint32_t table_flags) const { return table_flags; }
  // Adds the error-feedback residual kept for bucket.index into the bucket
  // (already validated; dtype is its buffer's type) and forgets it (ABI
  // 1.10); nothing when none is kept. Offered in the table only by a class
  // that overrides it.
  virtual void take_residual(const ddph_bucket_t&, DType) {}
  // Fills what this hook counts; the base counts bytes in and out.
  virtual void stats(ddph_stats_t* out) const {
    out->bytes_in = bytes_in_.load();
    out->bytes_out = bytes_out_.load();
  }

 protected:
  void count_in(uint64_t bytes) { bytes_in_ += bytes; }
  void count_out(uint64_t bytes) { bytes_out_ += bytes; }
  // Reduces the whole bucket buffer in place over comm with op (on the
  // bucket's stream), counting its bytes both in and out.
  void allreduce_bucket(ddph_comm_t* comm, const ddph_bucket_t& bucket, DType dtype,
                        ddph_reduce_op_t op);

 private:
  template <class>
  friend struct HookFunctions;
  std::atomic<uint64_t> bytes_in_{0}, bytes_out_{0};
  // The host's (ABI 1.3), current during every call into this hook.
  const ddph_device_allocator_t* device_allocator_ = nullptr;
};

// Checks the init struct common to all hooks (host, comm, inner). A
// DDPH_HOOK_MAKES_INNER wrapper needs make_inner, or, from a loader older
// than 1.2, an inner hook made on init.comm.
void check_hook_init(const ddph_hook_init_t* init, uint32_t flags);
// Whether init offers make_inner (ABI 1.2).
bool can_make_inner(const ddph_hook_init_t& init);

// Whether hook class T has a CUDA path: it declares
// `static constexpr bool kRunsOnCuda = true;`. Hooks without one are refused
// CUDA buckets before run() sees them.
template <class T, class = void>
struct RunsOnCuda {
  static constexpr bool value = false;
};
template <class T>
struct RunsOnCuda<T, decltype(void(T::kRunsOnCuda))> {
  static constexpr bool value = T::kRunsOnCuda;
};

// Whether hook class T checks its options as a whole: it declares
// `static void check_options(OptionCheck& c);` (option_check.h). Its table
// then offers check() (ABI 1.5), and create() runs the same function first.
template <class T, class = void>
struct HasOptionCheck {
  static constexpr bool value = false;
};
template <class T>
struct HasOptionCheck<T, decltype(void(&T::check_options))> {
  static constexpr bool value = true;
};

// How a hook is listed (ddph_hook_t.name and summary): its name and one
// line for `ddph plugins`, both literals.
struct HookListing {
  const char* name;
  const char* summary;
};

// T's DDPH_HOOK_* flags: `static constexpr uint32_t kFlags`, or none.
template <class T, class = void>
struct FlagsOf {
  static constexpr uint32_t value = 0;
};
template <class T>
struct FlagsOf<T, decltype(void(T::kFlags))> {
  static constexpr uint32_t value = T::kFlags;
};

// Whether T says per state whether it is stateless (ABI 1.9): it declares
// `static constexpr bool kStatelessByState = true;` and overrides
// Hook::state_flags.
template <class T, class = void>
struct StatelessByState {
  static constexpr bool value = false;
};
template <class T>
struct StatelessByState<T, decltype(void(T::kStatelessByState))> {
  static constexpr bool value = T::kStatelessByState;
};

// Whether T keeps an error-feedback residual it can hand back (ABI 1.10):
// it overrides Hook::take_residual.
template <class T>
struct TakesResidual {
  static constexpr bool value =
      !std::is_same<decltype(&T::take_residual), decltype(&Hook::take_residual)>::value;
};

template <class T>
struct HookFunctions {
  static ddph_error_t* create(const ddph_hook_init_t* init, void** state) {
    return guard([&] {
      DDPH_CHECK(state != nullptr, DDPH_INVALID_ARGUMENT, "create: state out-pointer is NULL");
      *state = nullptr;
      check_hook_init(init, FlagsOf<T>::value);
      check_options_of(*init);
      const ddph_device_allocator_t* allocator = device_allocator_of(*init, "create");
      DeviceAllocatorScope scope(allocator);
      Hook* hook = new T(*init);
      hook->device_allocator_ = allocator;
      *state = hook;
    });
  }
  static ddph_error_t* check(ddph_check_t* c) { return run_option_check(c, &T::check_options); }
  static void check_options_of(const ddph_hook_init_t& init) {
    if constexpr (HasOptionCheck<T>::value)
      run_option_check(init.options, init.num_options, &T::check_options);
  }
  static ddph_error_t* run_bucket(void* state, const ddph_bucket_t* bucket, ddph_done_fn done,
                                  void* user) {
    return guard([&] {
      DDPH_CHECK(state != nullptr, DDPH_INVALID_ARGUMENT, "run_bucket: state is NULL");
      DDPH_CHECK(done != nullptr, DDPH_INVALID_ARGUMENT, "run_bucket: done callback is NULL");
      DType dtype = check_bucket(
          bucket, RunsOnCuda<T>::value ? BucketMemory::kHostOrCuda : BucketMemory::kHost);
      Hook* hook = static_cast<Hook*>(state);
      DeviceAllocatorScope scope(hook->device_allocator_);
      hook->run(*bucket, dtype, Completion(done, user));
    });
  }
  static void destroy(void* state) {
    Hook* hook = static_cast<Hook*>(state);
    DeviceAllocatorScope scope(hook != nullptr ? hook->device_allocator_ : nullptr);
    delete hook;
  }
  static ddph_error_t* save_state(void* state, ddph_write_fn write, void* sink) {
    return guard([&] {
      DDPH_CHECK(state != nullptr && write != nullptr, DDPH_INVALID_ARGUMENT,
                 "save_state: state or write is NULL");
      Hook* hook = static_cast<Hook*>(state);
      DeviceAllocatorScope scope(hook->device_allocator_);
      hook->save_state(write, sink);
    });
  }
  static ddph_error_t* load_state(void* state, const void* bytes, size_t n) {
    return guard([&] {
      DDPH_CHECK(state != nullptr, DDPH_INVALID_ARGUMENT, "load_state: state is NULL");
      DDPH_CHECK(n == 0 || bytes != nullptr, DDPH_INVALID_ARGUMENT,
                 "load_state: bytes is NULL for " << n << " bytes");
      Hook* hook = static_cast<Hook*>(state);
      DeviceAllocatorScope scope(hook->device_allocator_);
      hook->load_state(bytes, n);
    });
  }
  // No error to return: a NULL state reads as the table's flags.
  static uint32_t state_flags(void* state) {
    const uint32_t table = FlagsOf<T>::value;
    return state == nullptr ? table : static_cast<const Hook*>(state)->state_flags(table);
  }
  static ddph_error_t* take_residual(void* state, const ddph_bucket_t* bucket) {
    return guard([&] {
      DDPH_CHECK(state != nullptr, DDPH_INVALID_ARGUMENT, "take_residual: state is NULL");
      DType dtype = check_bucket(
          bucket, RunsOnCuda<T>::value ? BucketMemory::kHostOrCuda : BucketMemory::kHost);
      Hook* hook = static_cast<Hook*>(state);
      DeviceAllocatorScope scope(hook->device_allocator_);
      hook->take_residual(*bucket, dtype);
    });
  }
  static ddph_error_t* stats(void* state, ddph_stats_t* out) {
    return guard([&] {
      DDPH_CHECK(state != nullptr && out != nullptr, DDPH_INVALID_ARGUMENT,
                 "stats: state or out is NULL");
      DDPH_CHECK(out->struct_size >= DDPH_STATS_SIZE_V1_0, DDPH_INVALID_ARGUMENT,
                 "stats: out->struct_size " << out->struct_size << " is smaller than the v1.0 size "
                                            << DDPH_STATS_SIZE_V1_0);
      static_cast<Hook*>(state)->stats(out);
    });
  }
};

// The table for hook class T under the given name, summary and options.
// keeps_state: whether save_state/load_state are offered. Hook families use
// hook_table<T>() below; this form is for a table named at the call (tests).
template <class T>
ddph_hook_t hook_table(const char* name, const char* summary, const ddph_option_spec_t* options,
                       size_t num_options, bool keeps_state = false) {
  ddph_hook_t h{};
  h.struct_size = sizeof h;
  h.name = name;
  h.summary = summary;
  h.options = options;
  h.num_options = num_options;
  h.flags = FlagsOf<T>::value;
  h.create = &HookFunctions<T>::create;
  h.run_bucket = &HookFunctions<T>::run_bucket;
  h.destroy = &HookFunctions<T>::destroy;
  h.save_state = keeps_state ? &HookFunctions<T>::save_state : nullptr;
  h.load_state = keeps_state ? &HookFunctions<T>::load_state : nullptr;
  h.stats = &HookFunctions<T>::stats;
  if constexpr (HasOptionCheck<T>::value) h.check = &HookFunctions<T>::check;
  if constexpr (StatelessByState<T>::value) h.state_flags = &HookFunctions<T>::state_flags;
  if constexpr (TakesResidual<T>::value) h.take_residual = &HookFunctions<T>::take_residual;
  return h;
}

// T's option schema: `static OptionSpecs option_specs();`, or none.
template <class T, class = void>
struct OptionSpecsOf {
  static OptionSpecs get() { return {}; }
};
template <class T>
struct OptionSpecsOf<T, decltype(void(&T::option_specs))> {
  static OptionSpecs get() { return T::option_specs(); }
};

// Whether T keeps state across steps: it overrides save_state and
// load_state (a Hook's own do nothing, so offering them would checkpoint
// nothing). Overriding one without the other is refused at compile time.
template <class T>
struct KeepsState {
  static constexpr bool saves =
      !std::is_same<decltype(&T::save_state), decltype(&Hook::save_state)>::value;
  static constexpr bool loads =
      !std::is_same<decltype(&T::load_state), decltype(&Hook::load_state)>::value;
  static_assert(saves == loads, "a hook overrides both save_state and load_state, or neither");
  static constexpr bool value = saves;
};

// The table of hook class T, made once, from what T declares:
//   static constexpr HookListing kListing;       its name and summary
//   explicit T(const ddph_hook_init_t& init);    may throw ddph::Error
// and where it has them:
//   static constexpr uint32_t kFlags;            DDPH_HOOK_* flags (else 0)
//   static constexpr bool kRunsOnCuda = true;    a CUDA path (RunsOnCuda)
//   static constexpr bool kStatelessByState;     state_flags says per state (1.9)
//   static OptionSpecs option_specs();           its option schema
//   static void check_options(OptionCheck&);     the rules on the options as a whole
//   save_state and load_state overrides          its state goes into checkpoints
//   a take_residual override                     flushes its residuals (1.10)
template <class T>
const ddph_hook_t& hook_table() {
  static const ddph_hook_t table = [] {
    const OptionSpecs specs = OptionSpecsOf<T>::get();
    return hook_table<T>(T::kListing.name, T::kListing.summary, specs.data, specs.size,
                         KeepsState<T>::value);
  }();
  return table;
}

// The same bucket (index, step, is_last, params, param_ids, stream) over
// another buffer, for a wrapper to hand its inner hook. Reads only the
// fields the caller's struct has (a 1.0 host's ends before param_ids).
ddph_bucket_t bucket_over(const ddph_bucket_t& bucket, const DLTensor& buffer);

// The bucket's parameter ids (ABI 1.2), or NULL when the host gave none.
const int64_t* param_ids(const ddph_bucket_t& bucket);

// Runs a created hook on bucket and waits for its completion, which may
// arrive on any thread; returns its error (owned by the caller), or NULL.
ddph_error_t* run_hook_and_wait(const ddph_hook_ref_t& hook, const ddph_bucket_t& bucket) noexcept;
// The same, rethrowing the error. For wrappers, whose inner hook may complete
// on another thread.
void run_hook_blocking(const ddph_hook_ref_t& hook, const ddph_bucket_t& bucket);
// run_hook_blocking for a wrapper that steps an optimizer with the inner
// hook's result: a CUDA bucket the inner hook refuses (DDPH_UNSUPPORTED) is
// reported as `who`'s, naming the inner hook and its reason, since there is
// then no reduced gradient to step with.
void run_inner_for_step(const ddph_hook_ref_t& inner, const ddph_bucket_t& bucket, const char* who);

// Wrappers report what their inner hook put on the wire: copies the inner
// hook's bytes_out into out (left as is when the inner keeps no stats or
// fails to report them).
void take_inner_bytes_out(const ddph_hook_ref_t& inner, ddph_stats_t* out);

}  // namespace ddph
