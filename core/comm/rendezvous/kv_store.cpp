#include "core/comm/rendezvous/kv_store.h"

#include <algorithm>
#include <sstream>
#include <thread>

#include "core/base/error.h"
#include "core/comm/rendezvous/file_store.h"
#include "core/comm/rendezvous/redis_store.h"
#include "core/comm/rendezvous/tcp_store.h"
#include "core/comm/rendezvous_url.h"

namespace ddph {
namespace rendezvous {

void KvStore::try_get_many(const std::vector<std::string>& keys, std::vector<std::string>* values,
                           std::vector<bool>* found, Deadline deadline) {
  values->assign(keys.size(), std::string());
  found->assign(keys.size(), false);
  for (size_t i = 0; i < keys.size(); ++i) (*found)[i] = try_get(keys[i], &(*values)[i], deadline);
}

std::string KvStore::get(const std::string& key, Deadline deadline) {
  return get_all({key}, deadline)[0];
}

std::vector<std::string> KvStore::get_all(const std::vector<std::string>& keys, Deadline deadline) {
  std::vector<std::string> values(keys.size());
  std::vector<bool> known(keys.size(), false);
  poll(keys, keys.size(), &values, &known, deadline);
  return values;
}

void KvStore::wait_reading_all(const std::vector<std::string>& keys, size_t want,
                               std::vector<std::string>* values, std::vector<bool>* known,
                               Deadline deadline) {
  if (!probes_cheaply()) {
    (*values)[want] = get(keys[want], deadline);
    (*known)[want] = true;
    return;
  }
  poll(keys, want, values, known, deadline);
}

void KvStore::poll(const std::vector<std::string>& keys, size_t want,
                   std::vector<std::string>* values, std::vector<bool>* known, Deadline deadline) {
  const bool all = want >= keys.size();
  auto done = [&] {
    if (!all) return bool((*known)[want]);
    return std::all_of(known->begin(), known->end(), [](bool k) { return k; });
  };
  // Rendezvous waits are short and rare: poll, backing off from 1 ms to 20
  // ms so that a key is seen soon after it appears without spinning.
  std::chrono::milliseconds pause(1);
  std::vector<std::string> ask, got;
  std::vector<size_t> index;
  std::vector<bool> found;
  while (!done()) {
    ask.clear();
    index.clear();
    for (size_t i = 0; i < keys.size(); ++i) {
      if ((*known)[i]) continue;
      ask.push_back(keys[i]);
      index.push_back(i);
    }
    try_get_many(ask, &got, &found, deadline);
    for (size_t j = 0; j < ask.size(); ++j) {
      if (!found[j]) continue;
      (*values)[index[j]] = std::move(got[j]);
      (*known)[index[j]] = true;
    }
    if (done()) return;
    const auto now = Clock::now();
    if (now >= deadline) {
      std::vector<std::string> names;
      std::ostringstream text;
      text << describe() << ": key ";
      for (size_t i = 0; i < keys.size(); ++i) {
        if ((*known)[i] || (!all && i != want)) continue;
        if (names.size() < 5) text << (names.empty() ? "" : ", ") << "'" << keys[i] << "'";
        names.push_back(keys[i]);
      }
      if (names.size() > 5) text << " and " << names.size() - 5 << " more keys";
      text << " did not appear in time";
      const std::string said = last_miss();
      if (!said.empty()) text << " (" << said << ")";
      throw KeysMissing(text.str(), std::move(names));
    }
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
}

std::unique_ptr<KvStore> open_url_store(const std::string& url, int rank,
                                        std::chrono::milliseconds key_ttl,
                                        const StoreAccess& access) {
  const RendezvousUrl parsed = parse_rendezvous_url(url);
  if (parsed.kind == RendezvousUrl::kFile) return std::make_unique<FileStore>(parsed.dir);
  if (parsed.kind == RendezvousUrl::kTcp) {
    const std::string shown = parsed.from_env.empty() ? url : url + " (" + parsed.from_env + ")";
    return std::make_unique<TcpStore>(parsed.host, parsed.port, rank, shown, access);
  }
  return std::make_unique<RedisStore>(parsed.host, parsed.port, rank, key_ttl);
}

}  // namespace rendezvous
}  // namespace ddph
