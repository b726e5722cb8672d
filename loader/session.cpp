#include "loader/session.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>

#include "core/base/device_allocator.h"
#include "core/base/error.h"
#include "core/base/host.h"
#include "core/base/tensor.h"
#include "core/comm/rendezvous/kv_store.h"
#include "core/comm/rendezvous_url.h"
#include "core/hook/bucket_check.h"
#include "core/hook/hook.h"
#include "loader/agreement/rank_agreement.h"
#include "loader/host_table.h"
#include "loader/job/job_id.h"
#include "loader/job/job_secret.h"
#include "loader/log_sink.h"
#include "loader/session/state_blob.h"

namespace ddph {
namespace loader {
namespace {

bool env_int(const char* name, int32_t* out) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return false;
  errno = 0;
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  DDPH_CHECK(*end == '\0' && errno == 0 && v >= 0 && v <= INT32_MAX, DDPH_INVALID_ARGUMENT,
             "environment variable " << name << "='" << text << "' is not a non-negative integer");
  *out = int32_t(v);
  return true;
}

int32_t pick(int32_t from_options, int32_t from_yaml, const char* env1, const char* env2,
             int32_t fallback) {
  if (from_options >= 0) return from_options;
  if (from_yaml >= 0) return from_yaml;
  int32_t v;
  if (env_int(env1, &v) || env_int(env2, &v)) return v;
  return fallback;
}

// The session whose host done callback this thread is running, if any:
// flush, save_state and load_state from there would wait for themselves.
thread_local const void* t_in_done_of = nullptr;

uint64_t buffer_bytes(const DLTensor& t) {
  uint64_t bits = uint64_t(t.dtype.bits) * (t.dtype.lanes ? t.dtype.lanes : 1);
  return uint64_t(numel(t)) * ((bits + 7) / 8);
}

// The job-scoped store the communicator rendezvouses through: the URL's
// (options, then YAML) or the host's; NULL when there is neither (a world
// of one then meets nobody: its communicator keeps a store in memory).
std::unique_ptr<JobStore> open_job_store(const ddph_session_options_t& opts, const CommSpec& spec,
                                         const Placement& placement) {
  const std::string url = opts.rendezvous != nullptr ? opts.rendezvous : spec.rendezvous;
  const std::chrono::milliseconds timeout(spec.timeout_ms);
  const char* host_job = opts.struct_size >= DDPH_SESSION_OPTIONS_SIZE_V1_4 ? opts.job : nullptr;
  const JobId job = resolve_job_id(host_job, spec.job);
  JobRun run;
  run.job = job.id;
  run.job_source = job.source;
  run.rank = placement.rank;
  run.world = placement.world_size;
  run.timeout = timeout;
  run.secret = load_job_secret(spec.secret_file).bytes;
  std::unique_ptr<rendezvous::KvStore> kv;
  if (url.empty() || url == "host") {
    DDPH_CHECK(url.empty() || opts.store != nullptr, DDPH_INVALID_ARGUMENT,
               "comm.rendezvous is 'host' but the host lent no store "
               "(ddph_session_options.store is NULL)");
    if (opts.store == nullptr) return nullptr;
    kv = rendezvous::host_store(opts.store);
  } else {
    // The YAML's value was checked with the config; this one is the host's
    // (ddph train --rendezvous, Session(rendezvous=...)).
    DDPH_CHECK(is_rendezvous_url(url), DDPH_INVALID_ARGUMENT,
               "the rendezvous '" << url
                                  << "' the program gave (it overrides comm.rendezvous) is not "
                                     "file:///dir, redis://host:port, tcp://host:port, env:// or "
                                     "host");
    // A tcp:// store (rank 0's) admits only this job's ranks, and with a
    // secret only those that prove they hold it, at connect.
    rendezvous::StoreAccess access;
    access.job = run.job;
    if (!run.secret.empty())
      access.sign = [secret = run.secret](const std::string& data) {
        return hmac_sha256(secret, data);
      };
    // Keys of a run that crashed expire in Redis once no rank of it can
    // still be waiting for them.
    kv = rendezvous::open_url_store(url, placement.rank, 2 * timeout + std::chrono::seconds(60),
                                    access);
  }
  log(DDPH_LOG_INFO, "loader",
      "job '" + job.id + "' (from " + job.source + "): rank " + std::to_string(run.rank) + " of " +
          std::to_string(run.world) + " through " + kv->describe() +
          (run.secret.empty() ? "" : ", values signed with the job's secret"));
  return std::make_unique<JobStore>(std::move(kv), std::move(run));
}

}  // namespace

Placement resolve_placement(int32_t opt_rank, int32_t opt_world, const CommSpec& yaml) {
  // -1 leaves the value to the YAML or the environment; any other negative
  // number is a mistake (or a wrapped integer), not "unset".
  DDPH_CHECK(
      opt_rank >= -1, DDPH_INVALID_ARGUMENT,
      "rank is " << opt_rank << " in the session options; it must be -1 (unset) or 0 and up");
  DDPH_CHECK(opt_world == -1 || opt_world >= 1, DDPH_INVALID_ARGUMENT,
             "world_size is " << opt_world
                              << " in the session options; it must be -1 (unset) or 1 and up");
  Placement p;
  p.rank = pick(opt_rank, yaml.rank, "DDPH_RANK", "RANK", 0);
  p.world_size = pick(opt_world, yaml.world_size, "DDPH_WORLD_SIZE", "WORLD_SIZE", 1);
  DDPH_CHECK(p.world_size >= 1, DDPH_INVALID_ARGUMENT,
             "world_size is " << p.world_size << "; it must be at least 1");
  DDPH_CHECK(p.rank < p.world_size, DDPH_INVALID_ARGUMENT,
             "rank " << p.rank << " is not below world_size " << p.world_size);
  return p;
}

// A submitted bucket, deep-copied so that the caller's structs may go away
// once submit returns (the memory they point to stays borrowed until done).
struct Session::PendingBucket {
  ddph_bucket_t bucket{};
  int64_t buffer_shape = 0, buffer_stride = 1;
  std::vector<ddph_param_t> params;
  std::vector<int64_t> param_ids;
  std::vector<std::vector<int64_t>> shapes;  // params' view shapes, then data shapes/strides
  ddph_done_fn done = nullptr;
  void* user = nullptr;
  uint64_t ticket = 0;  // CheckAhead's, to await before the hook; 0: none
  // For its metrics record: when it was submitted, its step and its index
  // in that step (counted by the session, in submission order).
  std::chrono::steady_clock::time_point submitted;
  uint64_t metrics_step = 0;
  uint32_t metrics_bucket = 0;
  // Where the hooks' spans of it go (ABI 1.7), from the worker's start of
  // it; registered by its ddph_bucket_t while the hooks run it.
  RunningBucket running;
  std::unique_ptr<BucketRegistration> registration;
  uint64_t started_ns = 0;  // when the worker took it up, on the spans' clock

