// The session's calls other than submit: flush, stats and checkpoints.
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "core/base/error.h"
#include "loader/session/session.h"
#include "loader/session/state_blob.h"

namespace ddph {
namespace loader {

bool Session::on_own_thread() const {
  return worker_->on_worker_thread() || lanes_.on_lane_thread() || in_done_of(this);
}

void Session::check_not_in_done(const char* function) const {
  // It would wait for itself: a done callback runs on the worker, or for a
  // pipelined hook on finisher_, whose bucket is still in flight.
  DDPH_CHECK(!on_own_thread(), DDPH_INVALID_ARGUMENT,
             function << ": called from a done callback; call it from another thread");
}

ddph_error_t* Session::flush() {
  check_not_in_done("ddph_session_flush");
  worker_->wait_idle();
  in_flight_.wait();  // every bucket the worker started has been finished
  return errors_.take_first();
}

void Session::stats(ddph_stats_t* out) const {
  // Zero what this loader knows, leaving a newer caller's extra fields alone.
  ddph_stats_t s{};
  s.struct_size = out->struct_size;
  s.steps = steps_.load();
  s.buckets = buckets_.load();
  auto add = [&s](const Chains& chains) {
    for (const HookChain& chain : chains.all()) {
      const Counters c = read_counters(chain, nullptr, true);
      s.bytes_in += c.bytes_in;
      s.bytes_out += c.bytes_out;
    }
  };
  auto wire = [](ddph_comm_t* comm) {
    return comm != nullptr && comm->bytes_sent != nullptr ? comm->bytes_sent(comm->ctx) : 0;
  };
  // Summed over the lanes (lane 0 is the session's own chains and comm_).
  add(chains_);
  s.wire_bytes = wire(comm_);
  for (const auto& lane : lanes_.all()) {
    if (!lane->owns_comm) continue;
    add(lane->own);
    s.wire_bytes += wire(lane->comm);
  }
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
    in_flight_.wait();
    try {
      std::vector<StateRecord> records = state_records(chains_.stateful());
      save_chooser(records);
      blob = encode_state(records);
    } catch (...) {
      failure = std::current_exception();  // rethrown on the caller's thread
    }
  });
  if (failure) std::rethrow_exception(failure);
  write(sink, blob.data(), blob.size());
}

void Session::load_state(const void* bytes, size_t n) {
  check_not_in_done("ddph_session_load_state");
  // A malformed blob is refused before waiting for the worker.
  std::vector<StateRecord> records = decode_state(bytes, n);
  std::exception_ptr failure;
  worker_->run_and_wait([&] {
    in_flight_.wait();
    try {
      std::unique_ptr<Chooser> chooser = read_chooser(records);  // takes the last record
      load_records(chains_.stateful(), records);
      if (chooser != nullptr) {
        chooser_ = std::move(chooser);
        auto_step_ = UINT64_MAX;
        auto_last_.clear();
      }
    } catch (...) {
      failure = std::current_exception();  // rethrown on the caller's thread
    }
  });
  if (failure) std::rethrow_exception(failure);
}

}  // namespace loader
}  // namespace ddph
