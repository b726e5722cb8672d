// The key-value stores ranks meet through: a directory (file://), a Redis
// server (redis://), rank 0's process (tcp://, env://) or the host's
// ddph_store_t. Every call is bounded by a
// deadline, with millisecond resolution, so that a missing rank or a store
// that never answers ends in DDPH_TIMEOUT instead of a hang.
//
// Threading: every store is [thread-safe].
#pragma once

#include <ddph/ddph.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/base/error.h"

namespace ddph {
namespace rendezvous {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

inline Deadline deadline_in(std::chrono::milliseconds timeout) {
  return Clock::now() + timeout;
}

// The DDPH_TIMEOUT of a wait whose keys did not appear by the deadline while
// the store kept answering: their writer is missing, the store is not. A
// store that does not answer in time throws a plain Error instead, so a
// message can tell the two apart.
class KeysMissing : public Error {
 public:
  KeysMissing(const std::string& message, std::vector<std::string> keys)
      : Error(DDPH_TIMEOUT, message), keys_(std::move(keys)) {}
  const std::vector<std::string>& keys() const { return keys_; }

 private:
  std::vector<std::string> keys_;
};

class KvStore {
 public:
  virtual ~KvStore() = default;

  // Sets key to value, replacing any earlier value.
  virtual void set(const std::string& key, const std::string& value, Deadline deadline) = 0;
  // Sets key to value only if key is absent; false (and nothing written) if
  // it exists. Atomic in the file, Redis and tcp stores; a host store has no
  // such primitive and always sets (it serves one job: see host_store).
  virtual bool add(const std::string& key, const std::string& value, Deadline deadline) = 0;
  // The value of key if it exists now.
  virtual bool try_get(const std::string& key, std::string* value, Deadline deadline) = 0;
  // Removes key; a missing key is not an error. A store that cannot remove
  // keys (an older host store) does nothing.
  virtual void erase(const std::string& key, Deadline deadline) = 0;
  // "file store /dir", "redis store 10.0.0.1:6379", "host store": for messages.
  virtual std::string describe() const = 0;
  // How a user removes every key that starts with prefix, in words or as a
  // command, for messages that ask them to.
  virtual std::string how_to_remove(const std::string& prefix) const = 0;

  // For each key, whether it exists now (found[i]) and its value. One round
  // trip where the store can (Redis: MGET); the default calls try_get for
  // each.
  virtual void try_get_many(const std::vector<std::string>& keys, std::vector<std::string>* values,
                            std::vector<bool>* found, Deadline deadline);

  // Whether try_get answers at once and may be called freely. A host's
  // store can only be asked with a wait (1 ms at least), and c10d's
  // TCPStore falls out of step with its server after a wait that timed out,
  // so wait_reading_all asks it for the one key it needs, with its own
  // blocking get.
  virtual bool probes_cheaply() const { return true; }

  // What the store last said about a key it did not have ("" when it says
  // nothing but no), for the message of a wait that ran out.
  virtual std::string last_miss() const { return ""; }

  // Waits until key exists, then returns its value; throws KeysMissing
  // naming the key and the store once deadline passes. The default polls
  // try_get.
  virtual std::string get(const std::string& key, Deadline deadline);

  // Waits until every key exists, with one deadline for them all, and
  // returns their values in order. Each round asks for all the keys not
  // seen yet at once (try_get_many), so N keys cost N reads plus one batch
  // per round, never a wait per key. Throws KeysMissing listing the keys
  // still missing at the deadline.
  std::vector<std::string> get_all(const std::vector<std::string>& keys, Deadline deadline);

  // Waits until keys[want] exists (known[want]); each round also reads the
  // other keys not known yet, in the same batch, and keeps what it finds
  // in values/known, so a later wait for one of them costs nothing (gloo
  // waits for the ranks' keys one after another); a store that does not
  // probe cheaply is asked for keys[want] alone. Throws KeysMissing naming
  // keys[want] alone at the deadline.
  void wait_reading_all(const std::vector<std::string>& keys, size_t want,
                        std::vector<std::string>* values, std::vector<bool>* known,
                        Deadline deadline);

 private:
  // The loop of both: until known[want] (want == keys.size(): all known).
  void poll(const std::vector<std::string>& keys, size_t want, std::vector<std::string>* values,
            std::vector<bool>* known, Deadline deadline);
};

// Who may use a store that checks it itself (tcp://, whose server is rank
// 0): the job its ranks belong to and, when the job has a secret, the
// HMAC-SHA256 under it (the loader's, loader/job/job_secret.h), so that the
// secret itself stays with the loader. A communicator opened on its own
// (init.rendezvous) has neither.
struct StoreAccess {
  std::string job;
  std::function<std::string(const std::string& data)> sign;  // empty: no secret
};

// Opens the store a comm.rendezvous URL names ("file:///abs/dir",
// "redis://host[:port]", "tcp://host:port", "env://"). A file store's
// directory is created with mode 0700 when missing and refused when another
// user owns it or others may write to it. A Redis store connects at its
// first command; keys it sets expire after key_ttl (0: never), so a crashed
// job's keys do not stay. A tcp:// store (env://: tcp://$MASTER_ADDR:
// $MASTER_PORT) is served by rank 0, which listens on the port before this
// returns, and admits only ranks of access.job holding its secret (see
// tcp_store.h). Throws DDPH_INVALID_ARGUMENT for a malformed URL, an unsafe
// directory or, on rank 0, a port already taken; the store's calls throw
// DDPH_COMM_FAILURE naming rank when it cannot be reached and DDPH_TIMEOUT
// when it does not answer in time.
std::unique_ptr<KvStore> open_url_store(const std::string& url, int rank,
                                        std::chrono::milliseconds key_ttl,
                                        const StoreAccess& access = {});

// A host's ddph_store_t as a KvStore. store outlives the result.
std::unique_ptr<KvStore> host_store(const ddph_store_t* store);

// A store in this process's memory, for a world of one, which needs no
// rendezvous: a communicator of one rank given neither a store nor a URL
// uses it (open_init_store).
std::unique_ptr<KvStore> memory_store();

}  // namespace rendezvous
}  // namespace ddph