  PendingBucket(const ddph_bucket_t& b, ddph_done_fn d, void* u) : done(d), user(u) {
    // Copy only the fields this loader knows; a newer, longer struct is fine.
    bucket.struct_size = sizeof bucket;
    bucket.index = b.index;
    bucket.step = b.step;
    bucket.is_last = b.is_last;
    bucket.buffer = b.buffer;
    bucket.stream = b.stream;
    buffer_shape = b.buffer.shape[0];
    bucket.buffer.shape = &buffer_shape;
    if (b.buffer.strides != nullptr) {
      buffer_stride = b.buffer.strides[0];
      bucket.buffer.strides = &buffer_stride;
    }
    params.resize(b.num_params);
    shapes.reserve(b.num_params * 3);
    for (size_t i = 0; i < b.num_params; ++i) {
      const ddph_param_t& src = b.params[i];
      ddph_param_t& dst = params[i];
      dst = ddph_param_t{};
      dst.struct_size = sizeof dst;
      dst.offset = src.offset;
      dst.ndim = src.ndim;
      dst.data = src.data;
      dst.shape = copy(src.shape, src.ndim);
      if (src.data.data != nullptr) {
        dst.data.shape = const_cast<int64_t*>(copy(src.data.shape, src.data.ndim));
        dst.data.strides = const_cast<int64_t*>(copy(src.data.strides, src.data.ndim));
      }
    }
    bucket.num_params = params.size();
    bucket.params = params.empty() ? nullptr : params.data();
    // A 1.0/1.1 host's struct ends before param_ids: it has none.
    if (b.struct_size >= DDPH_BUCKET_SIZE_V1_2 && b.param_ids != nullptr && !params.empty()) {
      param_ids.assign(b.param_ids, b.param_ids + b.num_params);
      bucket.param_ids = param_ids.data();
    }
  }

