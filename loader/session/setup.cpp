#include <string>

#include "core/base/device_allocator.h"
#include "core/base/error.h"
#include "core/base/host.h"
#include "loader/agreement/rank_agreement.h"
#include "loader/host_table.h"
#include "loader/log_sink.h"
#include "loader/registry/registry.h"
#include "loader/session/rendezvous.h"
#include "loader/session/session.h"

namespace ddph {
namespace loader {

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
  // Settings of this rank's environment: a value refused here is carried
  // into the job agreement, where every rank refuses the job naming it,
  // rather than failing this rank alone while its peers wait to connect.
  std::string local_error;
  try {
    lanes_offered_ = lanes_offered(job_.config.comm);
    apply_bucket_check_override(job_.config.comm.bucket_check);
  } catch (const Error& e) {
    local_error = e.what();
  }
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
    agree_on_job(control_, job_, local_error);
    ddph_comm_t* hooks_comm = checks_.hooks_comm(comm_);
    for (const ResolvedRule& rule : job_.rules)
      chains_.create(*rule.hook, true, rule.max_bytes, hooks_comm, device_allocator_);
    if (job_.auto_choice) {
      create_auto(hooks_comm);
    } else {
      chains_.create(*job_.hook, false, 0, hooks_comm, device_allocator_);
    }
    create_lanes();
    worker_ = std::make_unique<Worker>();
    worker_->post([rank = placement_.rank] { set_thread_log_rank(rank); });
  } catch (...) {
    lanes_.destroy();
    chains_.destroy();
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
  lanes_.drain();     // the same for the buckets it handed to lanes
  in_flight_.wait();  // a pipelined hook's or a lane's last dones, before it is destroyed
  finisher_.reset();  // joins: its last task may still be returning
  lanes_.destroy();
  chains_.destroy();
  destroy_communicators();
  if (job_store_ != nullptr) job_store_->release();  // keys of later splits, if any
  // job_ (and with it the registry, unless shared) goes last: plugins unload
  // only after every state made from them is gone.
}

const ResolvedHook& Session::resolved_chain(size_t index) const {
  if (index < job_.rules.size()) return *job_.rules[index].hook;
  if (job_.auto_choice) return *job_.auto_choice->candidates.at(index - job_.rules.size());
  return *job_.hook;
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
  comm_ = make_communicator("comm");
  owns_comm_ = true;
}

ddph_comm_t* Session::make_communicator(const char* prefix) {
  const CommSpec& spec = job_.config.comm;
  ddph_comm_init_t init{};
  init.struct_size = sizeof init;
  init.host = ddph_host();
  init.rank = placement_.rank;
  init.world_size = placement_.world_size;
  // The communicator meets its peers through the job's store, under keys
  // that depend only on the job, its run and the prefix, never on how many
  // sessions this process opened.
  init.rendezvous = nullptr;
  init.store = job_store_ != nullptr ? job_store_->table() : nullptr;
  init.prefix = prefix;
  init.timeout_ms = spec.timeout_ms;
  init.options = job_.comm.options.data();
  init.num_options = job_.comm.options.size();
  init.device_allocator = device_allocator_;
  ddph_comm_t* comm = nullptr;
  DDPH_CALL(job_.comm.factory->create(&init, &comm));
  DDPH_CHECK(comm != nullptr, DDPH_INTERNAL,
             "comm backend '" << spec.backend << "' (" << job_.comm.plugin->file()
                              << ") returned success but no communicator");
  if (comm->struct_size < DDPH_COMM_SIZE_V1_0) {
    if (comm->destroy != nullptr) comm->destroy(comm->ctx);
    DDPH_FAIL(DDPH_VERSION_MISMATCH, "comm backend '"
                                         << spec.backend << "' made a ddph_comm_t of struct_size "
                                         << comm->struct_size << ", smaller than the v1.0 size "
                                         << DDPH_COMM_SIZE_V1_0);
  }
  return comm;
}

// The rank-agreement exchanges get a communicator of their own where the
// backend can split one: on the hooks' communicator, a rank still exchanging
// layouts could meet a peer's hook collective in the same slot, and Gloo
// aborts the process on a message longer than the buffer posted for it.
// Apart, a mismatch can only end in a timeout on both sides.
ddph_comm_t* Session::split_of_comm() {
  if (comm_->split == nullptr || comm_->size(comm_->ctx) <= 1) return nullptr;
  ddph_comm_t* split = nullptr;
  DDPH_CALL(comm_->split(comm_->ctx, 0, comm_->rank(comm_->ctx), &split));
  DDPH_CHECK(split != nullptr, DDPH_INTERNAL, "split of the session's communicator gave NULL");
  return split;
}

void Session::create_control_communicator() {
  ddph_comm_t* control = split_of_comm();
  control_ = control != nullptr ? control : comm_;
  // What run_bucket checks, and in strict mode the hooks' wrapped
  // communicator.
  const std::string family = job_.comm.plugin != nullptr ? job_.comm.plugin->family() : "";
  checks_.configure(job_.config.comm.bucket_check, family, job_.comm.host_provided, comm_,
                    control_);
}

void Session::destroy_communicators() {
  checks_.close();  // its thread uses control_
  if (owns_auto_comm_ && auto_comm_->destroy != nullptr) auto_comm_->destroy(auto_comm_->ctx);
  auto_comm_ = nullptr;
  owns_auto_comm_ = false;
  if (control_ != nullptr && control_ != comm_ && control_->destroy != nullptr)
    control_->destroy(control_->ctx);
  control_ = nullptr;
  if (owns_comm_ && comm_ != nullptr && comm_->destroy != nullptr) comm_->destroy(comm_->ctx);
  comm_ = nullptr;
}

}  // namespace loader
}  // namespace ddph
