// Who each peer of a communicator is, so that a message about a dead or
// silent peer names its rank, process and host. gloo's own messages name a
// peer only by an address, "[ip]:port", with the port's bytes swapped
// (tcp::Address::str() prints sin_port without ntohs); depending on which
// side of the pair connected, that address is the peer's listening socket
// or its end of the connection.
#pragma once

#include <string>
#include <vector>

namespace ddph {
namespace comm_gloo {

struct PeerIdentity {
  int rank = -1;  // -1: unknown
  std::string host, pid;
  std::vector<std::string> addresses;  // "ip:port" (real ports) the peer is known by

  // This process, known by addresses.
  static PeerIdentity mine(std::vector<std::string> addresses);
  // One line, "peer host=H pid=P addr=A,B,...", as published in the store.
  std::string line() const;
  // The inverse of line() for rank's line; fields it lacks stay empty.
  static PeerIdentity parse(const std::string& line, int rank);
  // "rank 2 (pid 4711 on host node-3, at 10.0.0.3:29500)".
  std::string describe(const std::string& address) const;
};

// gloo's "[10.0.0.3]:15475" as "10.0.0.3:29500": the port's bytes swapped
// back. Text that is not of that form comes back unchanged.
std::string true_address(const std::string& gloo_address);

// The listening addresses ("ip:port") in the value gloo's full-mesh
// rendezvous stores for a rank: one tcp::Address per pair, a
// sockaddr_storage and a sequence number each. Empty if the value is not of
// that shape (another gloo version).
std::vector<std::string> addresses_in_gloo_rank_value(const std::string& value);

// text with every gloo address in it written with its real port, and named
// by the peer it belongs to where one of peers is known by it.
std::string name_peers_in(const std::string& text, const std::vector<PeerIdentity>& peers);

}  // namespace comm_gloo
}  // namespace ddph
