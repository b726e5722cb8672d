// The rendezvous store a communicator meets its peers through, as a gloo
// store: gloo's FileStore or RedisStore for a comm.rendezvous URL, or the
// host's ddph_store_t table. Shared by the engines that rendezvous through a
// store (comm_gloo for its addresses, comm_nccl for its unique id).
#pragma once

#include <ddph/ddph.h>
#include <gloo/rendezvous/store.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace ddph {
namespace rendezvous {

// Adapts a host ddph_store_t to gloo. Every wait is bounded: a call without
// a timeout uses default_timeout (the communicator's), so a missing rank
// becomes DDPH_TIMEOUT rather than a hang.
class HostStore : public ::gloo::rendezvous::Store {
 public:
  HostStore(const ddph_store_t* store, std::chrono::milliseconds default_timeout);
  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  std::vector<char> get_within(const std::string& key, std::chrono::milliseconds timeout);
  const ddph_store_t* store_;
  std::chrono::milliseconds default_timeout_;
};

// Opens the store a URL names (creating a file store's directory). A
// malformed URL is DDPH_INVALID_ARGUMENT; failing to reach the store is
// DDPH_COMM_FAILURE naming rank.
std::unique_ptr<::gloo::rendezvous::Store> open_url_store(const std::string& url, int rank);

// The store init names: the host's store wins over a URL (the loader passes
// one or the other). init must have passed check_comm_init.
std::shared_ptr<::gloo::rendezvous::Store> open_init_store(const ddph_comm_init_t& init);

}  // namespace rendezvous
}  // namespace ddph
