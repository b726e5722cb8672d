#include "conformance/harness.h"

#include <dlfcn.h>

#include <chrono>
#include <thread>

#include "core/base/error.h"
#include "core/base/tensor.h"

namespace ddph::plugin_checks {

const ddph_plugin_t* open_plugin(const std::string& path, std::string* error) {
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    *error = std::string("dlopen failed: ") + (why ? why : "?");
    return nullptr;
  }
  auto entry = reinterpret_cast<ddph_plugin_entry_fn>(dlsym(lib, "ddph_plugin_entry"));
  if (entry == nullptr) {
    *error = "the file does not export ddph_plugin_entry";
    return nullptr;
  }
  const ddph_plugin_t* p = entry(ddph_host());
  if (p == nullptr) *error = "ddph_plugin_entry returned NULL for this host";
  return p;
}

std::string required_option(const ddph_hook_t* h) {
  for (size_t i = 0; i < h->num_options && h->options != nullptr; ++i)
    if (h->options[i].default_value == nullptr && h->options[i].name != nullptr)
      return h->options[i].name;
  return "";
}

std::string check_with_defaults(ddph_error_t* (*check)(ddph_check_t*),
                                const ddph_option_spec_t* specs, size_t num_specs) {
  ddph::OptionList defaults;
  try {
    defaults = ddph::resolve_options(specs, num_specs, {});
  } catch (const std::exception& e) {
    return std::string("a default is invalid: ") + e.what();
  }
  ddph_check_t c{};
  c.struct_size = sizeof c;
  c.host = ddph_host();
  c.options = defaults.data();
  c.num_options = defaults.size();
  ddph_error_t* e = check(&c);
  if (e != nullptr) {
    const std::string why = code_text(ddph_error_code(e)) + " '" + ddph_error_message(e) + "'";
    ddph_error_free(e);
    return "check() refused the default options: " + why;
  }
  if (c.bad_option != nullptr)
    return std::string("check() accepted the defaults but named bad_option '") + c.bad_option + "'";
  return "";
}

std::string code_text(ddph_code_t code) {
  return ddph::code_name(code);
}

namespace {

std::string take_message(ddph_error_t* e) {
  std::string m = ddph_error_message(e);
  ddph_error_free(e);
  return m;
}

ddph_error_t* inner_create(const ddph_hook_init_t* init, void** state) {
  if (init == nullptr || state == nullptr || init->comm == nullptr)
    return ddph_host()->error_new(DDPH_INVALID_ARGUMENT, "trivial inner: NULL init or comm");
  *state = init->comm;
  return nullptr;
}

ddph_error_t* inner_run(void* state, const ddph_bucket_t* b, ddph_done_fn done, void* user) {
  if (state == nullptr || b == nullptr || done == nullptr)
    return ddph_host()->error_new(DDPH_INVALID_ARGUMENT, "trivial inner: NULL argument");
  auto* comm = static_cast<ddph_comm_t*>(state);
  DLTensor buf = b->buffer;
  done(user, comm->allreduce(comm->ctx, &buf, &buf, DDPH_AVG, b->stream));
  return nullptr;
}

void inner_destroy(void*) {}

}  // namespace

const ddph_hook_t* trivial_inner() {
  static const ddph_hook_t hook = [] {
    ddph_hook_t h{};
    h.struct_size = sizeof h;
    h.name = "validate_plugin_inner";
    h.summary = "allreduce AVG, the inner hook of validated wrappers";
    h.create = inner_create;
    h.run_bucket = inner_run;
    h.destroy = inner_destroy;
    return h;
  }();
  return &hook;
}

