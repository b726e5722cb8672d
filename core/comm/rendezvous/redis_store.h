// A rendezvous store on a Redis server, for jobs that span machines.
// Every command is bounded by its deadline (hiredis socket timeouts), so a
// server that accepts connections but never answers, or one that was
// stopped, gives DDPH_TIMEOUT instead of a hang.
#pragma once

#include <chrono>
#include <mutex>
#include <string>

#include "core/comm/rendezvous/kv_store.h"

struct redisContext;
struct redisReply;

namespace ddph {
namespace rendezvous {

class RedisStore : public KvStore {
 public:
  // Connects at the first command, within that command's deadline, so a
  // communicator that needs no store (MPI) never reaches for the server.
  // Keys this store sets expire after key_ttl (0: never). A command throws
  // DDPH_COMM_FAILURE naming rank when nobody listens, DDPH_TIMEOUT when the
  // server does not answer in time.
  RedisStore(std::string host, int port, int rank, std::chrono::milliseconds key_ttl);
  ~RedisStore() override;
  RedisStore(const RedisStore&) = delete;
  RedisStore& operator=(const RedisStore&) = delete;

  void set(const std::string& key, const std::string& value, Deadline deadline) override;
  bool add(const std::string& key, const std::string& value, Deadline deadline) override;
  bool try_get(const std::string& key, std::string* value, Deadline deadline) override;
  // MGET: one round trip per 1,000 keys.
  void try_get_many(const std::vector<std::string>& keys, std::vector<std::string>* values,
                    std::vector<bool>* found, Deadline deadline) override;
  void erase(const std::string& key, Deadline deadline) override;
  std::string describe() const override;
  std::string how_to_remove(const std::string& prefix) const override;

 private:
  // Runs one command within the deadline; the reply belongs to the caller.
  // A failed context is dropped and the next command reconnects.
  redisReply* command(Deadline deadline, const char* what, int argc, const char** argv,
                      const size_t* lengths);
  void connect(Deadline deadline);
  void drop_connection();

  std::mutex mu_;
  redisContext* ctx_ = nullptr;
  std::string host_;
  int port_;
  int rank_;
  std::chrono::milliseconds key_ttl_;
};

}  // namespace rendezvous
}  // namespace ddph
