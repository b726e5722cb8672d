#include "plugins/comm_gloo/peer_identity.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace ddph {
namespace comm_gloo {
namespace {

// gloo 0.5's tcp::Address: sockaddr_storage, then a 64-bit sequence number.
constexpr size_t kGlooAddressBytes = sizeof(sockaddr_storage) + 8;

}  // namespace

PeerIdentity PeerIdentity::mine(std::vector<std::string> addresses) {
  PeerIdentity me;
  char name[256] = {};
  me.host = gethostname(name, sizeof name - 1) == 0 ? name : "?";
  me.pid = std::to_string(getpid());
  me.addresses = std::move(addresses);
  return me;
}

std::string PeerIdentity::line() const {
  std::string list;
  for (const std::string& a : addresses) list += (list.empty() ? "" : ",") + a;
  return "peer host=" + host + " pid=" + pid + " addr=" + list;
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
      if (!a.empty()) p.addresses.push_back(a);
  }
  return p;
}

std::string PeerIdentity::describe(const std::string& address) const {
  return "rank " + std::to_string(rank) + " (pid " + pid + " on host " + host + ", at " + address +
         ")";
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

std::vector<std::string> addresses_in_gloo_rank_value(const std::string& value) {
  std::vector<std::string> out;
  if (value.empty() || value.size() % kGlooAddressBytes != 0) return out;
  for (size_t at = 0; at < value.size(); at += kGlooAddressBytes) {
    sockaddr_storage ss{};
    std::memcpy(&ss, value.data() + at, sizeof ss);
    char ip[INET6_ADDRSTRLEN] = {};
    int port = 0;
    if (ss.ss_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(&ss);
      inet_ntop(AF_INET, &in->sin_addr, ip, sizeof ip);
      port = ntohs(in->sin_port);
    } else if (ss.ss_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&ss);
      inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof ip);
      port = ntohs(in6->sin6_port);
    } else {
      return {};
    }
    out.push_back(std::string(ip) + ":" + std::to_string(port));
  }
  return out;
}

std::string name_peers_in(const std::string& text, const std::vector<PeerIdentity>& peers) {
  std::string out;
  size_t from = 0;
  for (size_t open = text.find('['); open != std::string::npos; open = text.find('[', from)) {
    const size_t close = text.find("]:", open);
    size_t digits_end = close == std::string::npos ? close : close + 2;
    while (digits_end != std::string::npos && digits_end < text.size() && text[digits_end] >= '0' &&
           text[digits_end] <= '9')
      ++digits_end;
    if (close == std::string::npos || digits_end == close + 2 ||
        text.find(' ', open) < close) {  // not "[ip]:port"
      out += text.substr(from, open + 1 - from);
      from = open + 1;
      continue;
    }
    const std::string address = true_address(text.substr(open, digits_end - open));
    std::string who = address;
    for (const PeerIdentity& p : peers)
      if (std::find(p.addresses.begin(), p.addresses.end(), address) != p.addresses.end())
        who = p.describe(address);
    out += text.substr(from, open - from) + who;
    from = digits_end;
  }
  return out + text.substr(from);
}

}  // namespace comm_gloo
}  // namespace ddph
