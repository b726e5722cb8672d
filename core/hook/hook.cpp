#include "core/hook/hook.h"

#include <condition_variable>
#include <mutex>

#include "core/base/host.h"
#include "core/base/tensor.h"
#include "core/comm/comm_call.h"

namespace ddph {

void Hook::allreduce_bucket(ddph_comm_t* comm, const ddph_bucket_t& bucket, DType dtype,
                            ddph_reduce_op_t op) {
  const int64_t n = bucket.buffer.shape[0];
  const uint64_t bytes = uint64_t(n) * dtype_size(dtype);
  count_in(bytes);
  FlatTensor buf(data_ptr(bucket.buffer), dtype, n, bucket.buffer.device);
  count_out(bytes);
  comm_allreduce(comm, buf, op, bucket.stream);
}

bool can_make_inner(const ddph_hook_init_t& init) {
  return init.struct_size >= DDPH_HOOK_INIT_SIZE_V1_2 && init.make_inner != nullptr;
}

void check_hook_init(const ddph_hook_init_t* init, uint32_t flags) {
  DDPH_CHECK(init != nullptr, DDPH_INVALID_ARGUMENT, "create: init is NULL");
  DDPH_CHECK(init->struct_size >= DDPH_HOOK_INIT_SIZE_V1_0, DDPH_INVALID_ARGUMENT,
             "create: init.struct_size " << init->struct_size << " is smaller than the v1.0 size "
                                         << DDPH_HOOK_INIT_SIZE_V1_0);
  DDPH_CHECK(init->comm != nullptr, DDPH_INVALID_ARGUMENT, "create: init.comm is NULL");
  DDPH_CHECK(init->comm->struct_size >= DDPH_COMM_SIZE_V1_0, DDPH_INVALID_ARGUMENT,
             "create: init.comm.struct_size " << init->comm->struct_size
                                              << " is smaller than the v1.0 size "
                                              << DDPH_COMM_SIZE_V1_0);
  DDPH_CHECK(init->num_options == 0 || init->options != nullptr, DDPH_INVALID_ARGUMENT,
             "create: init.options is NULL but init.num_options is " << init->num_options);
  if ((flags & DDPH_HOOK_MAKES_INNER) && can_make_inner(*init)) {
    DDPH_CHECK(init->inner == nullptr, DDPH_INVALID_ARGUMENT,
               "create: this wrapper makes its inner hook through init.make_inner, but "
               "init.inner is set too");
  } else if (flags & DDPH_HOOK_NEEDS_INNER) {
    DDPH_CHECK(init->inner != nullptr && init->inner->hook != nullptr, DDPH_INVALID_ARGUMENT,
               "create: this hook wraps another one, but init.inner is NULL (name one with "
               "'wrap:' in the YAML)");
    DDPH_CHECK(init->inner->hook->struct_size >= DDPH_HOOK_SIZE_V1_0 &&
                   init->inner->hook->run_bucket != nullptr,
               DDPH_INVALID_ARGUMENT, "create: init.inner.hook is not a valid v1 hook table");
  } else {
    DDPH_CHECK(init->inner == nullptr, DDPH_INVALID_ARGUMENT,
               "create: this hook wraps nothing, but init.inner is set (remove 'wrap:')");
  }
}

namespace {
struct Waiter {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  ddph_error_t* error = nullptr;
  static void on_done(void* user, ddph_error_t* error) {
    auto* w = static_cast<Waiter*>(user);
    std::lock_guard<std::mutex> lock(w->mu);
    w->error = error;
    w->done = true;
    w->cv.notify_all();
  }
};
}  // namespace

ddph_error_t* run_hook_and_wait(const ddph_hook_ref_t& hook, const ddph_bucket_t& bucket) noexcept {
  Waiter w;
  if (ddph_error_t* refused = hook.hook->run_bucket(hook.state, &bucket, &Waiter::on_done, &w))
    return refused;  // done is never called then
  std::unique_lock<std::mutex> lock(w.mu);
  w.cv.wait(lock, [&] { return w.done; });
  return w.error;
}

void run_hook_blocking(const ddph_hook_ref_t& hook, const ddph_bucket_t& bucket) {
  DDPH_CALL(run_hook_and_wait(hook, bucket));
}

void run_inner_for_step(const ddph_hook_ref_t& inner, const ddph_bucket_t& bucket,
                        const char* who) {
  try {
    run_hook_blocking(inner, bucket);
  } catch (const Error& e) {
    if (bucket.buffer.device.device_type != kDLCUDA || e.code() != DDPH_UNSUPPORTED) throw;
    DDPH_FAIL(DDPH_UNSUPPORTED, who << ": the wrapped hook '"
                                    << (inner.hook->name ? inner.hook->name : "?")
                                    << "' cannot run on this CUDA bucket, so there is no "
                                       "reduced gradient to step with: "
                                    << e.what());
  }
}

void take_inner_bytes_out(const ddph_hook_ref_t& inner, ddph_stats_t* out) {
  if (inner.hook->stats == nullptr) return;
  ddph_stats_t s{};
  s.struct_size = sizeof s;
  ddph_error_t* error = inner.hook->stats(inner.state, &s);
  if (error == nullptr)
    out->bytes_out = s.bytes_out;
  else
    host()->error_free(error);
}

ddph_bucket_t bucket_over(const ddph_bucket_t& bucket, const DLTensor& buffer) {
  ddph_bucket_t out{};
  out.struct_size = sizeof out;
  out.index = bucket.index;
  out.step = bucket.step;
  out.is_last = bucket.is_last;
  out.buffer = buffer;
  out.num_params = bucket.num_params;
  out.params = bucket.params;
  out.stream = bucket.stream;
  out.param_ids = param_ids(bucket);
  // The params were checked against the outer buffer's length: they still
  // hold for a buffer of the same length (the inner hook checks the buffer).
  const bool same_length =
      buffer.ndim == 1 && buffer.shape != nullptr && buffer.shape[0] == bucket.buffer.shape[0];
  out.params_checked = params_checked(bucket) && same_length ? 1 : 0;
  return out;
}

const int64_t* param_ids(const ddph_bucket_t& bucket) {
  return bucket.struct_size >= DDPH_BUCKET_SIZE_V1_2 ? bucket.param_ids : nullptr;
}

}  // namespace ddph
