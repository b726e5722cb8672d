// A KvStore as the gloo store a communicator connects its full mesh
// through, under the communicator's key prefix. Shared by the engines that
// rendezvous through a store (comm_gloo for its addresses, comm_nccl for its
// unique id).
#pragma once

#include <ddph/ddph.h>
#include <gloo/rendezvous/store.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/comm/rendezvous/kv_store.h"

namespace ddph {
namespace rendezvous {

// Every wait is bounded by `timeout`, with millisecond resolution, including
// gloo's calls that pass none (gloo would use its own 30 s). The waits share
// one deadline, `timeout` after the first of them: gloo waits for each
// rank's key in turn, and a deadline per key would let N keys take N
// timeouts. With `world` given, a wait for a rank's key reads every rank's
// key not known yet in the same batch (KvStore::wait_reading_all: one batch
// per round, not a round trip per key), and later waits and gets of keys it
// found are answered from what it read. A wait that runs out is
// DDPH_TIMEOUT; for gloo's per-rank keys (the key is the rank) the message
// names the rank that did not join.
class GlooStore : public ::gloo::rendezvous::Store {
 public:
  GlooStore(std::shared_ptr<KvStore> kv, std::string prefix, std::chrono::milliseconds timeout,
            int world = 0);
  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  // Starts a new wait: the next wait's deadline is `timeout` after it (for
  // a later phase, e.g. reading the peers' socket ends once connected).
  void restart_deadline() { started_ = false; }

 private:
  std::string full(const std::string& key) const { return prefix_ + "/" + key; }
  Deadline deadline();
  std::string get_by(const std::string& key);
  std::string rank_value(const std::string& key, int rank);
  [[noreturn]] void fail_missing(const KeysMissing& e);
  std::shared_ptr<KvStore> kv_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
  int world_;
  bool started_ = false;
  Deadline deadline_{};
  // Per form of rank key ("3" or "rank_3"): every rank's full key, its
  // value and whether it was read.
  struct RankKeys {
    std::vector<std::string> keys, values;
    std::vector<bool> known;
  };
  std::map<std::string, RankKeys> rank_keys_;
};

// The store init names: the host's store (which the loader also uses to
// pass its job-scoped store) wins over a URL; a world of one with neither
// gets a store in memory. init must have passed check_comm_init.
std::shared_ptr<KvStore> open_init_store(const ddph_comm_init_t& init);

}  // namespace rendezvous
}  // namespace ddph
