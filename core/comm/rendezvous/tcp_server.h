// The server of a tcp:// store, which rank 0 runs: one thread, one poll
// loop over the listening socket and every client's connection (a world of
// thousands of ranks costs no thread per rank), serving keys held in this
// process's memory.
//
// A client is served only after its handshake (tcp_protocol.h): a client of
// another job, or one whose secret is missing or differs, is refused at
// once with a reply saying why, and the refusal is kept (refusals()) and
// logged, so rank 0's own errors can name the intruder too.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/comm/rendezvous/kv_store.h"
#include "core/comm/rendezvous/tcp_socket.h"

namespace ddph {
namespace rendezvous {

class TcpServer {
 public:
  // Listens on port on every interface and starts serving `keys` to
  // clients of `job` holding the secret `sign` signs with (none when sign
  // is empty). `name` ("rank 0's tcp store at host:port") and `url` go in
  // messages. Throws DDPH_INVALID_ARGUMENT when the port is taken.
  TcpServer(int port, std::string url, std::string name, const StoreAccess& access,
            std::shared_ptr<KvStore> keys);
  // Stops serving: every client's connection is closed, and its next
  // request fails naming this store.
  ~TcpServer();
  TcpServer(const TcpServer&) = delete;
  TcpServer& operator=(const TcpServer&) = delete;

  // The clients refused so far, for messages ("" when none). [thread-safe]
  std::string refusals() const;

 private:
  struct Conn;
  void run();
  void accept_all();
  void on_frame(Conn& c, const std::string& body);
  void on_hello(Conn& c, const std::string& body);
  void on_proof(Conn& c, const std::string& body);
  void on_request(Conn& c, const std::string& body);
  void refuse(Conn& c, const std::string& why);
  void note_refusal(const std::string& text);
  bool read_from(Conn& c);
  bool write_to(Conn& c);

  const std::string url_, name_;
  const StoreAccess access_;
  const std::shared_ptr<KvStore> keys_;
  const std::string instance_;
  tcp::Fd listener_, wake_;
  std::vector<std::unique_ptr<Conn>> conns_;  // the server thread's alone
  mutable std::mutex mu_;
  std::vector<std::string> refusals_;
  size_t refused_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace rendezvous
}  // namespace ddph
