#include "core/comm/rendezvous/kv_store.h"

#include <algorithm>
#include <thread>

#include "core/base/error.h"
#include "core/comm/rendezvous/file_store.h"
#include "core/comm/rendezvous/redis_store.h"
#include "core/comm/rendezvous_url.h"

namespace ddph {
namespace rendezvous {

std::string KvStore::get(const std::string& key, Deadline deadline) {
  // Rendezvous waits are short and rare: poll, backing off from 1 ms to 20
  // ms so that a key is seen soon after it appears without spinning.
  std::chrono::milliseconds pause(1);
  std::string value;
  for (;;) {
    if (try_get(key, &value, deadline)) return value;
    const auto now = Clock::now();
    DDPH_CHECK(now < deadline, DDPH_TIMEOUT,
               describe() << ": key '" << key << "' did not appear in time");
    std::this_thread::sleep_for(std::min<Clock::duration>(pause, deadline - now));
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
}

std::unique_ptr<KvStore> open_url_store(const std::string& url, int rank,
                                        std::chrono::milliseconds key_ttl) {
  const RendezvousUrl parsed = parse_rendezvous_url(url);
  if (parsed.kind == RendezvousUrl::kFile) return std::make_unique<FileStore>(parsed.dir);
  return std::make_unique<RedisStore>(parsed.host, parsed.port, rank, key_ttl);
}

}  // namespace rendezvous
}  // namespace ddph
