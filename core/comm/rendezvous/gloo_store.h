// A KvStore as the gloo store a communicator connects its full mesh
// through, under the communicator's key prefix. Shared by the engines that
// rendezvous through a store (comm_gloo for its addresses, comm_nccl for its
// unique id).
#pragma once

#include <ddph/ddph.h>
#include <gloo/rendezvous/store.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "core/comm/rendezvous/kv_store.h"

namespace ddph {
namespace rendezvous {

// Every wait is bounded by `timeout`, with millisecond resolution, including
// gloo's calls that pass none (gloo would use its own 30 s). A wait that
// runs out is DDPH_TIMEOUT; for gloo's per-rank keys (the key is the rank)
// the message names the rank that did not join.
class GlooStore : public ::gloo::rendezvous::Store {
 public:
  GlooStore(std::shared_ptr<KvStore> kv, std::string prefix, std::chrono::milliseconds timeout);
  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  std::string full(const std::string& key) const { return prefix_ + "/" + key; }
  std::string get_by(const std::string& key, Deadline deadline);
  std::shared_ptr<KvStore> kv_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
};

// The store init names: the host's store (which the loader also uses to
// pass its job-scoped store) wins over a URL; a world of one with neither
// gets a store in memory. init must have passed check_comm_init.
std::shared_ptr<KvStore> open_init_store(const ddph_comm_init_t& init);

}  // namespace rendezvous
}  // namespace ddph
