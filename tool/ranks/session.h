// A ddph session as `ddph train` and `ddph bench` use it: the public C host
// API only, with errors turned into exceptions that carry the code name, so a
// rank can report a failure in one line and exit non-zero.
#pragma once

#include <ddph/ddph.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace ddph::tool {

class SessionError : public std::runtime_error {
 public:
  SessionError(ddph_code_t code, const std::string& message);
  ddph_code_t code() const { return code_; }

 private:
  ddph_code_t code_;
};

// Throws SessionError for a non-NULL error (and frees it); `what` says which call.
void check(ddph_error_t* error, const char* what);

class Session {
 public:
  // Opens config_path as rank of world, with the rendezvous overridden (an
  // empty one keeps the YAML's). Collective over all ranks.
  // job: the job id, or "" for the YAML's / the environment's.
  Session(const std::string& config_path, int rank, int world, const std::string& rendezvous,
          const std::string& job = "");
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // The done callback frees a bucket's error; flush() reports the first one.
  void submit(const ddph_bucket_t* bucket);
  void flush();
  ddph_stats_t stats();
  // The metrics records of the buckets completed since the last call.
  std::vector<ddph_bucket_metrics_t> take_metrics();
  // The phases the hooks reported since the last call (ABI 1.7).
  std::vector<ddph_span_t> take_spans();
  ddph_comm_t* comm();
  // The bytes ddph_session_save_state writes now: the hooks' state (an
  // optimizer's, a zero hook's shard) as a checkpoint holds it.
  uint64_t state_bytes();

  // Collectives on the session's communicator, for the tool's own
  // bookkeeping (timings, metrics, parameter hashes). Only between flush and
  // the next submit: the hooks own the communicator while buckets fly.
  void barrier();
  void allreduce(double* values, int64_t n, ddph_reduce_op_t op);
  // fp32 in place: what `ddph bench` times as Gloo's raw allreduce.
  void allreduce(float* values, int64_t n, ddph_reduce_op_t op);
  // out receives world * n values, rank r's at r * n.
  void allgather(const int64_t* values, int64_t n, int64_t* out);

 private:
  ddph_session_t* s_ = nullptr;
};

}  // namespace ddph::tool