Instance::Instance(const ddph_hook_t* h, ddph_comm_t* comm) : hook_(h) {
  try {
    ddph::OptionList opts = ddph::resolve_options(h->options, h->num_options, {});
    ddph_hook_init_t init{};
    init.struct_size = sizeof init;
    init.host = ddph_host();
    init.comm = comm;
    init.options = opts.data();
    init.num_options = opts.size();
    if (h->flags & DDPH_HOOK_NEEDS_INNER) {
      const ddph_hook_t* inner = trivial_inner();
      ddph_hook_init_t ii = init;
      ii.options = nullptr;
      ii.num_options = 0;
      if (ddph_error_t* e = inner->create(&ii, &inner_.state)) {
        error_ = take_message(e);
        return;
      }
      inner_.hook = inner;
      init.inner = &inner_;
    }
    if (ddph_error_t* e = h->create(&init, &state_)) {
      error_ = code_text(ddph_error_code(e)) + ": " + take_message(e);
      state_ = nullptr;
    } else if (state_ == nullptr) {
      error_ = "create returned success but left the state NULL";
    }
  } catch (const std::exception& e) {
    error_ = std::string("default options do not resolve: ") + e.what();
  }
}

Instance::~Instance() {
  if (state_ != nullptr) hook_->destroy(state_);
  if (inner_.state != nullptr) inner_.hook->destroy(inner_.state);
}

namespace {
// The most square factorization of n, so matrix hooks (PowerSGD) see a
// matrix: (rows, cols), with (0, 1) for n == 0.
std::pair<int64_t, int64_t> matrix_shape(int64_t n) {
  if (n == 0) return {0, 1};
  int64_t rows = 1;
  for (int64_t r = 2; r * r <= n; ++r)
    if (n % r == 0) rows = r;
  return {rows, n / rows};
}
}  // namespace

TestBucket::TestBucket(int64_t n_, uint64_t step)
    : LentBucket(n_, matrix_shape(n_).first, matrix_shape(n_).second), n(n_) {
  for (int64_t i = 0; i < n; ++i) data[size_t(i)] = float(int(i % 17) - 8) * 0.25f + 0.125f;
  b.step = step;
}

namespace {
struct DoneState {
  std::atomic<int> calls{0};
  std::mutex mu;
  ddph_code_t code = DDPH_OK;
  std::string message;
  static void on_done(void* user, ddph_error_t* e) {
    auto* d = static_cast<DoneState*>(user);
    {
      std::lock_guard<std::mutex> lock(d->mu);
      if (d->calls.load() == 0) {
        d->code = ddph_error_code(e);
        d->message = ddph_error_message(e);
      }
    }
    ddph_error_free(e);
    ++d->calls;
  }
};
}  // namespace

RunResult run_once(const ddph_hook_t* h, void* state, const ddph_bucket_t* bucket,
                   double done_wait_s, bool null_done) {
  // Static: a hook that calls done late, after this returns, must still find it.
  static DoneState* d = nullptr;
  d = new DoneState;  // leaked on purpose for the same reason
  RunResult r;
  ddph_error_t* e = h->run_bucket(state, bucket, null_done ? nullptr : &DoneState::on_done, d);
  if (e != nullptr) {
    r.returned_error = true;
    r.code = ddph_error_code(e);
    r.message = take_message(e);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // a stray done lands here
    r.done_calls = d->calls.load();
    if (r.done_calls != 0)
      r.problem = "run_bucket returned an error and also called done (" +
                  std::to_string(r.done_calls) + " times)";
    return r;
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(done_wait_s);
  while (d->calls.load() == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  if (d->calls.load() == 0) {
    char text[96];
    std::snprintf(text, sizeof text,
                  "run_bucket accepted the bucket but done was not called within %.1fs",
                  done_wait_s);
    r.problem = text;
    return r;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // a second call would land here
  r.done_calls = d->calls.load();
  {
    std::lock_guard<std::mutex> lock(d->mu);
    r.code = d->code;
    r.message = d->message;
  }
  if (r.done_calls != 1)
    r.problem = "done was called " + std::to_string(r.done_calls) + " times for one bucket";
  return r;
}

}  // namespace ddph::plugin_checks
