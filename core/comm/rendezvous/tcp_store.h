// A rendezvous store that rank 0 serves (tcp://HOST:PORT, env://), as
// torchrun's TCPStore: no shared filesystem and no Redis server, only the
// address every launcher already hands out (MASTER_ADDR, MASTER_PORT).
//
// Rank 0 listens on PORT on every interface from the moment the store is
// opened (a taken port is refused then, before anything else happens) and
// keeps the keys in its memory; its own calls go to them directly. Every
// other rank connects to HOST:PORT, retrying until the call's deadline
// while rank 0 is not up yet, and shows the job it belongs to and, with a
// secret, that it holds it (tcp_protocol.h); the server refuses it
// otherwise, both sides saying why. Every socket wait is bounded by the
// call's deadline.
//
// The keys live as long as rank 0's store: once it is destroyed (rank 0's
// session closed, or its process ended), a rank that wrote keys there gets
// DDPH_COMM_FAILURE naming "rank 0's tcp store at HOST:PORT" on its next
// call. A rank that wrote nothing yet reconnects instead, so a rank that
// opens the job's next session while rank 0 is still closing the last one
// meets the next server.
//
// Threading: [thread-safe]; one request at a time per store.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "core/comm/rendezvous/kv_store.h"
#include "core/comm/rendezvous/tcp_protocol.h"
#include "core/comm/rendezvous/tcp_server.h"
#include "core/comm/rendezvous/tcp_socket.h"

namespace ddph {
namespace rendezvous {

class TcpStore : public KvStore {
 public:
  // rank 0 serves (and throws DDPH_INVALID_ARGUMENT when port is taken);
  // any other rank connects at its first call. url (as the user wrote it,
  // env:// with its variables) goes in messages.
  TcpStore(std::string host, int port, int rank, std::string url, const StoreAccess& access);
  ~TcpStore() override;

  void set(const std::string& key, const std::string& value, Deadline deadline) override;
  bool add(const std::string& key, const std::string& value, Deadline deadline) override;
  bool try_get(const std::string& key, std::string* value, Deadline deadline) override;
  // One round trip for all the keys.
  void try_get_many(const std::vector<std::string>& keys, std::vector<std::string>* values,
                    std::vector<bool>* found, Deadline deadline) override;
  void erase(const std::string& key, Deadline deadline) override;
  // "rank 0's tcp store at HOST:PORT".
  std::string describe() const override { return name_; }
  std::string how_to_remove(const std::string& prefix) const override;
  // On rank 0: the clients its server refused (another job, no or another
  // secret), so that a wait for a rank that was refused says so.
  std::string last_miss() const override;

 private:
  // Sends r and returns the server's reply, connecting first when needed.
  tcp::Reply call(const tcp::Request& r, Deadline deadline, const std::string& what);
  void connect(Deadline deadline);
  void handshake(Deadline deadline);
  [[noreturn]] void lost(const std::string& what, const std::string& why);

  const std::string host_, url_, name_;
  const int port_, rank_;
  const StoreAccess access_;
  std::shared_ptr<KvStore> keys_;      // rank 0: the keys it serves
  std::unique_ptr<TcpServer> server_;  // rank 0

  std::mutex mu_;
  tcp::Fd fd_;
  std::string instance_;  // the server run this rank's keys are in
  bool wrote_ = false;    // this rank has keys in instance_ (or may have)
};

}  // namespace rendezvous
}  // namespace ddph
