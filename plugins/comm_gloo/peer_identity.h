// Who each peer of a communicator is, so that a message about a dead or
// silent peer names its rank, process and host. gloo's own messages name a
// peer only by its listening address, and print its port with the bytes
// swapped (gloo's tcp::Address::str() prints sin_port without ntohs).
#pragma once

#include <string>
#include <vector>

namespace ddph {
namespace comm_gloo {

struct PeerIdentity {
  int rank = -1;  // -1: unknown
  std::string host, pid;
  // The peer's listening addresses as gloo prints them: gloo listens once
  // per pair, so a peer has one address per rank it connects to.
  std::vector<std::string> gloo_addresses;

  // This process, listening at gloo_addresses.
  static PeerIdentity mine(std::vector<std::string> gloo_addresses);
  // One line, "peer host=H pid=P addr=A,B,...", as published in the store.
  std::string line() const;
  // The inverse of line() for rank's line; fields it lacks stay empty.
  static PeerIdentity parse(const std::string& line, int rank);
  // "rank 2 (pid 4711 on host node-3, listening on 10.0.0.3:29500)" for
  // the address gloo printed.
  std::string describe(const std::string& gloo_address) const;
};

// gloo's "[10.0.0.3]:15475" as "10.0.0.3:29500": the port's bytes swapped
// back. Text that is not of that form comes back unchanged.
std::string true_address(const std::string& gloo_address);

// text with every known peer's gloo address replaced by its description.
std::string name_peers_in(const std::string& text, const std::vector<PeerIdentity>& peers);

}  // namespace comm_gloo
}  // namespace ddph
