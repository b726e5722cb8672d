// Per-peer wire bytes: which of this rank's sockets leads to which rank.
//
// After connectFullMesh each rank publishes the two ends of every new
// socket ("local>remote", one a line) under its rank in the communicator's
// store namespace, then reads every other rank's list: the peer of a socket
// is the rank that lists the same two ends the other way round. This needs
// nothing from gloo's private pair state, and a socket that no peer lists
// (one the host opened meanwhile) simply stays unattributed.
#include <gloo/rendezvous/store.h>

#include <sstream>
#include <string>
#include <vector>

#include "plugins/comm_gloo/communicator.h"
#include "plugins/comm_gloo/peer_identity.h"

namespace ddph {
namespace comm_gloo {
namespace {

std::string endpoints_key(int rank) {
  return "ddph_wire_ends/" + std::to_string(rank);
}

}  // namespace

void Communicator::attribute_sockets(const std::vector<SocketEnds>& ends) {
  if (size() == 1) return;
  // First line: who this rank is, for messages about it (peer_identity.h):
  // its pid and host, and this side of each pair as gloo knows it.
  std::vector<std::string> pair_ends;
  for (int peer = 0; peer < size(); ++peer)
    if (peer != rank()) pair_ends.push_back(true_address(context_->getPair(peer)->address().str()));
  std::string mine = PeerIdentity::mine(pair_ends).line() + "\n";
  for (const SocketEnds& e : ends) mine += e.local + ">" + e.remote + "\n";
  gloo_call("publishing socket ends", rank(), [&] {
    prefix_store_->set(endpoints_key(rank()), std::vector<char>(mine.begin(), mine.end()));
  });
  peers_.assign(size_t(size()), PeerIdentity{});
  for (int peer = 0; peer < size(); ++peer) {
    if (peer == rank()) continue;
    std::vector<char> theirs, listening;
    gloo_call("reading socket ends", rank(), [&] {
      theirs = prefix_store_->get(endpoints_key(peer));
      listening = prefix_store_->get(std::to_string(peer));  // gloo's own key for its addresses
    });
    std::istringstream lines(std::string(theirs.begin(), theirs.end()));
    std::string line;
    PeerIdentity& who = peers_[size_t(peer)];
    if (std::getline(lines, line)) who = PeerIdentity::parse(line, peer);
    for (const std::string& a :
         addresses_in_gloo_rank_value(std::string(listening.begin(), listening.end())))
      who.addresses.push_back(a);
    while (std::getline(lines, line)) {
      for (const SocketEnds& e : ends) {
        if (line != e.remote + ">" + e.local) continue;
        wire_->set_peer(e.index, world_rank(peer));
        who.addresses.push_back(e.remote);  // its end of our socket
      }
    }
  }
}

std::string Communicator::name_peers(const std::string& text) const {
  return name_peers_in(text, peers_);
}

std::string Communicator::who_did_not_answer() const {
  std::string out;
  for (int peer : awaited_) {
    if (peer < 0 || peer >= size() || peer == rank()) continue;
    PeerIdentity who = size_t(peer) < peers_.size() ? peers_[size_t(peer)] : PeerIdentity{};
    who.rank = peer;
    if (who.pid.empty()) who.pid = "?";
    if (who.host.empty()) who.host = "?";
    if (!out.empty()) out += ", ";
    out += who.describe(who.addresses.empty() ? "an unknown address" : who.addresses.front());
  }
  if (out.empty()) return out;
  const bool several = awaited_.size() > 1;
  out += std::string(awaiting_recv_ ? " sent nothing" : " took nothing this rank sent") + " for " +
         std::to_string(config_.timeout.count()) + " ms: " + (several ? "each " : "") +
         "stalled (a stopped process) or overloaded, or making a different call (another "
         "collective, length, dtype, op or root)";
  return out;
}

uint64_t Communicator::bytes_sent_to(int peer) {
  if (peer < 0 || peer >= size() || peer == rank()) return 0;
  return wire_->to_peer(world_rank(peer));
}

}  // namespace comm_gloo
}  // namespace ddph
