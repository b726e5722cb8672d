#include "core/comm/rendezvous/gloo/gloo_store.h"

#include <algorithm>
#include <sstream>

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
                     std::chrono::milliseconds timeout, int world)
    : kv_(std::move(kv)), prefix_(std::move(prefix)), timeout_(timeout), world_(world) {}

Deadline GlooStore::deadline() {
  if (!started_) {
    deadline_ = deadline_in(timeout_);
    started_ = true;
  }
  return deadline_;
}

void GlooStore::fail_missing(const KeysMissing& e) {
  std::vector<std::string> ranks;
  for (const std::string& key : e.keys()) {
    const std::string k = key.substr(std::min(key.size(), prefix_.size() + 1));
    const std::string rank = rank_of_key(k);
    if (rank.empty()) throw e;  // not a rank's key: the store's own words
    ranks.push_back(rank);
  }
  std::ostringstream text;
  text << (ranks.size() == 1 ? "rank " : "ranks ");
  for (size_t i = 0; i < ranks.size() && i < 20; ++i) text << (i ? ", " : "") << ranks[i];
  if (ranks.size() > 20) text << " and " << ranks.size() - 20 << " more";
  if (world_ > 0 && ranks.size() > 1) text << " (" << ranks.size() << " of " << world_ << ")";
  DDPH_FAIL(DDPH_TIMEOUT, text.str()
                              << " of '" << prefix_ << "' " << (ranks.size() == 1 ? "has" : "have")
                              << " not joined within the timeout (" << timeout_.count()
                              << " ms): is it running, with the same job id, rendezvous "
                                 "and world size? ("
                              << e.what() << ")");
}

// The value of rank `rank`'s key (`key`, "3" or "rank_3"), within the
// deadline of the whole wait, reading the other ranks' keys of the same
// form along the way.
std::string GlooStore::rank_value(const std::string& key, int rank) {
  const std::string head = key.rfind("rank_", 0) == 0 ? "rank_" : "";
  RankKeys& ks = rank_keys_[head];
  if (ks.keys.empty()) {
    for (int r = 0; r < world_; ++r) ks.keys.push_back(full(head + std::to_string(r)));
    ks.values.assign(size_t(world_), std::string());
    ks.known.assign(size_t(world_), false);
  }
  if (!ks.known[size_t(rank)]) {
    try {
      kv_->wait_reading_all(ks.keys, size_t(rank), &ks.values, &ks.known, deadline());
    } catch (const KeysMissing& e) {
      fail_missing(e);
    }
  }
  return ks.values[size_t(rank)];
}

std::string GlooStore::get_by(const std::string& key) {
  const std::string digits = rank_of_key(key);
  if (world_ > 0 && !digits.empty() && std::stol(digits) < world_)
    return rank_value(key, int(std::stol(digits)));
  try {
    return kv_->get(full(key), deadline());
  } catch (const KeysMissing& e) {
    fail_missing(e);
  }
}

void GlooStore::set(const std::string& key, const std::vector<char>& data) {
  kv_->set(full(key), std::string(data.begin(), data.end()), deadline_in(timeout_));
  // What was read of this key before is stale now.
  const std::string digits = rank_of_key(key);
  auto it = rank_keys_.find(key.rfind("rank_", 0) == 0 ? "rank_" : "");
  if (!digits.empty() && it != rank_keys_.end() && std::stol(digits) < world_)
    it->second.known[size_t(std::stol(digits))] = false;
}

std::vector<char> GlooStore::get(const std::string& key) {
  const std::string value = get_by(key);
  return std::vector<char>(value.begin(), value.end());
}

void GlooStore::wait(const std::vector<std::string>& keys) {
  wait(keys, timeout_);
}

void GlooStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds&) {
  // gloo passes its context's timeout (ours) or its own 30 s default; the
  // communicator's timeout is the one the user set, so it always applies,
  // once for the whole rendezvous.
  for (const std::string& key : keys) get_by(key);
}

std::shared_ptr<KvStore> open_init_store(const ddph_comm_init_t& init) {
  if (init.store != nullptr) return host_store(init.store);
  if (init.world_size == 1 && (init.rendezvous == nullptr || init.rendezvous[0] == '\0'))
    return memory_store();
  return open_url_store(init.rendezvous, init.rank, std::chrono::milliseconds(0));
}

}  // namespace rendezvous
}  // namespace ddph
