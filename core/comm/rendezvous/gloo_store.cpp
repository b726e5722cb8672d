#include "core/comm/rendezvous/gloo_store.h"

#include <algorithm>

#include "core/base/error.h"

namespace ddph {
namespace rendezvous {
namespace {

// gloo's key for a rank's address: "rank_<N>" (or "<N>" in newer gloo).
// The rank's number, or "" for any other key.
std::string rank_of_key(const std::string& key) {
  const std::string digits = key.rfind("rank_", 0) == 0 ? key.substr(5) : key;
  const bool number =
      !digits.empty() && digits.size() < 10 &&
      std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
  return number ? digits : "";
}

}  // namespace

GlooStore::GlooStore(std::shared_ptr<KvStore> kv, std::string prefix,
                     std::chrono::milliseconds timeout)
    : kv_(std::move(kv)), prefix_(std::move(prefix)), timeout_(timeout) {}

void GlooStore::set(const std::string& key, const std::vector<char>& data) {
  kv_->set(full(key), std::string(data.begin(), data.end()), deadline_in(timeout_));
}

std::string GlooStore::get_by(const std::string& key, Deadline deadline) {
  try {
    return kv_->get(full(key), deadline);
  } catch (const Error& e) {
    const std::string rank = rank_of_key(key);
    if (e.code() != DDPH_TIMEOUT || rank.empty()) throw;
    DDPH_FAIL(DDPH_TIMEOUT, "rank " << rank << " of '" << prefix_
                                    << "' has not joined within the timeout (" << timeout_.count()
                                    << " ms): is it running, with the same job id, rendezvous "
                                       "and world size? ("
                                    << e.what() << ")");
  }
}

std::vector<char> GlooStore::get(const std::string& key) {
  const std::string value = get_by(key, deadline_in(timeout_));
  return std::vector<char>(value.begin(), value.end());
}

void GlooStore::wait(const std::vector<std::string>& keys) {
  wait(keys, timeout_);
}

void GlooStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds&) {
  // gloo passes its context's timeout (ours) or its own 30 s default; the
  // communicator's timeout is the one the user set, so it always applies.
  const Deadline deadline = deadline_in(timeout_);
  for (const std::string& key : keys) get_by(key, deadline);
}

std::shared_ptr<KvStore> open_init_store(const ddph_comm_init_t& init) {
  if (init.store != nullptr) return host_store(init.store);
  if (init.world_size == 1 && (init.rendezvous == nullptr || init.rendezvous[0] == '\0'))
    return memory_store();
  return open_url_store(init.rendezvous, init.rank, std::chrono::milliseconds(0));
}

}  // namespace rendezvous
}  // namespace ddph
