#include "plugins/comm_gloo/peer_identity.h"

#include <unistd.h>

#include <cstdlib>
#include <sstream>

namespace ddph {
namespace comm_gloo {

PeerIdentity PeerIdentity::mine(std::vector<std::string> gloo_addresses) {
  PeerIdentity me;
  char name[256] = {};
  me.host = gethostname(name, sizeof name - 1) == 0 ? name : "?";
  me.pid = std::to_string(getpid());
  me.gloo_addresses = std::move(gloo_addresses);
  return me;
}

std::string PeerIdentity::line() const {
  std::string addresses;
  for (const std::string& a : gloo_addresses) addresses += (addresses.empty() ? "" : ",") + a;
  return "peer host=" + host + " pid=" + pid + " addr=" + addresses;
}

PeerIdentity PeerIdentity::parse(const std::string& line, int rank) {
  PeerIdentity p;
  p.rank = rank;
  std::istringstream words(line);
  std::string word;
  words >> word;
  if (word != "peer") return p;
  while (words >> word) {
    const size_t eq = word.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = word.substr(0, eq), value = word.substr(eq + 1);
    if (key == "host") p.host = value;
    if (key == "pid") p.pid = value;
    if (key != "addr") continue;
    std::istringstream list(value);
    for (std::string a; std::getline(list, a, ',');)
      if (!a.empty()) p.gloo_addresses.push_back(a);
  }
  return p;
}

std::string PeerIdentity::describe(const std::string& gloo_address) const {
  return "rank " + std::to_string(rank) + " (pid " + pid + " on host " + host + ", listening on " +
         true_address(gloo_address) + ")";
}

std::string true_address(const std::string& gloo_address) {
  const size_t close = gloo_address.rfind("]:");
  if (gloo_address.empty() || gloo_address[0] != '[' || close == std::string::npos)
    return gloo_address;
  char* end = nullptr;
  const long swapped = std::strtol(gloo_address.c_str() + close + 2, &end, 10);
  if (*end != '\0' || swapped < 0 || swapped > 0xffff) return gloo_address;
  const long port = ((swapped & 0xff) << 8) | ((swapped >> 8) & 0xff);
  return gloo_address.substr(1, close - 1) + ":" + std::to_string(port);
}

std::string name_peers_in(const std::string& text, const std::vector<PeerIdentity>& peers) {
  std::string out = text;
  for (const PeerIdentity& p : peers) {
    if (p.rank < 0) continue;
    for (const std::string& address : p.gloo_addresses) {
      for (size_t at = out.find(address); at != std::string::npos; at = out.find(address, at)) {
        const std::string who = p.describe(address);
        out.replace(at, address.size(), who);
        at += who.size();
      }
    }
  }
  return out;
}

}  // namespace comm_gloo
}  // namespace ddph
