// One run of a job on a rendezvous store: the namespace every key of a
// session lives in, and the checks that keep jobs apart.
//
// Keys: "ddph/<job>/run" is the run marker, which rank 0 creates (only if
// absent) holding a fresh random nonce, the world size and who wrote it;
// every other key is "ddph/<job>/<nonce>/<key>". So
// - two jobs with different ids never share a key;
// - a second rank 0 of the same job id (a job started twice, or the stale
//   marker of a run that crashed) is refused, saying who holds the id;
// - a rank of another world size, or a second process claiming a rank that
//   is taken, is refused naming the other side;
// - with a secret, every value carries an HMAC and unsigned or wrongly signed
//   values are refused, naming the writer they claim.
// Keys never depend on how many sessions a process opened.
//
// Once every rank has read them (when the session's communicator is
// connected; rank 0's marker included), each rank removes the keys it wrote,
// so a job that ends well leaves nothing behind and the same id can run
// again.
#pragma once

#include <ddph/ddph.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/comm/rendezvous/kv_store.h"

namespace ddph {
namespace loader {

struct JobRun {
  std::string job;         // a valid job id
  std::string job_source;  // where the id came from, for messages
  int rank = 0, world = 1;
  std::chrono::milliseconds timeout{0};
  std::string secret;  // empty: values are not signed
};

class JobStore {
 public:
  JobStore(std::unique_ptr<rendezvous::KvStore> kv, JobRun run);
  ~JobStore();
  JobStore(const JobStore&) = delete;
  JobStore& operator=(const JobStore&) = delete;

  // The job-scoped store a communicator rendezvouses through, valid while
  // this object lives. The run starts (marker) at its first use, so a
  // communicator that needs no store (MPI) never touches it.
  const ddph_store_t* table() const { return &table_; }

  // Removes the keys this rank wrote and, on rank 0, the run marker. Call
  // only once every rank has read them: when a communicator connected (and
  // before the next collective, so that no peer can start the job's next
  // run while this run's marker is still there), or when the session
  // failed. Keys written later are removed by the next call. Never throws;
  // failures are logged. [thread-safe]
  void release() noexcept;

  // The key behind a table key, for tests: "ddph/<job>/<nonce>/<key>".
  std::string full_key(const std::string& key);

 private:
  void set(const std::string& key, const std::string& value);
  std::string get(const std::string& key, int64_t timeout_ms);
  void begin_locked();
  std::string frame(const std::string& key, const std::string& payload) const;
  std::string unframe(const std::string& key, const std::string& value) const;
  std::string cleanup_hint() const;
  std::string marker_key() const { return "ddph/" + run_.job + "/run"; }

  std::unique_ptr<rendezvous::KvStore> kv_;
  const JobRun run_;
  ddph_store_t table_{};
  std::mutex mu_;
  bool begun_ = false;
  bool own_marker_ = false;
  std::string namespace_;           // "ddph/<job>/<nonce>/" once begun
  std::vector<std::string> wrote_;  // full keys this rank wrote, still in the store
};

}  // namespace loader
}  // namespace ddph
