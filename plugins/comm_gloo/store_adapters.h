// The rendezvous stores comm_gloo connects through: gloo's FileStore and
// RedisStore chosen by URL, or the host's ddph_store_t table.
#pragma once

#include <ddph/ddph.h>
#include <gloo/rendezvous/store.h>

#include <chrono>
#include <memory>
#include <string>

namespace ddph {
namespace comm_gloo {

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

// Checks a rendezvous URL ("file:///abs/dir" or "redis://host[:port]") and
// throws DDPH_INVALID_ARGUMENT naming init.rendezvous if it is malformed.
// Touches nothing.
void check_rendezvous_url(const std::string& url);

// Opens the store a URL names (creating a file store's directory). Failing
// to reach it is DDPH_COMM_FAILURE.
std::unique_ptr<::gloo::rendezvous::Store> open_url_store(const std::string& url, int rank);

}  // namespace comm_gloo
}  // namespace ddph