 private:
  const int64_t* copy(const int64_t* values, int32_t n) {
    if (values == nullptr || n <= 0) return values;
    shapes.emplace_back(values, values + n);
    return shapes.back().data();
  }
};

Session::Session(const ddph_session_options_t& opts) {
  install_loader_host();
  DDPH_CHECK((opts.yaml_path != nullptr) != (opts.yaml_text != nullptr), DDPH_INVALID_ARGUMENT,
             "ddph_session_options: set exactly one of yaml_path and yaml_text (got "
                 << (opts.yaml_path ? "both" : "neither") << ")");
  DDPH_CHECK(opts.store == nullptr || opts.store->struct_size >= DDPH_STORE_SIZE_V1_0,
             DDPH_INVALID_ARGUMENT,
             "ddph_session_options.store.struct_size is " << opts.store->struct_size
                                                          << ", smaller than the v1.0 size "
                                                          << DDPH_STORE_SIZE_V1_0);
  if (opts.struct_size >= DDPH_SESSION_OPTIONS_SIZE_V1_3)
    device_allocator_ = checked_device_allocator(opts.device_allocator, "ddph_session_options");
  ConfigSource source;
  if (opts.yaml_path != nullptr) {
    source.path = opts.yaml_path;
  } else {
    source.text = opts.yaml_text;
    source.is_text = true;
  }
  job_ = load_job(source);
  placement_ = resolve_placement(opts.rank, opts.world_size, job_.config.comm);
  const ScopedLogRank log_rank(placement_.rank);
  try {
    create_communicator(opts);
    // Every rank has read the run marker and this rank's keys once the
    // communicator is connected (it ends in a barrier). Removing them now,
    // before the next collective, means no peer can finish this open and
    // start the job's next session while the marker of this one is still
    // there to be read by mistake.
    if (job_store_ != nullptr) job_store_->release();
    create_control_communicator();
    // Before any hook is created: creating one may be collective (a split).
    agree_on_job(control_, job_);
    for (const ResolvedRule& rule : job_.rules) create_chain(*rule.hook, true, rule.max_bytes);
    create_chain(*job_.hook, false, 0);
    worker_ = std::make_unique<Worker>();
    worker_->post([rank = placement_.rank] { set_thread_log_rank(rank); });
  } catch (...) {
    destroy_hooks();
    destroy_communicators();
    if (job_store_ != nullptr) job_store_->release();
    throw;
  }
  // The keys of the communicators split since (each connection ends in a
  // barrier): a job that ends well leaves nothing in the store.
  if (job_store_ != nullptr) job_store_->release();
}

Session::~Session() {
  const ScopedLogRank log_rank(placement_.rank);
  worker_.reset();    // runs every queued bucket to completion, then joins
  wait_in_flight();   // a pipelined hook's last dones, before it is destroyed
  finisher_.reset();  // joins: its last task may still be returning
  destroy_hooks();
  destroy_communicators();
  if (job_store_ != nullptr) job_store_->release();  // keys of later splits, if any
  // job_ (and with it the registry, unless shared) goes last: plugins unload
  // only after every state made from them is gone.
}

void Session::create_communicator(const ddph_session_options_t& opts) {
  const CommSpec& spec = job_.config.comm;
  if (job_.comm.host_provided) {
    DDPH_CHECK(opts.comm != nullptr, DDPH_INVALID_ARGUMENT,
               "comm.backend is 'host' but ddph_session_options.comm is NULL");
    DDPH_CHECK(opts.comm->struct_size >= DDPH_COMM_SIZE_V1_0, DDPH_INVALID_ARGUMENT,
               "ddph_session_options.comm.struct_size is " << opts.comm->struct_size
                                                           << ", smaller than the v1.0 size "
                                                           << DDPH_COMM_SIZE_V1_0);
    comm_ = opts.comm;
    owns_comm_ = false;
    return;
  }
  job_store_ = open_job_store(opts, spec, placement_);
  ddph_comm_init_t init{};
  init.struct_size = sizeof init;
  init.host = ddph_host();
  init.rank = placement_.rank;
  init.world_size = placement_.world_size;
  // The communicator meets its peers through the job's store, under keys
  // that depend only on the job and its run, never on how many sessions
  // this process opened.
  init.rendezvous = nullptr;
  init.store = job_store_ != nullptr ? job_store_->table() : nullptr;
  init.prefix = "comm";
  init.timeout_ms = spec.timeout_ms;
  init.options = job_.comm.options.data();
  init.num_options = job_.comm.options.size();
  init.device_allocator = device_allocator_;
  ddph_comm_t* comm = nullptr;
  DDPH_CALL(job_.comm.factory->create(&init, &comm));
  DDPH_CHECK(comm != nullptr, DDPH_INTERNAL,
             "comm backend '" << spec.backend << "' (" << job_.comm.plugin->file()
                              << ") returned success but no communicator");
  comm_ = comm;
  owns_comm_ = true;
  DDPH_CHECK(comm->struct_size >= DDPH_COMM_SIZE_V1_0, DDPH_VERSION_MISMATCH,
             "comm backend '" << spec.backend << "' made a ddph_comm_t of struct_size "
                              << comm->struct_size << ", smaller than the v1.0 size "
                              << DDPH_COMM_SIZE_V1_0);
}

// The rank-agreement exchanges get a communicator of their own where the
// backend can split one: on the hooks' communicator, a rank still exchanging
// layouts could meet a peer's hook collective in the same slot, and Gloo
// aborts the process on a message longer than the buffer posted for it.
// Apart, a mismatch can only end in a timeout on both sides.
void Session::create_control_communicator() {
  control_ = comm_;
  if (comm_->split != nullptr && comm_->size(comm_->ctx) > 1) {
    ddph_comm_t* control = nullptr;
    DDPH_CALL(comm_->split(comm_->ctx, 0, comm_->rank(comm_->ctx), &control));
    DDPH_CHECK(control != nullptr, DDPH_INTERNAL, "split of the session's communicator gave NULL");
    control_ = control;
  }
  configure_bucket_check();
}

void Session::configure_bucket_check() {
  // DDPH_BUCKET_CHECK overrides the YAML, as TORCH_DISTRIBUTED_DEBUG does
  // PyTorch's checks; written back, so that the ranks agree on it at open.
  BucketCheck& mode = job_.config.comm.bucket_check;
  const char* env = std::getenv("DDPH_BUCKET_CHECK");
  DDPH_CHECK(env == nullptr || *env == '\0' || parse_bucket_check(env, &mode),
             DDPH_INVALID_ARGUMENT,
             "environment variable DDPH_BUCKET_CHECK='" << env << "' is not auto, strict or off");
  // Gloo's slots and MPI's call agreement turn calls of different lengths
  // into an error on every rank (plugins/comm_gloo/slots.h,
  // core/comm/call_agreement.h); NCCL and a host's communicator may abort or
  // hang, so with them a new layout is checked before its bucket runs.
  const std::string family = job_.comm.plugin != nullptr ? job_.comm.plugin->family() : "";
  const bool survives = !job_.comm.host_provided && (family == "comm_gloo" || family == "comm_mpi");
  agreement_.configure(mode, survives);
  if (mode == BucketCheck::kAuto && family == "comm_gloo" && !job_.comm.host_provided &&
      control_->size(control_->ctx) > 1)
    check_ahead_ = std::make_unique<CheckAhead>(control_, AutoCheckPolicy{});
  if (mode != BucketCheck::kStrict) return;
  strict_calls_ = std::make_shared<StrictCalls>();
  hooks_comm_ = std::make_unique<CheckedComm>(comm_, control_, false, strict_calls_);
}

void Session::destroy_communicators() {
  check_ahead_.reset();  // its thread uses control_
  if (control_ != nullptr && control_ != comm_ && control_->destroy != nullptr)
    control_->destroy(control_->ctx);
  control_ = nullptr;
  if (owns_comm_ && comm_ != nullptr && comm_->destroy != nullptr) comm_->destroy(comm_->ctx);
  comm_ = nullptr;
}

void Session::create_chain(const ResolvedHook& resolved, bool is_rule, uint64_t max_bytes) {
  chains_.emplace_back();
  HookChain& chain = chains_.back();
  chain.is_rule = is_rule;
  chain.max_bytes = max_bytes;
  // create_elements appends inner elements as it goes; the outermost comes
  // last. Reverse so that elements read outer first.
  try {
    create_elements(resolved, hooks_comm(), device_allocator_, chain.elements);
  } catch (...) {
    std::reverse(chain.elements.begin(), chain.elements.end());  // so cleanup goes outer first
    throw;
  }
  std::reverse(chain.elements.begin(), chain.elements.end());
}

void Session::destroy_hooks() {
  for (HookChain& chain : chains_) destroy_elements(chain.elements);  // outer first
  chains_.clear();
}

const HookChain& Session::chain_for(uint64_t bytes) const {
  for (const HookChain& chain : chains_)
    if (!chain.is_rule || bytes <= chain.max_bytes) return chain;
  return chains_.back();
}

void Session::submit(const ddph_bucket_t* bucket, ddph_done_fn done, void* user) {
  DDPH_CHECK(done != nullptr, DDPH_INVALID_ARGUMENT, "ddph_session_submit: done is NULL");
  check_bucket(bucket);
  auto pending = std::make_shared<PendingBucket>(*bucket, done, user);
  std::lock_guard<std::mutex> lock(submit_mu_);
  pending->submitted = std::chrono::steady_clock::now();
  pending->metrics_step = next_metrics_step_;
  pending->metrics_bucket = next_metrics_bucket_++;
  if (pending->bucket.is_last) {
    ++next_metrics_step_;
    next_metrics_bucket_ = 0;
  }
  if (check_ahead_) pending->ticket = check_ahead_->submitted(pending->bucket);
  worker_->post([this, pending] { run_bucket(pending); });
}

// A started bucket of a pipelined chain: its done may arrive on any thread,
// before or after run_bucket returns. Whoever of the two comes second (the
// worker with the bytes, the done with the error) hands it to finisher_.
struct Session::InFlight {
  Session* session = nullptr;
  std::shared_ptr<PendingBucket> pending;
  std::chrono::steady_clock::time_point started, finished;
  Counters bytes;                 // written by the worker
  ddph_error_t* error = nullptr;  // written by the done
  std::atomic<int> arrivals{0};   // acq_rel: the second one sees both writes
};

bool Session::pipelined(const HookChain& chain) const {
  return (chain.elements.front()->ref.hook->flags & DDPH_HOOK_PIPELINED) != 0 && !strict_calls_;
}

void Session::run_bucket(const std::shared_ptr<PendingBucket>& pending_ptr) {
  using Clock = std::chrono::steady_clock;
  PendingBucket& pending = *pending_ptr;
  const Clock::time_point started = Clock::now();
  pending.started_ns = uint64_t(
      std::chrono::duration_cast<std::chrono::nanoseconds>(started.time_since_epoch()).count());
  const double queue_seconds = std::chrono::duration<double>(started - pending.submitted).count();
  ddph_error_t* error = nullptr;
  {
    std::lock_guard<std::mutex> lock(errors_mu_);
    if (broken_)
      error = make_c_error(DDPH_COMM_FAILURE, "session is broken since: " + broken_since_);
  }
  if (error != nullptr) {
    wait_in_flight();  // the host's dones stay in submission order
    finish(pending, error, false, false, Counters{}, queue_seconds,
           std::chrono::duration<double>(Clock::now() - started).count());
    return;
  }
  const HookChain& chain = chain_for(buffer_bytes(pending.bucket.buffer));
  const bool overlaps = pipelined(chain);
  // Any other bucket runs alone, as before ABI 1.6: on the communicator, and
  // for the counters' differences around it to be its own.
  if (!overlaps) wait_in_flight();
  // The worker starts one bucket at a time, and a pipelined hook makes its
  // collectives within run_bucket (ABI 1.6), so what the counters gain
  // until the hook returns is this bucket's alone.
  const Counters before = counters(chain, false);
  try {
    if (check_ahead_)
      check_ahead_->await(pending.ticket);
    else
      agreement_.before_hook(control_, pending.bucket);
    if (strict_calls_) strict_calls_->set_bucket(fingerprint_of(pending.bucket));
  } catch (const Error& e) {
    error = make_c_error(e.code(), e.what());
  }
  pending.running =
      RunningBucket{&spans_, pending.metrics_step, pending.metrics_bucket, &pending.bucket};
  if (error == nullptr && overlaps) return start_pipelined(pending_ptr, chain, before, started);
  if (error != nullptr) wait_in_flight();
  if (error == nullptr) {
    // The hooks' spans: this thread's, and those of a thread of a hook's
    // own that names the bucket, until the hook is done.
    BucketRegistration registered(pending.running);
    ThreadBucket on_worker(&pending.running);
    error = run_hook_and_wait(chain.elements.front()->ref, pending.bucket);
  }
  const Counters bytes = bytes_between(before, counters(chain, false));
  // Ranks out of step (comm.bucket_check: strict) would pair every later
  // bucket with another one: the session stops, as on a timeout.
  const bool out_of_step = error != nullptr && (agreement_.out_of_step() ||
                                                (strict_calls_ && strict_calls_->out_of_step()));
  finish(pending, error, out_of_step, true, bytes, queue_seconds,
         std::chrono::duration<double>(Clock::now() - started).count());
}

void Session::start_pipelined(const std::shared_ptr<PendingBucket>& pending, const HookChain& chain,
                              const Counters& before,
                              std::chrono::steady_clock::time_point started) {
  const ddph_hook_ref_t& hook = chain.elements.front()->ref;
  if (!finisher_) finisher_ = std::make_unique<Worker>();  // before any done can come
  auto* flight = new InFlight;
  flight->session = this;
  flight->pending = pending;
  flight->started = started;
  {
    std::lock_guard<std::mutex> lock(in_flight_mu_);
    ++in_flight_;  // before the call: done may come before it returns
  }
  // Its spans are its own until it is finished (finish_in_flight), from
  // whatever thread the hook steps it on.
  pending->registration.reset(new (std::nothrow) BucketRegistration(pending->running));
  ddph_error_t* refused;
  {
    ThreadBucket on_worker(&pending->running);
    refused = hook.hook->run_bucket(hook.state, &pending->bucket, &on_done, flight);
  }
  const Counters after = counters(chain, false);
  if (refused != nullptr) {  // never accepted: no done will come
    pending->registration.reset();
    delete flight;
    leave_in_flight();
    wait_in_flight();  // its done after the earlier buckets' dones
    finish(*pending, refused, false, true, bytes_between(before, after),
           std::chrono::duration<double>(started - pending->submitted).count(),
           std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    return;
  }
  flight->bytes = bytes_between(before, after);
  if (flight->arrivals.fetch_add(1, std::memory_order_acq_rel) == 1) hand_to_finisher(flight);
}

void Session::on_done(void* user, ddph_error_t* error) {
  auto* flight = static_cast<InFlight*>(user);
  flight->finished = std::chrono::steady_clock::now();
  flight->error = error;
  if (flight->arrivals.fetch_add(1, std::memory_order_acq_rel) == 1)
    flight->session->hand_to_finisher(flight);
}

void Session::hand_to_finisher(InFlight* flight) {
  finisher_->post([this, flight] { finish_in_flight(flight); });
}

void Session::finish_in_flight(InFlight* flight) {
  PendingBucket& pending = *flight->pending;
  pending.registration.reset();  // the hook is done with it
  finish(pending, flight->error, false, true, flight->bytes,
         std::chrono::duration<double>(flight->started - pending.submitted).count(),
         std::chrono::duration<double>(flight->finished - flight->started).count());
  delete flight;
  leave_in_flight();  // last: at zero, close may go on to destroy this session
}

void Session::leave_in_flight() {
  std::lock_guard<std::mutex> lock(in_flight_mu_);
  if (--in_flight_ == 0) in_flight_cv_.notify_all();
}

void Session::wait_in_flight() {
  std::unique_lock<std::mutex> lock(in_flight_mu_);
  in_flight_cv_.wait(lock, [&] { return in_flight_ == 0; });
}

void Session::finish(PendingBucket& pending, ddph_error_t* error, bool out_of_step, bool ran,
                     const Counters& bytes, double queue_seconds, double hook_seconds) {
  if (error == nullptr) {
    ++buckets_;
    if (pending.bucket.is_last) ++steps_;
  }
  bool breaks = false;
  if (error != nullptr) {
    const ddph_code_t code = ddph_error_code(error);
    std::lock_guard<std::mutex> lock(errors_mu_);
    if (!has_first_error_) {
      has_first_error_ = true;
      first_error_code_ = code;
      first_error_message_ = ddph_error_message(error);
    }
    if (ran && !broken_ && (code == DDPH_COMM_FAILURE || code == DDPH_TIMEOUT || out_of_step)) {
      broken_ = breaks = true;
      broken_since_ = std::string(code_name(code)) + ": " + ddph_error_message(error);
    }
  }
  if (breaks && check_ahead_) check_ahead_->stop();
  record_metrics(pending, ran, bytes, queue_seconds, hook_seconds, error == nullptr);
  const void* outer = t_in_done_of;
  t_in_done_of = this;
  pending.done(pending.user, error);
  t_in_done_of = outer;
}

Session::Counters Session::counters(const HookChain& chain, bool strict) const {
  // The sources ddph_session_stats reads: bytes in as the outermost hook saw
  // them, bytes out as the chain sent them, the communicator's wire.
  Counters c;
  auto read = [strict](const ddph_hook_ref_t& ref, ddph_stats_t* out) {
    *out = ddph_stats_t{};
    out->struct_size = sizeof *out;
    if (ref.hook->stats == nullptr) return false;
    ddph_error_t* e = ref.hook->stats(ref.state, out);
    if (e == nullptr) return true;
    if (strict) DDPH_CALL(e);  // ddph_session_stats reports the hook's error
    ddph_error_free(e);        // a bucket's record: its bytes read as 0
    return false;
  };
  ddph_stats_t hs;
  if (read(chain.elements.front()->ref, &hs)) {
    c.bytes_in = hs.bytes_in;
    c.bytes_out = hs.bytes_out;
  }
  // The larger of the two: a wrapper's count includes its inner's
  // (take_inner_bytes_out) plus what it sent itself, or is the wrapper's
  // own alone, and a wrapper such as zero's reduce_scatter may send instead
  // of its inner.
  if (read(chain.elements.back()->ref, &hs)) c.bytes_out = std::max(c.bytes_out, hs.bytes_out);
  if (comm_ != nullptr && comm_->bytes_sent != nullptr)
    c.wire_bytes = comm_->bytes_sent(comm_->ctx);
  return c;
}

Session::Counters Session::bytes_between(const Counters& before, const Counters& after) {
  Counters c;
  c.bytes_in = after.bytes_in - before.bytes_in;
  c.bytes_out = after.bytes_out - before.bytes_out;
  c.wire_bytes = after.wire_bytes - before.wire_bytes;
  return c;
}

void Session::record_metrics(const PendingBucket& pending, bool ran, const Counters& bytes,
                             double queue_seconds, double hook_seconds, bool ok) {
  ddph_bucket_metrics_t r{};
  r.struct_size = sizeof r;
  r.step = pending.metrics_step;
  r.bucket = pending.metrics_bucket;
  r.is_last = pending.bucket.is_last ? 1 : 0;
  if (ran) {  // else a broken session ran nothing
    r.bytes_in = bytes.bytes_in;
    r.bytes_out = bytes.bytes_out;
    r.wire_bytes = bytes.wire_bytes;
  }
  r.queue_seconds = queue_seconds;
  r.hook_seconds = hook_seconds;
  r.ok = ok ? 1 : 0;
  r.start_ns = pending.started_ns;
  metrics_.push(r);
}

bool Session::take_metrics(ddph_bucket_metrics_t* out) {
  ddph_bucket_metrics_t r;
  if (!metrics_.take(&r)) return false;
  // Fields this loader knows, up to the caller's struct_size; a newer
  // caller's extra fields are left alone, its struct_size kept.
  const size_t caller_size = out->struct_size;
  std::memcpy(out, &r, std::min(caller_size, sizeof r));
  out->struct_size = caller_size;
  return true;
}

bool Session::take_spans(ddph_span_t* out) {
  ddph_span_t r;
  if (!spans_.take(&r)) return false;
  // As take_metrics: the fields this loader knows, the caller's size kept.
  const size_t caller_size = out->struct_size;
  std::memcpy(out, &r, std::min(caller_size, sizeof r));
  out->struct_size = caller_size;
  return true;
}

bool Session::on_own_thread() const {
  return worker_->on_worker_thread() || t_in_done_of == this;
}

void Session::check_not_in_done(const char* function) const {
  // It would wait for itself: a done callback runs on the worker, or for a
  // pipelined hook on finisher_, whose bucket is still in flight.
  DDPH_CHECK(!worker_->on_worker_thread() && t_in_done_of != this, DDPH_INVALID_ARGUMENT,
             function << ": called from a done callback; call it from another thread");
}

ddph_error_t* Session::flush() {
  check_not_in_done("ddph_session_flush");
  worker_->wait_idle();
  wait_in_flight();  // every bucket the worker started has been finished
  std::lock_guard<std::mutex> lock(errors_mu_);
  if (!has_first_error_) return nullptr;
  has_first_error_ = false;
  return make_c_error(first_error_code_, first_error_message_);
}

void Session::stats(ddph_stats_t* out) const {
  // Zero what this loader knows, leaving a newer caller's extra fields alone.
  ddph_stats_t s{};
  s.struct_size = out->struct_size;
  s.steps = steps_.load();
  s.buckets = buckets_.load();
  for (const HookChain& chain : chains_) {
    const Counters c = counters(chain, true);
    s.bytes_in += c.bytes_in;
    s.bytes_out += c.bytes_out;
  }
  if (comm_ != nullptr && comm_->bytes_sent != nullptr)
    s.wire_bytes = comm_->bytes_sent(comm_->ctx);
  std::memcpy(out, &s, sizeof s);
}

void Session::save_state(ddph_write_fn write, void* sink) {
  DDPH_CHECK(write != nullptr, DDPH_INVALID_ARGUMENT, "ddph_session_save_state: write is NULL");
  check_not_in_done("ddph_session_save_state");
  std::string blob;
  std::exception_ptr failure;
  // On the worker: [serialized] with run_bucket, after every queued bucket
  // and every pipelined bucket's done (ABI 1.6).
  worker_->run_and_wait([&] {
    wait_in_flight();
    try {
      std::vector<const ChainElement*> hooks;
      for (const HookChain& chain : chains_) append_stateful(chain.elements, hooks);
      blob = save_states(hooks);
    } catch (...) {
      failure = std::current_exception();  // rethrown on the caller's thread
    }
  });
  if (failure) std::rethrow_exception(failure);
  write(sink, blob.data(), blob.size());
}

void Session::load_state(const void* bytes, size_t n) {
  check_not_in_done("ddph_session_load_state");
  decode_state(bytes, n);  // a malformed blob is refused before waiting for the worker
  std::exception_ptr failure;
  worker_->run_and_wait([&] {
    wait_in_flight();
    try {
      std::vector<const ChainElement*> hooks;
      for (const HookChain& chain : chains_) append_stateful(chain.elements, hooks);
      load_states(hooks, bytes, n);
    } catch (...) {
      failure = std::current_exception();  // rethrown on the caller's thread
    }
  });
  if (failure) std::rethrow_exception(failure);
}

}  // namespace loader
}  // namespace ddph
